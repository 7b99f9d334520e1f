package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// StartAdminTOTP stores a pending enrolment's sealed secret, replacing an
// earlier pending one; ErrConflict when the admin's 2FA is confirmed.
func StartAdminTOTP(ctx context.Context, db DB, id uuid.UUID, sealed string, now time.Time) error {
	n, err := dbsqlc.New(db).StartAdminTotp(ctx, dbsqlc.StartAdminTotpParams{TotpSecret: &sealed, UpdatedAt: now, ID: id})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrConflict
	}
	return nil
}

// ConfirmAdminTOTP confirms the pending enrolment of sealed whose first code
// was of step; ErrNotFound when there is no such pending enrolment.
func ConfirmAdminTOTP(ctx context.Context, db DB, id uuid.UUID, sealed string, step int64, now time.Time) error {
	n, err := dbsqlc.New(db).ConfirmAdminTotp(ctx, dbsqlc.ConfirmAdminTotpParams{UpdatedAt: &now, Step: step, ID: id, TotpSecret: &sealed})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// UseAdminTOTPStep accepts a code of step once; false when a code of this
// step or a later one was accepted before (a replay).
func UseAdminTOTPStep(ctx context.Context, db DB, id uuid.UUID, step int64) (bool, error) {
	n, err := dbsqlc.New(db).UseAdminTotpStep(ctx, dbsqlc.UseAdminTotpStepParams{Step: step, ID: id})
	return n == 1, MapError(err)
}

// ClearAdminTOTP removes an admin's 2FA and recovery codes; false when
// they had none.
func ClearAdminTOTP(ctx context.Context, db DB, id uuid.UUID, now time.Time) (bool, error) {
	q := dbsqlc.New(db)
	n, err := q.ClearAdminTotp(ctx, dbsqlc.ClearAdminTotpParams{UpdatedAt: now, ID: id})
	if err != nil {
		return false, MapError(err)
	}
	return n == 1, MapError(q.DeleteAdminRecoveryCodes(ctx, id))
}

// ReplaceAdminRecoveryCodes stores hashes (SHA-256 each) as the admin's
// recovery codes, in place of any they had.
func ReplaceAdminRecoveryCodes(ctx context.Context, db DB, id uuid.UUID, hashes [][]byte, now time.Time) error {
	q := dbsqlc.New(db)
	if err := q.DeleteAdminRecoveryCodes(ctx, id); err != nil {
		return MapError(err)
	}
	for _, h := range hashes {
		if err := q.InsertAdminRecoveryCode(ctx, dbsqlc.InsertAdminRecoveryCodeParams{AdminID: id, CodeHash: h, CreatedAt: now}); err != nil {
			return MapError(err)
		}
	}
	return nil
}

// UseAdminRecoveryCode spends the recovery code of hash; false when it is
// unknown or spent.
func UseAdminRecoveryCode(ctx context.Context, db DB, id uuid.UUID, hash []byte, now time.Time) (bool, error) {
	n, err := dbsqlc.New(db).UseAdminRecoveryCode(ctx, dbsqlc.UseAdminRecoveryCodeParams{UsedAt: &now, AdminID: id, CodeHash: hash})
	return n == 1, MapError(err)
}

// CountAdminRecoveryCodesLeft counts the admin's unspent recovery codes.
func CountAdminRecoveryCodesLeft(ctx context.Context, db DB, id uuid.UUID) (int64, error) {
	n, err := dbsqlc.New(db).CountAdminRecoveryCodesLeft(ctx, id)
	return n, MapError(err)
}
