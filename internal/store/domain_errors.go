package store

import (
	"errors"
	"time"

	"github.com/rustbill/paymentd/internal/apperr"
)

// NotFound names a row that a read by id did not find: ErrNotFound becomes
// a NotFound domain error whose message (format and args) the caller sees;
// nil and every other error pass unchanged. The store answers a bare
// ErrNotFound, which reaches a client as "not found"; the domain says what
// was missing.
func NotFound(err error, format string, args ...any) error {
	if errors.Is(err, ErrNotFound) {
		return apperr.New(apperr.NotFound, format, args...)
	}
	return err
}

// BugIfNotFound turns an ErrNotFound that the locks held make impossible (a
// row that must exist, a guarded update that must match) into Internal, so
// that it never reaches the caller as NotFound; doing says what failed, for
// the logs. Other errors (cancellation, a lost connection) pass unchanged.
func BugIfNotFound(err error, doing string) error {
	if errors.Is(err, ErrNotFound) {
		return apperr.Wrap(apperr.Internal, err, "%s", doing)
	}
	return err
}

// Timestamp is t as a timestamptz column keeps it: in UTC and truncated to
// PostgreSQL's microseconds, so a time written and read back compares
// equal (time.Time's == and Equal alike).
func Timestamp(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
