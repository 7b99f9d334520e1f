package fulfillment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
	"github.com/rustbill/paymentd/internal/text"
)

// Refunder gives the money of a cancelled order back. It must be
// idempotent: called again for an order it has refunded, it refunds
// nothing more and returns nil. The payment domain implements it.
type Refunder interface {
	RefundOrder(ctx context.Context, orderID uuid.UUID, reason string) error
}

// Notifier queues notifications inside the caller's transaction
// (*notify.Notifier implements it).
type Notifier interface {
	// Sends is false when no channel is configured: nothing would be
	// queued, so the order and the customer are not read for it.
	Sends() bool
	Enqueue(ctx context.Context, db store.DB, n notify.Notice) (int, error)
}

// Audit actions written by this package (audit_log.action).
const (
	ActionInstanceCreate = "instance.create"
	ActionInstanceReady  = "instance.provisioned"
	ActionInstanceFailed = "instance.failed"
	// ActionInstanceTerminated: the provider ended the instance because its
	// order was refunded, terminated or completed.
	ActionInstanceTerminated = "instance.terminated"
	// ActionInstanceSuspended and ActionInstanceResumed: the provider
	// suspended the instance because its order was suspended, or brought it
	// back because its order is active again.
	ActionInstanceSuspended = "instance.suspended"
	ActionInstanceResumed   = "instance.resumed"
	// ActionInstancePlanChanged: the provider moved the instance to the
	// order's new plan (plan_changed).
	ActionInstancePlanChanged = "instance.plan_changed"
	// ActionAutoRefund marks that the automatic refund of an
	// order_cancelled event was done (after.event_id names the event).
	ActionAutoRefund = "order.auto_refund"
)

// Failure reasons of the pending payments the timeout scan and a failed
// provisioning fail (payments.failure_reason).
const (
	failedByTimeout      = "payment timeout"
	failedByProvisioning = "order cancelled: provisioning failed"
)

// The defaults of Options, and of [billing].payment_timeout and
// [events].timeout_scan_interval.
const (
	DefaultPaymentTimeout      = 24 * time.Hour
	DefaultTimeoutScanInterval = time.Minute
)

// Options configure the Service. Zero durations take the defaults above.
type Options struct {
	// Node is this instance's node id, the actor of the audit rows.
	Node string
	// PaymentTimeout: pending orders older than this are cancelled
	// ([billing].payment_timeout).
	PaymentTimeout time.Duration
	// TimeoutScanInterval: how often the worker looks for them
	// ([events].timeout_scan_interval).
	TimeoutScanInterval time.Duration
	// Clock is the business clock (order and audit times, the timeout
	// cutoff); nil: time.Now.
	Clock func() time.Time
	// BillingClock is the billing clock when it is not Clock
	// ([billing].test_clock on): the first service period of an order
	// that goes active starts at its now. Nil: Clock (production).
	BillingClock func() time.Time
	// BillingLocation is the billing time zone ([billing].time_zone) the
	// first service period of a recurring order is counted in; nil: UTC.
	BillingLocation *time.Location
	Logger          *slog.Logger
	// TimeoutScans, set by tests only, counts the payment timeout scans
	// (event.Periodic's Rounds). Nil in the service.
	TimeoutScans *testsignal.Signal
}

// Service is the fulfilment of orders: the handlers of order_paid,
// order_provisioned, order_cancelled, order_refunded and of the service_*
// events of the renewal cycle, and the payment timeout scan.
type Service struct {
	db       store.DB
	prov     Provisioner
	refunder Refunder
	notifier Notifier
	opts     Options
	log      *slog.Logger
}

