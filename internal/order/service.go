package order

import (
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// Service is the order domain: catalogue, orders, balance payment, invoices.
type Service struct {
	db         store.DB
	currencies []string
	// keys seals and opens the secrets of products' provider settings and
	// of the copies orders keep; nil without [secrets] keys.
	keys  *secrets.Keyring
	clock func() time.Time
	// billingClock is the billing clock when it is not clock
	// (WithBillingClock: [billing].test_clock); nil in production.
	billingClock func() time.Time
	// endNowCredit is [billing].end_now_credit: the most a customer who
	// ends a service now gets ("": DefaultEndNowCredit).
	endNowCredit EndCredit
	// balanceRefunder records EndService's balance credit as refunds of
	// the period's payments to the balance (WithBalanceRefunder); nil: a
	// balance credit is FailedPrecondition.
	balanceRefunder BalanceRefunder
	// planChangeDays and downgradeCredit are [billing].plan_change_days
	// and [billing].downgrade_credit (WithPlanChanges; zero: the
	// defaults).
	planChangeDays  int
	downgradeCredit EndCredit
	log             *slog.Logger
	// loc is the billing time zone, whose year names an invoice's number
	// series (nil: UTC); SetLocation sets it.
	loc *time.Location
}

// WithBillingClock returns s with the billing clock c ([billing].test_clock
// on): the periods' dates its operations check are against c's now.
func (s *Service) WithBillingClock(c func() time.Time) *Service {
	s.billingClock = c
	return s
}

// billingNow is the billing clock's now: the service's clock unless the
// test clock moved it.
func (s *Service) billingNow() time.Time {
	if s.billingClock == nil {
		return s.now()
	}
	return store.Timestamp(s.billingClock())
}

// NewService returns the order domain over db. currencies is
// [billing].currencies, the set every product, order and invoice currency
// must belong to; keys is the keyring of [secrets] (nil: none, and a
// product's provider settings may then hold no secret); clock is the time
// source (nil: time.Now).
func NewService(db store.DB, currencies []string, keys *secrets.Keyring, clock func() time.Time, log *slog.Logger) *Service {
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, currencies: slices.Clone(currencies), keys: keys, clock: clock, log: log}
}

// SetLocation sets the billing time zone ([billing].time_zone), in which
// the year of an invoice's number series is counted. Call it before the
// service serves.
func (s *Service) SetLocation(loc *time.Location) { s.loc = loc }

// now is the clock in UTC at PostgreSQL's precision, so a time written and
// read back compares equal.
func (s *Service) now() time.Time {
	return store.Timestamp(s.clock())
}

// Now is the order domain's time, as its operations take it: the renewal
// overview's "now" when the billing run has no test clock of its own.
func (s *Service) Now() time.Time { return s.now() }

// checkCurrency refuses a currency outside [billing].currencies.
func (s *Service) checkCurrency(c string) error {
	if !slices.Contains(s.currencies, c) {
		return apperr.New(apperr.InvalidArgument, "currency %q is not accepted (accepted: %s)", c, strings.Join(s.currencies, ", "))
	}
	return nil
}

// scope limits a list to the caller's own rows: a customer gets its own id
// (asking for another customer's rows is PermissionDenied), an admin what
// it asked for.
func scope(p auth.Principal, asked *uuid.UUID) (*uuid.UUID, error) {
	own := auth.CustomerScope(p)
	if own == nil {
		return asked, nil
	}
	if asked != nil && *asked != *own {
		return nil, apperr.New(apperr.PermissionDenied, "customers may list only their own")
	}
	return own, nil
}
