package auth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
)

// ErrNoCredential is what an Authenticator returns when the request carries no
// credential of its kind.
var ErrNoCredential = errors.New("no credential of this kind")

// reasonUnchecked marks a credential that could not be checked (the
// database or the cache failed): Check answers Unavailable for it, not
// Unauthenticated — a client must retry, not throw its session away.
const reasonUnchecked = "could not be checked"

// Invalid is returned by an Authenticator for a credential that is present but
// not valid; Reason goes to the logs, never to the client.
type Invalid struct{ Reason string }

func (e *Invalid) Error() string { return "invalid credential: " + e.Reason }

// Authenticator checks one credential kind.
type Authenticator interface {
	Kind() Kind
	// Authenticate returns the principal for the request's credential of this
	// kind; ErrNoCredential when there is none; *Invalid when it is present but
	// not valid; any other error when it could not be checked (the database
	// is down, say) — the request then stays unauthenticated as well.
	Authenticate(ctx context.Context, r *http.Request) (Principal, error)
}

// Layer is the HTTP middleware for one credential kind.
func Layer(a Authenticator, log *slog.Logger) func(http.Handler) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			s := stateFrom(ctx)
			if s == nil {
				s = &state{}
				ctx = context.WithValue(ctx, ctxKey{}, s)
				r = r.WithContext(ctx)
			}
			if s.principal != nil || s.rejected != "" {
				// An earlier layer decided.
				next.ServeHTTP(w, r)
				return
			}
			p, err := a.Authenticate(ctx, r)
			var inv *Invalid
			switch {
			case err == nil:
				s.principal = &p
			case errors.Is(err, ErrNoCredential):
			case errors.As(err, &inv):
				s.rejected, s.reason = a.Kind(), inv.Reason
				log.InfoContext(ctx, "credential rejected", "kind", a.Kind(), "reason", inv.Reason)
			case ctx.Err() != nil:
				// The request ended under the check (Check answers it
				// Canceled or DeadlineExceeded): no fault to warn of.
				s.rejected, s.reason = a.Kind(), reasonUnchecked
				log.DebugContext(ctx, "credential not checked: the request ended", "kind", a.Kind(), "err", err)
			default:
				s.rejected, s.reason = a.Kind(), reasonUnchecked
				log.WarnContext(ctx, "credential could not be checked", "kind", a.Kind(), "err", err)
			}
			next.ServeHTTP(w, r)
		})
	}
}
