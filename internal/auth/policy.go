package auth

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/rpcanswer"
	"github.com/rustbill/paymentd/internal/store"
)

// Access is who may call a procedure.
type Access int

const (
	// Public needs no credential (gateway callbacks, login, registration).
	Public Access = iota + 1
	// Authenticated needs any valid principal; the operation itself scopes
	// customers to their own data.
	Authenticated
	// CustomerOnly needs a customer (e.g. creating one's own API key).
	CustomerOnly
	// AdminOnly needs an admin.
	AdminOnly
)

func (a Access) String() string {
	switch a {
	case Public:
		return "public"
	case Authenticated:
		return "authenticated"
	case CustomerOnly:
		return "customer"
	case AdminOnly:
		return "admin"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// Policy maps every procedure ("/billing.payment.PaymentService/GetPayment")
// to who may call it. A procedure missing from the table is refused: a new
// operation is closed until someone decides who may call it.
type Policy map[string]Access

// Check answers whether the caller in ctx may call a procedure of access.
func Check(ctx context.Context, access Access) error {
	if access == Public {
		return nil
	}
	p, ok := FromContext(ctx)
	if !ok {
		if kind, reason, rejected := Rejected(ctx); rejected && reason == reasonUnchecked {
			if ended := ctx.Err(); ended != nil {
				// The check failed because the request ended (its client
				// went away, its deadline passed): nothing is unavailable.
				return rpcanswer.Ended(ended)
			}
			return connect.NewError(connect.CodeUnavailable, fmt.Errorf("the %s credential could not be checked; retry", kind))
		}
		return connect.NewError(connect.CodeUnauthenticated, errors.New("authentication required"))
	}
	switch access {
	case AdminOnly:
		if !p.IsAdmin() {
			return connect.NewError(connect.CodePermissionDenied, errors.New("admin only"))
		}
	case CustomerOnly:
		if p.Role != RoleCustomer {
			return connect.NewError(connect.CodePermissionDenied, errors.New("customers only"))
		}
	case Authenticated:
	default:
		return connect.NewError(connect.CodePermissionDenied, errors.New("access not configured"))
	}
	return nil
}

// ReasonEnrolmentRequired is the ErrorInfo reason of the PermissionDenied
// answer to an enrolling admin session (Principal.Enrolling) calling
// anything but an enrolment procedure; the console then shows enrolment.
const ReasonEnrolmentRequired = "totp_enrolment_required"

// NewInterceptor enforces policy on every unary call before the handler
// runs, and for an admin API key the scope the procedure needs (scopes).
// An enrolling admin session may call only the enrolment procedures.
func NewInterceptor(policy Policy, scopes Scopes, enrolment ...string) connect.Interceptor {
	enrol := make(map[string]bool, len(enrolment))
	for _, proc := range enrolment {
		enrol[proc] = true
	}
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			proc := req.Spec().Procedure
			access, ok := policy[proc]
			if !ok {
				return nil, connect.NewError(connect.CodePermissionDenied, errors.New("access not configured"))
			}
			if err := Check(ctx, access); err != nil {
				return nil, err
			}
			if access != Public {
				if err := checkScope(ctx, scopes, proc); err != nil {
					return nil, err
				}
				if !enrol[proc] {
					if err := refuseEnrolling(ctx); err != nil {
						return nil, err
					}
				}
			}
			return next(ctx, req)
		}
	})
}

// refuseEnrolling answers PermissionDenied, with ReasonEnrolmentRequired,
// to an enrolling admin session.
func refuseEnrolling(ctx context.Context) error {
	p, ok := FromContext(ctx)
	if !ok || !p.Enrolling {
		return nil
	}
	err := connect.NewError(connect.CodePermissionDenied, errors.New("two-factor sign-in is required ([admin].require_2fa): enrol it first"))
	if d, derr := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: ReasonEnrolmentRequired, Domain: "paymentd"}); derr == nil {
		err.AddDetail(d)
	}
	return err
}

// Require returns the caller, or an Unauthenticated domain error.
func Require(ctx context.Context) (Principal, error) {
	p, ok := FromContext(ctx)
	if !ok {
		return Principal{}, apperr.New(apperr.Unauthenticated, "authentication required")
	}
	return p, nil
}

// RequireAdmin returns the caller when it is an admin: Unauthenticated
// without a principal, PermissionDenied for a customer.
func RequireAdmin(ctx context.Context) (Principal, error) {
	p, err := Require(ctx)
	if err != nil {
		return p, err
	}
	if !p.IsAdmin() {
		return p, apperr.New(apperr.PermissionDenied, "admin only")
	}
	return p, nil
}

// CanAccessCustomer allows admins everything and customers their own data:
// a customer reading another customer's record gets PermissionDenied.
func CanAccessCustomer(p Principal, customerID uuid.UUID) error {
	if p.IsAdmin() || (p.Role == RoleCustomer && p.ID == customerID) {
		return nil
	}
	return apperr.New(apperr.PermissionDenied, "not yours")
}

// Owned is the answer to p's read by id of one row that belongs to
// customerID, readErr being the read's own error: missing when the row does
// not exist (store.ErrNotFound), readErr when the read failed otherwise,
// notYours when the row is another customer's, and nil when p may see it
// (an admin, or the row's customer). Most callers pass one error for both
// answers, so that to a customer another customer's row is none at all and
// the answer does not tell whether the id exists; each caller keeps the code
// its operation's contract gives (docs/api.md, "Errors by operation").
func Owned(p Principal, customerID uuid.UUID, readErr, missing, notYours error) error {
	switch {
	case errors.Is(readErr, store.ErrNotFound):
		return missing
	case readErr != nil:
		return readErr
	case CanAccessCustomer(p, customerID) != nil:
		return notYours
	}
	return nil
}

// CustomerScope is the customer a list must be limited to: the caller's own
// id for a customer, nil (everything) for an admin.
func CustomerScope(p Principal) *uuid.UUID {
	if p.IsAdmin() {
		return nil
	}
	id := p.ID
	return &id
}