// New returns the fulfilment service. refunder and notifier may be nil (no
// refunds: an order_cancelled event with refund_due fails until one is
// wired; no notifications).
func New(db store.DB, prov Provisioner, refunder Refunder, notifier Notifier, opts Options) *Service {
	opts.PaymentTimeout = cmp.Or(max(opts.PaymentTimeout, 0), DefaultPaymentTimeout)
	opts.TimeoutScanInterval = cmp.Or(max(opts.TimeoutScanInterval, 0), DefaultTimeoutScanInterval)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Node == "" {
		opts.Node = "paymentd"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Service{db: db, prov: prov, refunder: refunder, notifier: notifier, opts: opts,
		log: opts.Logger.With("component", "fulfillment")}
}

// Register installs the handlers and the payment timeout scan on w.
func (s *Service) Register(w *event.Worker) {
	// The two events of every order batch (HandleOrderPaidBatch).
	w.Handle(order.EventOrderPaid, orderPaid{s})
	w.Handle(order.EventOrderProvisioned, orderProvisioned{s})
	w.Handle(order.EventOrderCancelled, event.HandlerFunc(s.HandleOrderCancelled))
	w.Handle(order.EventOrderRefunded, event.HandlerFunc(s.HandleOrderRefunded))
	w.Handle(order.EventServiceSuspended, event.HandlerFunc(s.HandleServiceChange))
	w.Handle(order.EventServiceResumed, event.HandlerFunc(s.HandleServiceChange))
	w.Handle(order.EventServiceTerminated, event.HandlerFunc(s.HandleServiceChange))
	w.Handle(order.EventServiceRenewed, event.HandlerFunc(s.HandleServiceRenewed))
	w.Handle(order.EventPlanChanged, event.HandlerFunc(s.HandlePlanChanged))
	w.Handle(order.EventPlanChangeLapsed, event.HandlerFunc(s.HandlePlanChangeLapsed))
	w.Handle(event.TypeRenewalReminder, event.HandlerFunc(s.HandleRenewalReminder))
	w.Every(event.Periodic{Name: "payment timeout", Every: s.opts.TimeoutScanInterval, Rounds: s.opts.TimeoutScans, Run: func(ctx context.Context) error {
		_, err := s.CancelExpiredOrders(ctx)
		return err
	}})
}

func (s *Service) now() time.Time { return store.Timestamp(s.opts.Clock()) }

// actor is this node, the system actor of what the worker changes.
func (s *Service) actor() audit.Actor { return audit.System(s.opts.Node) }

// audit writes an audit_log row with this node as the system actor.
func (s *Service) audit(ctx context.Context, db store.DB, at time.Time, action, entityType, entityID string, before, after any) error {
	return audit.Write(ctx, db, s.actor(), at, action, entityType, entityID, before, after)
}

// ---- order_paid ----

// HandleOrderPaid provisions a paid order:
//
//  1. one transaction: order paid → provisioning (provisioning stays), the
//     order's instance row created (provisioning) or found;
//  2. the provider is called outside any transaction;
//  3. success, one transaction: instance → running with the provider's id
//     and details, order → active, order_provisioned {order_id,
//     instance_id};
//  4. failure: retried by the queue; when the provider refused for good
//     (ErrRefused) or this was the last attempt, one transaction: instance
//     → error, order → cancelled (provisioning_failed), its pending
//     payments failed, order_cancelled {order_id, provisioning_failed,
//     refund_due: true}.
//
// An order that is neither paid nor provisioning has been dealt with: the
// event is done without doing anything. A product without provider plugin
// has nothing to provision: the order becomes active at once, with an
// order_provisioned whose instance_id is null.
func (s *Service) HandleOrderPaid(ctx context.Context, e event.Event) error {
	var p order.OrderPaidPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("order_paid payload: %w", err))
	}
	log := s.log.With("event_id", e.ID, "order_id", e.OrderID, "attempt", e.Attempt)

	var req ProvisionRequest
	done := false
	err := e.Tx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := lockEventOrder(ctx, tx, e)
		if err != nil {
			return err
		}
		now := s.now()
		switch order.Status(o.Status) {
		case order.StatusPaid:
			moved, err := order.Transition(ctx, tx, o, order.Move{To: order.StatusProvisioning, By: s.actor(), At: now})
			if err != nil {
				return err
			}
			o = moved.Order
		case order.StatusProvisioning:
		default:
			log.InfoContext(ctx, "order_paid: nothing to do", "order_status", o.Status)
			done = true
			return e.Complete(ctx, tx)
		}
		var product *store.Product
		if o.ProductID != nil {
			pr, err := store.Q(tx).GetProduct(ctx, *o.ProductID)
			if err != nil {
				return err
			}
			product = &pr
		}
		if product == nil || product.ProviderPlugin == nil {
			done = true
			if err := s.activate(ctx, tx, o, nil, now); err != nil {
				return err
			}
			return e.Complete(ctx, tx)
		}
		// The order row is locked: nobody creates its instance meanwhile.
		inst, err := store.Q(tx).GetOrderInstance(ctx, o.ID)
		if errors.Is(err, store.ErrNotFound) {
			inst, err = s.createInstance(ctx, tx, o, *product, now)
		}
		if err != nil {
			return err
		}
		if inst.Status != store.InstanceProvisioning {
			return event.Permanent(fmt.Errorf("order %s is provisioning but its instance %s is %s", o.ID, inst.ID, inst.Status))
		}
		req = ProvisionRequest{Order: o, Product: *product, Instance: inst}
		return nil
	})
	if err != nil || done {
		return err
	}

	externalID, details, perr := s.prov.Provision(ctx, req)
	if perr == nil {
		orphaned := false
		err := e.Tx(ctx, s.db, func(tx pgx.Tx) error {
			o, err := store.Q(tx).GetOrderForUpdate(ctx, e.OrderID)
			if err != nil {
				return err
			}
			if orphaned, err = s.recordProvisioned(ctx, tx, o, &req, externalID, details, log); err != nil {
				return err
			}
			return e.Complete(ctx, tx)
		})
		if err == nil && orphaned {
			// The event is done; a failure here is logged and left to
			// order_refunded's retries (which find the instance running).
			if terr := s.terminate(ctx, req); terr != nil {
				log.WarnContext(ctx, "could not end the instance of a refunded order", "err", terr)
			}
		}
		return err
	}

	return s.provisionFailed(ctx, e, req, perr, log)
}

