package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// Service is the admin side of plugins and gateway interfaces, and the
// customers' list of payment methods. Its methods fall in two halves, one
// file each: plugin administration (plugin_admin.go: list, read, reload,
// enable, admin pages) and gateway interfaces with the payment methods they
// offer (interfaces.go). They stay one type because each half reads the
// other's rows: an admin page shows an interface's masked config, and a
// test of an interface explains a plugin that is not loaded. What both
// halves share is here: the writing transaction, the clock, the keyring
// and callFailure.
type Service struct {
	db    store.DB
	reg   *Registry
	clock func() time.Time
	log   *slog.Logger
}

// write runs a transaction that changes gateway interfaces or plugins, and
// then makes the registry forget the interfaces it has read, so this
// process sees the change at once (other instances within the registry's
// cache TTL).
func (s *Service) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := store.WithTx(ctx, s.db, fn)
	if s.reg != nil {
		s.reg.Invalidate()
	}
	return err
}

// NewService returns the gateway domain over db and the registry; clock is
// the time source (nil: time.Now).
func NewService(db store.DB, reg *Registry, clock func() time.Time, log *slog.Logger) *Service {
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, reg: reg, clock: clock, log: log}
}

func (s *Service) now() time.Time { return store.Timestamp(s.clock()) }

// keys is the keyring that seals and opens interface secrets (the
// registry's); nil when none is configured.
func (s *Service) keys() *secrets.Keyring {
	if s.reg == nil {
		return nil
	}
	return s.reg.secrets
}

// callFailure maps a failed plugin call: an open circuit is Unavailable
// naming the host (docs/decisions.md), a caller that went away keeps its
// context error, anything else is Internal with the cause in the logs.
func callFailure(err error, pluginName, fn string) error {
	var open *outbound.CircuitOpenError
	switch {
	case errors.As(err, &open):
		return apperr.Wrap(apperr.Unavailable, err, "circuit open for host %s; retry after %s", open.Host, open.RetryAt.UTC().Format(time.RFC3339))
	case errors.Is(err, context.Canceled):
		return err
	}
	return apperr.Wrap(apperr.Internal, err, "plugin %q: %s failed", pluginName, fn)
}
