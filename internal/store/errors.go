package store

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Domain errors of the store. Test with errors.Is; the edge maps them to
// connect codes. A constraint violation comes wrapped in an *Error that names
// the constraint, for callers that must tell constraints apart (e.g.
// ErrConflict on payments_one_pending_key means "return the pending payment").
var (
	// ErrNotFound: the row does not exist (pgx.ErrNoRows).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique or exclusion constraint refused a duplicate.
	ErrConflict = errors.New("conflict with an existing row")
	// ErrCheckViolation: a CHECK constraint (or an append-only or
	// final-state trigger, which report as one) refused the row.
	ErrCheckViolation = errors.New("check constraint violated")
	// ErrForeignKeyViolation: a referenced row is missing, or a row still
	// referenced (ON DELETE RESTRICT) was to be deleted.
	ErrForeignKeyViolation = errors.New("foreign key violated")
	// ErrNotNullViolation: a required column was NULL.
	ErrNotNullViolation = errors.New("required value missing")
	// ErrInvalidValue: PostgreSQL refused a value (SQLSTATE class 22: bad
	// text representation, numeric out of the NUMERIC(12,2) range, ...).
	ErrInvalidValue = errors.New("invalid value")
	// ErrRetryable: a serialization failure or deadlock; the whole
	// transaction may be retried.
	ErrRetryable = errors.New("transaction conflict, retry")
	// ErrLockNotAvailable: a NOWAIT lock or lock_timeout gave up.
	ErrLockNotAvailable = errors.New("lock not available")
	// ErrUnavailable: the database cannot be reached or dropped the
	// connection (shut down, restarting, terminated, too many connections);
	// the request may be tried again. A transaction whose commit met it may
	// or may not have committed: every write of the service is safe to
	// repeat (a callback answers AlreadyExists, a CreatePayment returns the
	// pending payment).
	ErrUnavailable = errors.New("database unavailable")
)

// Error is a database error translated by MapError. Its message names the
// kind and the constraint, never SQL text or row values (the PostgreSQL
// detail, which carries key values, is dropped).
type Error struct {
	// Kind is one of the Err* values of this package; errors.Is matches it.
	Kind error
	// Code is the SQLSTATE, e.g. "23505".
	Code string
	// Constraint, Table and Column are as reported by PostgreSQL; any may be empty.
	Constraint string
	Table      string
	Column     string
}

func (e *Error) Error() string {
	msg := "store: " + e.Kind.Error()
	switch {
	case e.Constraint != "":
		msg += fmt.Sprintf(" (constraint %s)", e.Constraint)
	case e.Table != "" && e.Column != "":
		msg += fmt.Sprintf(" (column %s.%s)", e.Table, e.Column)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Kind }

// MapError translates a pgx error into the store's domain errors:
// pgx.ErrNoRows becomes ErrNotFound; a PostgreSQL error with a known SQLSTATE
// becomes an *Error wrapping ErrConflict, ErrCheckViolation,
// ErrForeignKeyViolation, ErrNotNullViolation, ErrInvalidValue, ErrRetryable
// or ErrLockNotAvailable. nil, already translated errors and every other error
// (context cancellation, network failures) are returned unchanged.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	kind := kindOf(pgErr.Code)
	if kind == nil {
		return err
	}
	return &Error{
		Kind:       kind,
		Code:       pgErr.Code,
		Constraint: pgErr.ConstraintName,
		Table:      pgErr.TableName,
		Column:     pgErr.ColumnName,
	}
}

// kindOf maps a SQLSTATE to a domain error, nil when the store has none for it.
func kindOf(code string) error {
	switch code {
	case "23505", // unique_violation
		"23P01": // exclusion_violation
		return ErrConflict
	case "23514": // check_violation
		return ErrCheckViolation
	case "23503": // foreign_key_violation
		return ErrForeignKeyViolation
	case "23502": // not_null_violation
		return ErrNotNullViolation
	case "40001", // serialization_failure
		"40P01": // deadlock_detected
		return ErrRetryable
	case "55P03": // lock_not_available
		return ErrLockNotAvailable
	case "57P01", // admin_shutdown (pg_terminate_backend, a fast shutdown)
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now (starting up, shutting down)
		"53300": // too_many_connections
		return ErrUnavailable
	}
	if len(code) == 5 && code[:2] == "08" { // connection_exception class
		return ErrUnavailable
	}
	if len(code) == 5 && code[:2] == "22" { // data_exception class
		return ErrInvalidValue
	}
	return nil
}

// IsUnavailable reports whether err means the database could not be
// reached or dropped the connection: ErrUnavailable, or an error that
// never reached MapError's SQLSTATEs — a failed connect, a refused or reset
// connection, a connection closed under the query.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return kindOf(pgErr.Code) == ErrUnavailable
	}
	var connectErr *pgconn.ConnectError
	var opErr *net.OpError
	switch {
	case errors.As(err, &connectErr), errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	// SafeToRetry: pgx knows the query never reached the server (the
	// connection failed first).
	return pgconn.SafeToRetry(err) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) ||
		inChain(err, func(e error) bool { return e.Error() == "conn closed" || e.Error() == "closed pool" })
}

// inChain reports whether f holds for err or any error it wraps. A
// connection closed under a transaction, or a pool closed at shutdown
// (puddle's "closed pool"), comes wrapped by the layers above: a match on
// the outermost message alone missed it, and the call answered Internal.
func inChain(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if inChain(e, f) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// ConstraintOf returns the name of the constraint behind err, "" when err is
// not a constraint violation translated by MapError.
func ConstraintOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Constraint
	}
	return ""
}

// countThenList is the one shape of every paged list: the count of the
// whole list (for the page's total), then the page — not asked for when the
// page lies past the end.
func countThenList[T any](count func() (int64, error), offset int64, list func() ([]T, error)) ([]T, int64, error) {
	total, err := count()
	if err != nil {
		return nil, 0, MapError(err)
	}
	if total == 0 || offset >= total {
		return nil, total, nil
	}
	rows, err := list()
	return rows, total, MapError(err)
}