// createInstance creates the instance row of o (locked in tx, without
// one), provisioning, with its audit row.
func (s *Service) createInstance(ctx context.Context, tx pgx.Tx, o store.Order, product store.Product, now time.Time) (store.Instance, error) {
	inst, err := store.Q(tx).EnsureOrderInstance(ctx, store.EnsureOrderInstanceParams{
		CustomerID: o.CustomerID, OrderID: o.ID, ProductID: &product.ID,
		ProviderPlugin: product.ProviderPlugin, Name: product.Name, At: now,
	})
	if err != nil {
		return store.Instance{}, err
	}
	return inst, s.auditInstanceCreated(ctx, tx, o, product, inst, now)
}

// auditInstanceCreated writes the audit row of inst, created for o.
func (s *Service) auditInstanceCreated(ctx context.Context, tx pgx.Tx, o store.Order, product store.Product, inst store.Instance, now time.Time) error {
	return s.audit(ctx, tx, now, ActionInstanceCreate, "instance", inst.ID.String(), nil,
		map[string]any{"order_id": o.ID, "status": inst.Status, "provider_plugin": product.ProviderPlugin})
}

// auditInstanceReady writes the audit row of inst, provisioned.
func (s *Service) auditInstanceReady(ctx context.Context, tx pgx.Tx, inst store.Instance, now time.Time) error {
	return s.audit(ctx, tx, now, ActionInstanceReady, "instance", inst.ID.String(),
		map[string]any{"status": store.InstanceProvisioning},
		map[string]any{"status": inst.Status, "external_id": inst.ExternalID})
}

// recordProvisioned records in tx what the provider answered for
// req.Instance and moves o (locked in tx) to active: recordProvisionedAll
// for one order. orphaned says that o was refunded while the provider
// worked, so its instance must be ended once tx commits.
func (s *Service) recordProvisioned(ctx context.Context, tx pgx.Tx, o store.Order, req *ProvisionRequest, externalID string, details json.RawMessage, log *slog.Logger) (orphaned bool, err error) {
	orphans, err := s.recordProvisionedAll(ctx, tx, []store.Order{o}, []*ProvisionRequest{req},
		[]providerAnswer{{externalID, details}}, func(int) *slog.Logger { return log })
	return len(orphans) > 0, err
}

// provisionFailed records that the provider failed to provision req for
// e's attempt: the error on the instance, to be retried; on the last
// attempt, or for ErrRefused, the instance in error and the order
// cancelled (refund due).
func (s *Service) provisionFailed(ctx context.Context, e event.Event, req ProvisionRequest, perr error, log *slog.Logger) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return perr // the worker is stopping: hand the event back
	}
	final := errors.Is(perr, ErrRefused) || e.LastAttempt()
	// The attempt's context may have run out (a provider slower than the
	// handler timeout): the bookkeeping below gets a few seconds of its own.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if !final {
		err := e.Tx(bctx, s.db, func(tx pgx.Tx) error {
			return store.Q(tx).SetInstanceLastError(bctx, store.SetInstanceLastErrorParams{
				ID: req.Instance.ID, LastError: text.Clip(perr.Error(), 1000), At: s.now(),
			})
		})
		if err != nil {
			log.WarnContext(ctx, "could not record the provisioning error on the instance", "err", err)
		}
		return perr
	}
	log.WarnContext(ctx, "provisioning failed for good; cancelling the order", "err", perr)
	return e.Tx(bctx, s.db, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(bctx, e.OrderID)
		if err != nil {
			return err
		}
		if order.Status(o.Status) != order.StatusProvisioning {
			return nil
		}
		now := s.now()
		inst, err := store.Q(tx).MarkInstanceFailed(bctx, store.MarkInstanceFailedParams{
			ID: req.Instance.ID, LastError: text.Clip(perr.Error(), 1000), At: now,
		})
		if err != nil {
			return err
		}
		if err := s.audit(bctx, tx, now, ActionInstanceFailed, "instance", inst.ID.String(),
			map[string]any{"status": store.InstanceProvisioning},
			map[string]any{"status": inst.Status, "last_error": inst.LastError}); err != nil {
			return err
		}
		return s.cancel(bctx, tx, o, order.CancelReasonProvisioningFailed, true, failedByProvisioning, now)
	})
}

