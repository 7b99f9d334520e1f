package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

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

// SecondFactorBudget is how many second-factor codes an admin may get wrong
// in a row before codes are locked out, and for how long.
type SecondFactorBudget struct {
	// FreeFailures is the number of wrong codes in a row after which the
	// lock starts: the FreeFailures-th wrong code locks for BaseLock, each
	// one after it for twice as long as the one before, at most MaxLock.
	FreeFailures int32
	BaseLock     time.Duration
	MaxLock      time.Duration
}

// LockAfter is how long the failures-th wrong code in a row locks further
// codes out; 0 while it is free.
func (b SecondFactorBudget) LockAfter(failures int32) time.Duration {
	if failures < b.FreeFailures {
		return 0
	}
	d := b.BaseLock
	for i := b.FreeFailures; i < failures && d < b.MaxLock; i++ {
		d *= 2
	}
	return min(d, b.MaxLock)
}

// SecondFactorAttempt is what CountAdminSecondFactorAttempt answers.
type SecondFactorAttempt struct {
	// Allowed is false while a lock holds (or the admin's second factor
	// went away meanwhile): the code must not be judged.
	Allowed bool
	// Failures is the count of wrong codes in a row, this one included
	// when Allowed (counted before it is judged).
	Failures int32
	// LockedUntil is when codes are judged again: after this one when
	// Allowed, else the lock that refused it; nil when there is none.
	LockedUntil *time.Time
}

// CountAdminSecondFactorAttempt counts the admin's next second-factor code
// as wrong before it is judged, unless a lock holds at now; a right code
// then sets the count back (UseAdminTOTPStep, ResetAdminSecondFactorFailures).
// The row is locked for it, so that attempts racing on every instance are
// counted one after the other and none slips past a lock another just set.
func CountAdminSecondFactorAttempt(ctx context.Context, db DB, id uuid.UUID, now time.Time, b SecondFactorBudget) (SecondFactorAttempt, error) {
	var out SecondFactorAttempt
	err := WithTx(ctx, db, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		row, err := q.LockAdminSecondFactor(ctx, id)
		if err != nil {
			return MapError(err)
		}
		if !row.Confirmed || (row.TotpLockedUntil != nil && now.Before(*row.TotpLockedUntil)) {
			out = SecondFactorAttempt{Failures: row.TotpFailures, LockedUntil: row.TotpLockedUntil}
			return nil
		}
		out = SecondFactorAttempt{Allowed: true, Failures: row.TotpFailures + 1}
		if d := b.LockAfter(out.Failures); d > 0 {
			t := now.Add(d)
			out.LockedUntil = &t
		}
		return MapError(q.SetAdminSecondFactorFailures(ctx, dbsqlc.SetAdminSecondFactorFailuresParams{Failures: out.Failures, LockedUntil: out.LockedUntil, ID: id}))
	})
	return out, err
}

// ResetAdminSecondFactorFailures ends the admin's run of wrong codes and any
// lock; false when there was none.
func ResetAdminSecondFactorFailures(ctx context.Context, db DB, id uuid.UUID) (bool, error) {
	n, err := dbsqlc.New(db).ResetAdminSecondFactorFailures(ctx, id)
	return n == 1, MapError(err)
}
