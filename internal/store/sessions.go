package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	DeleteExpiredAdminSessionsParams = dbsqlc.DeleteExpiredAdminSessionsParams
	SetAdminLastLoginParams          = dbsqlc.SetAdminLastLoginParams
)

// Admin is a row of admin_users.
type Admin struct {
	ID           uuid.UUID
	Username     string
	PasswordHash string
	DisplayName  string
	DisabledAt   *time.Time
	LastLoginAt  *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// TOTPSecret is the sealed TOTP secret, "" without 2FA; it is asked for
	// at login once TOTPConfirmedAt is set. TOTPLastStep is the time step
	// of the last code accepted.
	TOTPSecret      string
	TOTPConfirmedAt *time.Time
	TOTPLastStep    int64
	// TOTPFailures counts the second-factor codes judged wrong in a row;
	// TOTPLockedUntil is when codes are judged again after too many.
	TOTPFailures    int32
	TOTPLockedUntil *time.Time
}

func adminResult(a dbsqlc.AdminUser, err error) (Admin, error) {
	if err != nil {
		return Admin{}, MapError(err)
	}
	return Admin{
		ID:           a.ID,
		Username:     a.Username,
		PasswordHash: a.PasswordHash,
		DisplayName:  a.DisplayName,
		DisabledAt:   a.DisabledAt,
		LastLoginAt:  a.LastLoginAt,
		CreatedAt:    a.CreatedAt,
		UpdatedAt:    a.UpdatedAt,
		TOTPSecret:   deref(a.TotpSecret), TOTPConfirmedAt: a.TotpConfirmedAt, TOTPLastStep: a.TotpLastStep,
		TOTPFailures: a.TotpFailures, TOTPLockedUntil: a.TotpLockedUntil,
	}, nil
}

// GetAdminByUsername finds an admin by login name; ErrNotFound when there is none.
func GetAdminByUsername(ctx context.Context, db DB, username string) (Admin, error) {
	return adminResult(dbsqlc.New(db).GetAdminByUsername(ctx, username))
}

// GetAdmin reads an admin; ErrNotFound when there is none.
func GetAdmin(ctx context.Context, db DB, id uuid.UUID) (Admin, error) {
	return adminResult(dbsqlc.New(db).GetAdminByID(ctx, id))
}

// Session is a row of sessions. ID is SHA-256 of the session token.
type Session struct {
	ID                []byte
	AdminID           uuid.UUID
	UserAgent         string
	RemoteAddr        string
	CreatedAt         time.Time
	LastSeenAt        time.Time
	AbsoluteExpiresAt time.Time
}

// SessionWithAdmin is a session and the state of its admin.
type SessionWithAdmin struct {
	Session
	AdminUsername   string
	AdminDisabledAt *time.Time
	// AdminTOTP is whether the admin has confirmed a second factor.
	AdminTOTP bool
}

// InsertSession stores a new session; every time in s is written as given.
func InsertSession(ctx context.Context, db DB, s Session) (Session, error) {
	r, err := dbsqlc.New(db).InsertSession(ctx, dbsqlc.InsertSessionParams{
		ID:                s.ID,
		AdminID:           s.AdminID,
		UserAgent:         s.UserAgent,
		RemoteAddr:        s.RemoteAddr,
		CreatedAt:         s.CreatedAt,
		LastSeenAt:        s.LastSeenAt,
		AbsoluteExpiresAt: s.AbsoluteExpiresAt,
	})
	if err != nil {
		return Session{}, MapError(err)
	}
	return Session(r), nil
}

// GetSession reads a session with its admin's state; ErrNotFound when there
// is none.
func GetSession(ctx context.Context, db DB, id []byte) (SessionWithAdmin, error) {
	r, err := dbsqlc.New(db).GetSessionWithAdmin(ctx, id)
	if err != nil {
		return SessionWithAdmin{}, MapError(err)
	}
	return SessionWithAdmin{
		Session: Session{
			ID:                r.ID,
			AdminID:           r.AdminID,
			UserAgent:         r.UserAgent,
			RemoteAddr:        r.RemoteAddr,
			CreatedAt:         r.CreatedAt,
			LastSeenAt:        r.LastSeenAt,
			AbsoluteExpiresAt: r.AbsoluteExpiresAt,
		},
		AdminUsername:   r.AdminUsername,
		AdminDisabledAt: r.AdminDisabledAt,
		AdminTOTP:       r.AdminTotp,
	}, nil
}

// TouchSession moves last_seen_at forward to at (never back) and reports
// whether the session still exists and was moved.
func TouchSession(ctx context.Context, db DB, id []byte, at time.Time) (bool, error) {
	n, err := dbsqlc.New(db).TouchSession(ctx, dbsqlc.TouchSessionParams{ID: id, LastSeenAt: at})
	return n > 0, MapError(err)
}

// DeleteSession removes a session and reports whether it existed.
func DeleteSession(ctx context.Context, db DB, id []byte) (bool, error) {
	n, err := dbsqlc.New(db).DeleteSession(ctx, id)
	return n > 0, MapError(err)
}