// activate moves a provisioning order to active (queuing
// order_provisioned), in tx.
func (s *Service) activate(ctx context.Context, tx pgx.Tx, o store.Order, instanceID *uuid.UUID, now time.Time) error {
	_, err := order.Transition(ctx, tx, o, s.activeMove(instanceID, now))
	return err
}

// activeMove is the move provisioning → active of an order whose instance
// (nil: nothing to provision) the provider made.
func (s *Service) activeMove(instanceID *uuid.UUID, now time.Time) order.Move {
	m := order.Move{To: order.StatusActive, By: s.actor(), At: now, InstanceID: instanceID, Location: s.opts.BillingLocation}
	if s.opts.BillingClock != nil {
		m.BillingAt = store.Timestamp(s.opts.BillingClock())
	}
	return m
}

// cancel moves o to cancelled with reason, failing its pending payments
// and queuing order_cancelled, in tx.
func (s *Service) cancel(ctx context.Context, tx pgx.Tx, o store.Order, reason string, refundDue bool, paymentReason string, now time.Time) error {
	_, err := order.Transition(ctx, tx, o, order.Move{
		To: order.StatusCancelled, By: s.actor(), At: now,
		CancelReason: reason, RefundDue: refundDue, FailReason: paymentReason,
	})
	return err
}

// ---- order_refunded ----

// HandleOrderRefunded ends the service of an order whose money went back in
// full: its instance, when it has a running one, is terminated at the
// provider (retried like any handler while the provider fails), and the
// customer and the admins are told. An instance still being provisioned is
// left to the order_paid handler, which finds the order refunded when the
// provider answers and ends the instance itself.
func (s *Service) HandleOrderRefunded(ctx context.Context, e event.Event) error {
	var p order.OrderRefundedPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("order_refunded payload: %w", err))
	}
	req, live, err := s.instanceOf(ctx, e.OrderID)
	if err != nil {
		return err
	}
	data := map[string]string{"payment_id": p.PaymentID.String(), "refund_id": p.RefundID.String()}
	if live {
		if err := s.terminate(ctx, req); err != nil {
			return err
		}
		data["instance_id"] = req.Instance.ID.String()
	}
	return s.notify(ctx, e, data)
}

// instanceOf reads the order's instance and its product; live reports
// whether the provider has it (running, stopped or suspended, with an
// external id) and it is not terminated yet.
func (s *Service) instanceOf(ctx context.Context, orderID uuid.UUID) (ProvisionRequest, bool, error) {
	inst, err := store.Q(s.db).GetOrderInstance(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) {
		return ProvisionRequest{}, false, nil
	}
	if err != nil {
		return ProvisionRequest{}, false, err
	}
	req := ProvisionRequest{Instance: inst}
	if inst.ProductID != nil {
		if req.Product, err = store.Q(s.db).GetProduct(ctx, *inst.ProductID); err != nil {
			return ProvisionRequest{}, false, err
		}
	}
	switch inst.Status {
	case store.InstanceProvisioning, store.InstanceError, store.InstanceTerminated:
		return req, false, nil
	}
	return req, inst.ExternalID != "", nil
}

// terminate ends req.Instance at its provider and records it (terminated,
// with an audit row). Ending an instance already recorded terminated does
// nothing. The record is not fenced: it is what the provider did, true
// whichever attempt made it (and the order_paid handler calls this after
// its event is done).
func (s *Service) terminate(ctx context.Context, req ProvisionRequest) error {
	if err := s.converge(ctx, req, store.InstanceTerminated); err != nil {
		return err
	}
	return store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		return s.recordInstance(ctx, tx, req.Instance, store.InstanceTerminated, "order refunded", uuid.Nil)
	})
}

