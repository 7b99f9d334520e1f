package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a domain error. Each maps to exactly one gRPC code.
type Kind int

const (
	// Internal is a bug or an unexpected failure; the client sees a generic message.
	Internal Kind = iota
	// InvalidArgument: the request is wrong (bad value, wrong state for it).
	InvalidArgument
	// NotFound: the named thing does not exist (or the caller may not know it does).
	NotFound
	// AlreadyExists: a duplicate (e.g. a callback applied before).
	AlreadyExists
	// PermissionDenied: authenticated, but not allowed.
	PermissionDenied
	// Unauthenticated: no valid credential.
	Unauthenticated
	// FailedPrecondition: the system is not in a state that allows the operation.
	FailedPrecondition
	// ResourceExhausted: a rate or size limit.
	ResourceExhausted
	// Unavailable: a dependency is down (circuit open, database unreachable); retry later.
	Unavailable
)

var kindNames = [...]string{"internal", "invalid_argument", "not_found", "already_exists", "permission_denied", "unauthenticated", "failed_precondition", "resource_exhausted", "unavailable"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is a domain error: a kind, a message safe to show the caller, and an
// optional cause kept for logs only.
type Error struct {
	Kind    Kind
	Message string
	Cause   error
	// Shown: an Internal error whose message was written for the caller
	// ("gateway refund failed: <the gateway's reason>") and reaches them;
	// any other Internal error answers a generic message. Errors of every
	// other kind always show their message.
	Shown bool
	// RetryAfter, when positive, is how long the caller should wait before
	// trying again (a limit that refused the call): answered as a
	// RetryInfo detail and a Retry-After header, as the rate limit does.
	RetryAfter time.Duration
	// Violation, when set, names the request field an InvalidArgument
	// error is about; the transport adds it as the buf.validate.Violations
	// detail the request validator gives for its own rules, so a program
	// reads either the same way. Made by Field.
	Violation *Violation
}

// Violation is a request field's broken rule: the field's name as the
// proto spells it ("ends_at"), a stable rule id ("paymentd.time_range")
// and what is wrong with the value.
type Violation struct {
	Field, Rule, Message string
}

// Show marks an Internal error's message as meant for the caller (see
// Error.Shown) and returns e.
func (e *Error) Show() *Error {
	e.Shown = true
	return e
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an error of kind with a caller-facing message.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Field returns an InvalidArgument error about one field of a request,
// worded as the request validator words its own violations
// ("validation error: ends_at: must be before 9999-01-01T00:00:00Z").
func Field(field, rule, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Kind: InvalidArgument, Message: "validation error: " + field + ": " + msg,
		Violation: &Violation{Field: field, Rule: rule, Message: msg}}
}

// Wrap returns an error of kind with a caller-facing message and a cause that
// is logged but never shown.
func Wrap(kind Kind, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Cause: cause}
}

// RetryLater returns a ResourceExhausted error that asks the caller to
// retry after retryAfter.
func RetryLater(retryAfter time.Duration, format string, args ...any) *Error {
	return &Error{Kind: ResourceExhausted, Message: fmt.Sprintf(format, args...), RetryAfter: retryAfter}
}

// KindOf returns the kind of the first *Error in err's chain, and false when
// there is none.
func KindOf(err error) (Kind, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, true
	}
	return Internal, false
}

// Is reports whether err carries a domain error of kind.
func Is(err error, kind Kind) bool {
	k, ok := KindOf(err)
	return ok && k == kind
}
