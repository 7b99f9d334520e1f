package payment

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
)

// Service is the payment domain.
type Service struct {
	db             store.DB
	log            *slog.Logger
	gateways       Gateways
	publicURL      string
	reconcileAfter time.Duration
	lateCapture    time.Duration
	clock          func() time.Time
	// billingClock is the billing clock when it is not clock
	// (WithBillingClock); nil in production.
	billingClock func() time.Time
	metrics      Metrics
	// reads picks the database of the heavy reads (WithReads).
	reads func() store.DB
	// disputeSuspend is [disputes].suspend (WithDisputeSuspend).
	disputeSuspend bool
	// admins queues the admins' notices (WithAdminNotices); nil: none.
	admins AdminNotifier
}

// AdminNotifier queues a notice for the admins in db (the caller's
// transaction): internal/notify's Notifier.
type AdminNotifier interface {
	NotifyAdmins(ctx context.Context, db store.DB, eventType string, data map[string]string) error
}

// WithDisputeSuspend sets [disputes].suspend: a dispute suspends its
// order's service until it is won (default on).
func WithDisputeSuspend(on bool) Option { return func(s *Service) { s.disputeSuspend = on } }

// WithAdminNotices sets where the admins' notices go (disputes).
func WithAdminNotices(n AdminNotifier) Option { return func(s *Service) { s.admins = n } }

// SetAdminNotices sets the admins' notifier after construction (the
// notifier is built with the background services, after this one).
func (s *Service) SetAdminNotices(n AdminNotifier) { s.admins = n }

// Option configures a Service.
type Option func(*Service)

// WithGateways sets the gateway interfaces (the plugin registry). Without
// it, every operation that needs a gateway answers Unavailable.
func WithGateways(g Gateways) Option { return func(s *Service) { s.gateways = g } }

// WithPublicURL sets [server].public_url, the base of the notify URL given
// to gateways (public_url + "/callbacks/{gateway_interface_id}").
func WithPublicURL(u string) Option {
	return func(s *Service) { s.publicURL = strings.TrimRight(u, "/") }
}

// WithReconcileAfter sets [billing].reconcile_after: a pending gateway
// payment is first checked with its gateway this long after its creation.
func WithReconcileAfter(d time.Duration) Option {
	return func(s *Service) { s.reconcileAfter = d }
}

// WithLateCapture sets [payments].late_capture_days as a duration:
// QueryPaymentStatus also asks the gateway about a gateway payment that
// failed at most this long ago, whose money may have been captured after
// all (0: never).
func WithLateCapture(d time.Duration) Option {
	return func(s *Service) { s.lateCapture = max(d, 0) }
}

// WithReads sets where the heavy reads go: GetPaymentTrends,
// GetPaymentStats and an admin's ListPayments read reads() (a read replica
// while it is close enough behind, internal/replica); without it, the
// service's db. Nothing that decides on money uses it.
func WithReads(reads func() store.DB) Option { return func(s *Service) { s.reads = reads } }

// WithClock sets the time source (default time.Now).
func WithClock(clock func() time.Time) Option { return func(s *Service) { s.clock = clock } }

// WithBillingClock sets the billing clock when [billing].test_clock moves
// it away from the service's clock: a renewal invoice a payment completes
// pays its period at the payment's time moved onto it. Without it (in
// production) the billing clock is the service's.
func WithBillingClock(clock func() time.Time) Option {
	return func(s *Service) { s.billingClock = clock }
}

// Defaults of the options.
const (
	DefaultPublicURL      = "http://127.0.0.1:50051"
	DefaultReconcileAfter = 10 * time.Minute
	DefaultLateCapture    = 7 * 24 * time.Hour
)

// NewService returns the payment domain over db.
func NewService(db store.DB, log *slog.Logger, opts ...Option) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{db: db, log: log, disputeSuspend: true, publicURL: DefaultPublicURL, reconcileAfter: DefaultReconcileAfter, lateCapture: DefaultLateCapture, clock: time.Now, metrics: noMetrics{}}
	for _, o := range opts {
		o(s)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.reconcileAfter <= 0 {
		s.reconcileAfter = DefaultReconcileAfter
	}
	if s.reads == nil {
		s.reads = func() store.DB { return s.db }
	}
	return s
}

// now is the clock in UTC at PostgreSQL's precision, so a time written and
// read back compares equal.
func (s *Service) now() time.Time {
	return store.Timestamp(s.clock())
}

// billingNow is the billing clock's now when it is not the service's (the
// test clock), zero otherwise: an order.InvoiceMove's BillingAt.
func (s *Service) billingNow() time.Time {
	if s.billingClock == nil {
		return time.Time{}
	}
	return store.Timestamp(s.billingClock())
}

// billingTime is the billing clock's now: the test clock's when it is on,
// the service's own otherwise.
func (s *Service) billingTime() time.Time {
	if t := s.billingNow(); !t.IsZero() {
		return t
	}
	return s.now()
}

// Get returns one payment: admins any, customers their own (another customer's
// payment is PermissionDenied, as the API contract says: docs/api.md, "Errors by
// operation").
func (s *Service) Get(ctx context.Context, id uuid.UUID) (store.Payment, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Payment{}, err
	}
	pay, err := store.Q(s.db).GetPayment(ctx, id)
	err = auth.Owned(p, pay.CustomerID, err,
		apperr.New(apperr.NotFound, "payment %s not found", id),
		apperr.New(apperr.PermissionDenied, "payment %s belongs to another customer", id))
	if err != nil {
		return store.Payment{}, err
	}
	return pay, nil
}

// List returns a page of payments, newest first. A customer sees only their
// own payments whatever the filter says.
func (s *Service) List(ctx context.Context, f store.PaymentFilter, page, size uint32) ([]store.Payment, paging.Page, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	f.CustomerID = auth.CustomerScope(p)
	// An admin's list is a report and may read the replica; a customer's
	// is not: one who has just paid lists to see the payment, which a
	// replica a few seconds behind would not show yet.
	db := s.db
	if f.CustomerID == nil {
		db = s.reads()
	}
	rows, total, err := store.ListPayments(ctx, db, f, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, paging.Page{}, err
	}
	return rows, pg.WithTotal(total), nil
}