// converge asks req.Instance's provider to bring it to status target:
// suspended (suspend), running (unsuspend) or terminated (terminate).
func (s *Service) converge(ctx context.Context, req ProvisionRequest, target string) error {
	var err error
	verb := "terminate"
	switch target {
	case store.InstanceSuspended:
		verb, err = "suspend", s.prov.Suspend(ctx, req)
	case store.InstanceRunning:
		verb, err = "unsuspend", s.prov.Unsuspend(ctx, req)
	case store.InstanceTerminated:
		err = s.prov.Terminate(ctx, req)
	default:
		return fmt.Errorf("instance %s: no provider action leads to %q", req.Instance.ID, target)
	}
	if err != nil {
		return fmt.Errorf("%s instance %s: %w", verb, req.Instance.ID, err)
	}
	return nil
}

// recordInstance records in tx that the provider brought before (the
// instance as read before the call) to status target, with an audit row
// saying why (and, when eventID is set, which event asked). An instance
// that is there already, or no longer live (terminated is final), is left
// as it is.
func (s *Service) recordInstance(ctx context.Context, tx pgx.Tx, before store.Instance, target, why string, eventID uuid.UUID) error {
	now := s.now()
	var inst store.Instance
	var err error
	action := ActionInstanceTerminated
	switch target {
	case store.InstanceTerminated:
		inst, err = store.Q(tx).MarkInstanceTerminated(ctx, store.MarkInstanceTerminatedParams{ID: before.ID, At: now})
	case store.InstanceSuspended:
		action = ActionInstanceSuspended
		inst, err = store.Q(tx).SetInstanceStatus(ctx, store.SetInstanceStatusParams{ID: before.ID, Status: target, At: now})
	default:
		action = ActionInstanceResumed
		inst, err = store.Q(tx).SetInstanceStatus(ctx, store.SetInstanceStatusParams{ID: before.ID, Status: target, At: now})
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil // recorded by another path already
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "instance "+inst.Status+" at the provider", "order_id", inst.OrderID, "instance_id", inst.ID,
		"external_id", inst.ExternalID, "reason", why)
	after := map[string]any{"status": inst.Status, "reason": why}
	if eventID != uuid.Nil {
		after["event_id"] = eventID
	}
	return s.audit(ctx, tx, now, action, "instance", inst.ID.String(), map[string]any{"status": before.Status}, after)
}

// ---- service_suspended, service_resumed, service_terminated ----

// instanceTarget is the instance status an order's status calls for:
// suspended while the order is suspended, running while it is active,
// terminated once it is terminated or completed. Any other status governs
// no instance here ("": nothing to do): a refunded order's instance is
// order_refunded's, the rest have none that runs.
func instanceTarget(s order.Status) string {
	switch s {
	case order.StatusSuspended:
		return store.InstanceSuspended
	case order.StatusActive:
		return store.InstanceRunning
	case order.StatusTerminated, order.StatusCompleted:
		return store.InstanceTerminated
	}
	return ""
}

// needsAction reports whether the provider must act to bring inst to
// target. Only a live provisioned instance (an external id; running,
// stopped or suspended) is acted on: a terminated one is final, and one
// still provisioning or in error is order_paid's. Resuming acts on a
// suspended instance only: one the customer stopped stays stopped.
func needsAction(inst store.Instance, target string) bool {
	if inst.ExternalID == "" {
		return false
	}
	switch inst.Status {
	case store.InstanceRunning, store.InstanceStopped:
		return target == store.InstanceSuspended || target == store.InstanceTerminated
	case store.InstanceSuspended:
		return target == store.InstanceRunning || target == store.InstanceTerminated
	}
	return false
}

