package store

import (
	"context"
	"errors"
	"fmt"
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

// Bug wraps err, which the caller's checks and locks should have made
// impossible, as Internal with a message for the logs (format and args) —
// unless err is the database itself failing the call: a dropped or refused
// connection, a shut-down or restarting server (IsUnavailable), no pooled
// connection free, a serialization failure or deadlock, a lock timeout,
// or the call's own context ending. Those are no bug: they come back
// wrapped with the message but keep their kind, so that the edge answers
// Unavailable or Aborted and the client retries (with its Idempotency-Key)
// instead of reading Internal. nil stays nil.
func Bug(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if Transient(err) {
		return fmt.Errorf(format+": %w", append(args, err)...)
	}
	return apperr.Wrap(apperr.Internal, err, format, args...)
}

// Transient reports whether err is the database failing a call, or the
// call's own context ending, rather than a fault of the call: see Bug.
func Transient(err error) bool {
	return DatabaseFailed(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// DatabaseFailed reports whether err holds the database failing the call:
// gone away or refusing (IsUnavailable), no pooled connection free, a
// serialization failure or deadlock to retry, a lock timeout.
func DatabaseFailed(err error) bool {
	return IsUnavailable(err) || errors.Is(err, ErrPoolBusy) || errors.Is(err, ErrRetryable) ||
		errors.Is(err, ErrLockNotAvailable)
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