// HandleServiceChange handles service_suspended, service_resumed and
// service_terminated alike: it converges the order's instance on what the
// order's status says now, not on what the event says, since a retried or
// late event may run after a later move (a service_suspended handled once
// the order was resumed suspends nothing):
//
//  1. one transaction, the order row locked: the order, its instance, and
//     the status the order calls for (instanceTarget). With no instance
//     (nothing to provision), or the instance there already, the notices
//     are queued and the event is done in this same transaction;
//  2. the provider is asked outside any transaction (suspend, unsuspend or
//     terminate); an error fails the attempt and the queue retries it with
//     its backoff — the provider's actions are idempotent, so a retry after
//     a lost answer does no harm;
//  3. one transaction: the instance's new status and its audit row, the
//     notices, the event done.
//
// The notices tell what the event says happened to the order (suspended,
// resumed, ended, with the payload's reason): it did happen, even when a
// later move has already undone it, and its own event follows.
func (s *Service) HandleServiceChange(ctx context.Context, e event.Event) error {
	var p order.ServicePayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("%s payload: %w", e.Type, err))
	}
	log := s.log.With("event_id", e.ID, "event_type", e.Type, "order_id", e.OrderID, "attempt", e.Attempt)
	data := map[string]string{"reason": p.Reason}
	if p.CreditMode != "" && p.Credited != nil {
		// A service ended now: what of the unused share the customer gets
		// (the currency is the order's, filled in with it).
		data["credit_mode"], data["credited"] = p.CreditMode, p.Credited.String()
	}
	var req ProvisionRequest
	var target, why string
	act := false
	err := e.Tx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := lockEventOrder(ctx, tx, e)
		if err != nil {
			return err
		}
		target, why = instanceTarget(order.Status(o.Status)), "order "+o.Status
		inst, err := store.Q(tx).GetOrderInstance(ctx, o.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			data["instance_id"] = inst.ID.String()
			act = target != "" && needsAction(inst, target)
		}
		if !act {
			log.DebugContext(ctx, "service event: nothing to do at the provider", "order_status", o.Status, "instance_status", inst.Status)
			return s.queueNotices(ctx, tx, e, &o, data)
		}
		req = ProvisionRequest{Order: o, Instance: inst}
		if inst.ProductID != nil {
			if req.Product, err = store.Q(tx).GetProduct(ctx, *inst.ProductID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || !act {
		return err
	}

	if err := s.converge(ctx, req, target); err != nil {
		return err
	}

	return e.Tx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, e.OrderID)
		if err != nil {
			return err
		}
		// Recorded whatever became of the order meanwhile: it is what the
		// provider has now; a later move has its own event, which
		// converges the instance again.
		if err := s.recordInstance(ctx, tx, req.Instance, target, why, e.ID); err != nil {
			return err
		}
		return s.queueNotices(ctx, tx, e, &o, data)
	})
}

// ---- plan_changed, plan_change_lapsed ----

// planData is the notices' data of a plan change.
func planData(p order.PlanChangedPayload) map[string]string {
	data := map[string]string{
		"change_id": p.ChangeID.String(), "to_product_id": p.ToProduct.String(), "when": p.When,
		"from_price": p.FromPrice.String(), "to_price": p.ToPrice.String(), "amount": p.Amount.String(),
		"credited": p.Credited.String(), "currency": p.Currency,
	}
	if p.InvoiceID != nil {
		data["invoice_id"] = p.InvoiceID.String()
	}
	return data
}

// HandlePlanChanged asks the order's provider to move its instance to the
// new product's plan (PlanChanger: change_plan), records it (an
// instance.plan_changed audit row naming the event) and queues the
// notices. An order without a provisioned, live instance, or a provisioner
// that changes no plans, gets the notices only. A failed call fails the
// attempt and the queue retries it (change_plan is idempotent).
func (s *Service) HandlePlanChanged(ctx context.Context, e event.Event) error {
	var p order.PlanChangedPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("plan_changed payload: %w", err))
	}
	data := planData(p)
	changer, canChange := s.prov.(PlanChanger)
	var req ProvisionRequest
	act := false
	err := e.Tx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := lockEventOrder(ctx, tx, e)
		if err != nil {
			return err
		}
		inst, err := store.Q(tx).GetOrderInstance(ctx, o.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			data["instance_id"] = inst.ID.String()
			act = canChange && inst.ExternalID != "" &&
				(inst.Status == store.InstanceRunning || inst.Status == store.InstanceStopped || inst.Status == store.InstanceSuspended)
		}
		if !act {
			return s.queueNotices(ctx, tx, e, &o, data)
		}
		req = ProvisionRequest{Order: o, Instance: inst}
		if req.Product, err = store.Q(tx).GetProduct(ctx, p.ToProduct); err != nil {
			return err
		}
		return nil
	})
	if err != nil || !act {
		return err
	}
	if err := changer.ChangePlan(ctx, req); err != nil {
		return fmt.Errorf("change the plan of instance %s: %w", req.Instance.ID, err)
	}
	return e.Tx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, e.OrderID)
		if err != nil {
			return err
		}
		now := s.now()
		if err := s.audit(ctx, tx, now, ActionInstancePlanChanged, "instance", req.Instance.ID.String(),
			map[string]any{"product_id": req.Instance.ProductID},
			map[string]any{"product_id": p.ToProduct, "change_id": p.ChangeID, "event_id": e.ID}); err != nil {
			return err
		}
		s.log.InfoContext(ctx, "instance plan changed at the provider", "order_id", o.ID, "instance_id", req.Instance.ID,
			"product_id", p.ToProduct)
		return s.queueNotices(ctx, tx, e, &o, data)
	})
}

// HandlePlanChangeLapsed queues the notices of a lapsed plan change: the
// provider has nothing to do (the order kept its plan).
func (s *Service) HandlePlanChangeLapsed(ctx context.Context, e event.Event) error {
	var p order.PlanChangedPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("plan_change_lapsed payload: %w", err))
	}
	return s.notify(ctx, e, planData(p))
}

// ---- service_renewed ----

// HandleServiceRenewed queues the notices of a paid renewal: the provider
// has nothing to do (a resumption has its own service_resumed event).
func (s *Service) HandleServiceRenewed(ctx context.Context, e event.Event) error {
	var p order.ServiceRenewedPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("service_renewed payload: %w", err))
	}
	return s.notify(ctx, e, map[string]string{
		"invoice_id": p.InvoiceID.String(),
		"period":     strconv.Itoa(int(p.Period)),
		"starts_at":  p.StartsAt.UTC().Format(time.RFC3339),
		"ends_at":    p.EndsAt.UTC().Format(time.RFC3339),
		"amount":     p.Amount.String(),
		"currency":   p.Currency,
		"resumed":    strconv.FormatBool(p.Resumed),
	})
}

// HandleRenewalReminder queues the notices about an unpaid renewal invoice
// (issued, due soon, overdue). The billing run queues each at most once
// per period; the notices table, once per event.
func (s *Service) HandleRenewalReminder(ctx context.Context, e event.Event) error {
	var p order.RenewalReminderPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("renewal_reminder payload: %w", err))
	}
	return s.notify(ctx, e, map[string]string{
		"invoice_id": p.InvoiceID.String(),
		"period":     strconv.Itoa(int(p.Period)),
		"kind":       p.Kind,
		"days":       strconv.Itoa(p.Days),
		"due_at":     p.DueAt.UTC().Format(time.RFC3339),
		"amount":     p.Amount.String(),
		"currency":   p.Currency,
	})
}

// ---- order_provisioned ----

// HandleOrderProvisioned queues the notifications to the customer and the
// admins. Queuing twice queues nothing twice (one row per event, channel
// and recipient).
func (s *Service) HandleOrderProvisioned(ctx context.Context, e event.Event) error {
	var p order.OrderProvisionedPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("order_provisioned payload: %w", err))
	}
	data := map[string]string{}
	if p.InstanceID != nil {
		data["instance_id"] = p.InstanceID.String()
	}
	return s.notify(ctx, e, data)
}

// ---- order_cancelled ----

// HandleOrderCancelled refunds the order when the payload says a refund is
// due, then queues the notifications.
//
// The refund happens once per event even when the event is retried: as
// soon as Refunder.RefundOrder has returned, an audit row is committed
// (order.auto_refund, after.event_id = the event), and a retry that finds
// it does not call the Refunder again. Only a crash between the refund and
// that commit calls it twice, which is why RefundOrder must be idempotent
// itself.
func (s *Service) HandleOrderCancelled(ctx context.Context, e event.Event) error {
	var p order.OrderCancelledPayload
	if err := e.Decode(&p); err != nil {
		return event.Permanent(fmt.Errorf("order_cancelled payload: %w", err))
	}
	if p.RefundDue {
		done, err := store.AuditedForEvent(ctx, s.db, "order", e.OrderID.String(), ActionAutoRefund, e.ID)
		if err != nil {
			return err
		}
		if !done {
			if s.refunder == nil {
				return errors.New("a refund is due but no refunder is configured")
			}
			if err := s.refunder.RefundOrder(ctx, e.OrderID, p.Reason); err != nil {
				return fmt.Errorf("refund: %w", err)
			}
			// Recorded even if the attempt's context ends right now, and
			// outside the claim's fence (event.Tx): the money has moved,
			// whichever attempt moved it, and the mark only spares a later
			// attempt asking the (idempotent) refunder again.
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err := s.audit(mctx, s.db, s.now(), ActionAutoRefund, "order", e.OrderID.String(), nil,
				map[string]any{"event_id": e.ID, "reason": p.Reason})
			cancel()
			if err != nil {
				return fmt.Errorf("order refunded, but recording it failed (a retry asks the refunder again): %w", err)
			}
			s.log.InfoContext(ctx, "order refunded", "event_id", e.ID, "order_id", e.OrderID, "reason", p.Reason)
		}
	}
	return s.notify(ctx, e, map[string]string{"reason": p.Reason, "refund_due": strconv.FormatBool(p.RefundDue)})
}

// notify queues the notices of e in one transaction.
func (s *Service) notify(ctx context.Context, e event.Event, data map[string]string) error {
	if s.notifier == nil {
		return nil
	}
	return e.Tx(ctx, s.db, func(tx pgx.Tx) error {
		return s.queueNotices(ctx, tx, e, nil, data)
	})
}

// queueNotices queues the notices of e in tx, about order o (nil: read
// here), and completes e: queuing the notices is an event's last step, it
// is done when they are (one commit, not two). Nothing is read for nobody
// when no channel is configured. data's amount and currency, when set (a
// renewal's), are kept; the order's fill them otherwise.
func (s *Service) queueNotices(ctx context.Context, tx pgx.Tx, e event.Event, o *store.Order, data map[string]string) error {
	if s.notifier == nil || !s.notifier.Sends() {
		return e.Complete(ctx, tx)
	}
	if o == nil {
		got, err := store.Q(tx).GetOrder(ctx, e.OrderID)
		if err != nil {
			return err
		}
		o = &got
	}
	c, err := store.GetCustomer(ctx, tx, o.CustomerID)
	if err != nil {
		return err
	}
	data["order_id"] = o.ID.String()
	data["customer_id"] = o.CustomerID.String()
	data["description"] = o.Description
	if _, ok := data["amount"]; !ok {
		data["amount"] = o.TotalAmount.String()
		data["currency"] = o.Currency
	}
	n, err := s.notifier.Enqueue(ctx, tx, notify.Notice{
		EventID: e.ID, EventType: e.Type, CustomerEmail: c.Email, CustomerName: c.Name, Data: data,
	})
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.InfoContext(ctx, "notifications queued", "event_id", e.ID, "order_id", e.OrderID, "event_type", e.Type, "count", n)
	}
	return e.Complete(ctx, tx)
}

// ---- payment timeout ----

// CancelExpiredOrders cancels every order still pending PaymentTimeout
// after it was created (by the business clock): one transaction per order
// with the order row locked and its status checked again (a payment that
// arrived meanwhile wins), the order cancelled (reason timeout), its
// pending payments failed, and order_cancelled {timeout, refund_due:
// false} queued. It returns how many it cancelled.
func (s *Service) CancelExpiredOrders(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.opts.PaymentTimeout)
	const batch = 100
	total := 0
	for {
		ids, err := store.Q(s.db).ListPendingOrdersCreatedBefore(ctx, store.ListPendingOrdersCreatedBeforeParams{
			Cutoff: cutoff, RowLimit: int32(batch),
		})
		if err != nil {
			return total, err
		}
		for _, id := range ids {
			ok, err := s.cancelExpired(ctx, id, cutoff)
			if err != nil {
				return total, fmt.Errorf("cancel expired order %s: %w", id, err)
			}
			if ok {
				total++
				s.log.InfoContext(ctx, "order cancelled: payment timeout", "order_id", id, "timeout", s.opts.PaymentTimeout.String())
			}
		}
		if len(ids) < batch {
			return total, nil
		}
	}
}

func (s *Service) cancelExpired(ctx context.Context, id uuid.UUID, cutoff time.Time) (bool, error) {
	cancelled := false
	err := store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if order.Status(o.Status) != order.StatusPending || !o.CreatedAt.Before(cutoff) {
			return nil
		}
		if err := s.cancel(ctx, tx, o, order.CancelReasonTimeout, false, failedByTimeout, s.now()); err != nil {
			return err
		}
		cancelled = true
		return nil
	})
	return cancelled, err
}

// lockEventOrder locks the order event e is about, in tx; an order that
// does not exist fails the event for good.
func lockEventOrder(ctx context.Context, tx pgx.Tx, e event.Event) (store.Order, error) {
	o, err := store.Q(tx).GetOrderForUpdate(ctx, e.OrderID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Order{}, event.Permanent(fmt.Errorf("order %s does not exist", e.OrderID))
	}
	return o, err
}
