package app

import (
	"context"
	"runtime/debug"
	"slices"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/event/eventrpc"
	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/idempotency"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/reconcile"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/server"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// background is the cluster side of an instance: the LISTEN connection,
// the heartbeat, the billing and event_worker leader roles and what each
// role runs (docs/architecture.md, "Who runs what"): the event worker with
// its fulfilment handlers, the housekeeping (the trends fold, the
// idempotency key sweep, retention), the reconciler and the billing run;
// and the notification sender. services lists them in start order.
type background struct {
	node      string
	listener  *cluster.Listener
	wake      *wakeAfterCommit
	heartbeat *cluster.Heartbeat
	billing   *cluster.Elector
	eventLead *cluster.Elector
	worker    *event.Worker
	notifier  *notify.Notifier
	// The event_worker leader's housekeeping.
	trends    *payment.TrendFolder
	keys      *idempotency.Sweeper
	retention *retention.Purger
	// The billing leader's services.
	reconciler *reconcile.Reconciler
	renewals   *renewal.Run
	// billingClock is the billing run's test clock ([billing].test_clock);
	// nil when it is off.
	billingClock *billingTestClock
	admin        *event.Admin
}

func (a *App) buildBackground(pay *payment.Service, testClock *billingTestClock) (*background, error) {
	b := &background{node: a.node, billingClock: testClock}
	if err := a.buildCluster(b); err != nil {
		return nil, err
	}
	if err := a.buildEvents(b, pay); err != nil {
		return nil, err
	}
	if err := a.buildHousekeeping(b); err != nil {
		return nil, err
	}
	a.buildBilling(b, pay)
	c := a.cfg
	b.admin = event.NewAdmin(a.db, event.AdminOptions{MaxAttempts: c.Events.MaxAttempts, NodeLostAfter: c.Cluster.NodeLostAfter, Clock: a.opts.clock})
	return b, nil
}

// buildCluster makes the LISTEN connection, the heartbeat and the electors
// of the two leader roles.
func (a *App) buildCluster(b *background) error {
	c := a.cfg
	b.listener = cluster.NewListener(cluster.ConnectLike(a.pool, "paymentd-"+b.node), cluster.ListenerOptions{Logger: a.log})
	b.wake = &wakeAfterCommit{wakeup: cluster.NewWakeup(a.pool, 0, a.log), handles: []store.TxBeginner{a.pool, a.db}}
	var err error
	b.heartbeat, err = cluster.NewHeartbeat(a.pool, cluster.HeartbeatOptions{
		Node:     cluster.NodeInfo{ID: b.node, Hostname: cluster.Hostname(), Version: buildVersion()},
		Interval: c.Cluster.HeartbeatInterval, LostAfter: c.Cluster.NodeLostAfter, Logger: a.log,
	})
	if err != nil {
		return err
	}
	elector := func(role string) (*cluster.Elector, error) {
		return cluster.NewElector(a.pool, cluster.ElectorOptions{
			Role: role, Holder: b.node, TTL: c.Cluster.LeaseTTL, RenewInterval: c.Cluster.LeaseRenew,
			Waker: b.listener, Logger: a.log,
		})
	}
	if b.billing, err = elector(cluster.RoleBilling); err != nil {
		return err
	}
	b.eventLead, err = elector(cluster.RoleEventWorker)
	return err
}

// buildEvents makes the event worker, the notification sender and the
// fulfilment handlers the worker runs.
func (a *App) buildEvents(b *background, pay *payment.Service) error {
	c := a.cfg
	var wake cluster.Waker = b.listener
	if a.opts.pollOnlyWorker {
		wake = nil
	}
	wopts := c.Events.WorkerOptions(b.node)
	wopts.Waker, wopts.Logger, wopts.Tracer = wake, a.log, a.backgroundTracer()
	wopts.Rounds = a.opts.signals.Events
	var err error
	if b.worker, err = event.NewWorker(a.pool, b.eventLead, wopts); err != nil {
		return err
	}
	plugins := plugin.PluginsFunc(a.registry.Plugin)
	nopts := c.Notify.Options()
	nopts.Tracer = a.backgroundTracer()
	nopts.SMTP.TLSConfig = a.opts.smtpTLS
	if err := nopts.Validate(); err != nil {
		return err
	}
	if b.notifier, err = notify.New(a.pool, plugins, nopts, b.listener, a.log); err != nil {
		return err
	}
	fulfillment.New(a.pool, fulfillment.NewPluginProvisioner(plugins, a.secrets), pay, b.notifier, fulfillment.Options{
		Node: b.node, PaymentTimeout: c.Billing.PaymentTimeout, TimeoutScanInterval: c.Events.TimeoutScanInterval,
		Clock: a.opts.clock, BillingClock: b.billingClock.clock(), BillingLocation: c.Billing.RenewalOptions(b.node).Location, Logger: a.log,
		TimeoutScans: a.opts.signals.TimeoutScans,
	}).Register(b.worker)
	return nil
}

// buildHousekeeping makes the event_worker leader's periodic jobs, each a
// service of the package that owns its table: the trends fold
// (docs/decisions.md, "trends rollup"), the idempotency key sweep and
// retention ([retention]). They run beside the worker, not in it, so a
// long round (retention over a backlog takes minutes) never holds up the
// queue, and each starts and stops on its own.
func (a *App) buildHousekeeping(b *background) error {
	job := startstop.Job{Active: b.eventLead.IsLeader, Logger: a.log, Tracer: a.backgroundTracer()}
	b.trends = payment.NewTrendFolder(a.pool, payment.TrendFoldOptions{Job: job})
	b.keys = idempotency.NewSweeper(a.pool, idempotency.SweepOptions{Clock: a.opts.clock, Job: job})
	ropts := a.cfg.Retention.Options()
	ropts.Clock, ropts.Job = a.opts.clock, job
	var err error
	b.retention, err = retention.New(a.pool, ropts)
	return err
}

// buildBilling makes the billing leader's services: the reconciler and
// the billing run, on the billing test clock when [billing].test_clock is
// on.
func (a *App) buildBilling(b *background, pay *payment.Service) {
	c := a.cfg
	b.reconciler = reconcile.New(a.pool, pay, reconcile.Options{
		BaseBackoff: c.Billing.ReconcileAfter, LateCapture: lateCapture(c.Payments),
		Clock: a.opts.clock, Logger: a.log, NodeID: b.node, Tracer: a.backgroundTracer(),
		// Only the billing leader reconciles; the SKIP LOCKED claim would
		// keep several from asking about one payment at once anyway.
		Active: b.billing.IsLeader, Rounds: a.opts.signals.Reconciler,
	})
	ropts := c.Billing.RenewalOptions(b.node)
	ropts.Clock, ropts.Logger, ropts.Active, ropts.Rounds = a.opts.clock, a.log, b.billing.IsLeader, a.opts.signals.Renewals
	retry := slices.Clone(c.Billing.CardRetryDays)
	ropts.ChargeSaved = func(ctx context.Context) (int, error) {
		r, err := pay.ChargeDue(ctx, retry, b.node)
		return r.Charged, err
	}
	if b.billingClock != nil {
		ropts.Clock = b.billingClock.Now
		a.log.Warn("the billing test clock is on ([billing].test_clock): an admin can move the billing run's time forward; never in production")
	}
	b.renewals = renewal.New(a.pool, ropts)
	if b.billingClock != nil {
		b.billingClock.run = b.renewals
	}
}

// services are the background services in start order, each after what
// it uses: the listener wakes the electors, the notifier and the worker;
// the leases gate the work; the notifier sends what the worker's handlers
// queue. Stopped in reverse, that is the graceful path: the billing and
// housekeeping rounds end, the worker and then the sender drain, the
// leases are resigned so another instance takes over at once, and the
// heartbeat stops last but the listener.
func (b *background) services() []startstop.Service {
	return []startstop.Service{
		b.listener, b.wake, b.heartbeat, b.billing, b.eventLead, b.notifier, b.worker,
		b.trends, b.keys, b.retention, b.reconciler, b.renewals,
	}
}

// wakeAfterCommit is the worker's wake-up of this instance's commits: while
// it runs, an event appended in a transaction on one of handles is
// inserted without the trigger's NOTIFY, and wakeup sends one once the
// transaction has committed (store.WakeAfterCommit). Stopped, the trigger
// notifies again.
type wakeAfterCommit struct {
	wakeup     *cluster.Wakeup
	handles    []store.TxBeginner
	unregister []func()
}

func (w *wakeAfterCommit) Start(ctx context.Context) error {
	if err := w.wakeup.Start(ctx); err != nil {
		return err
	}
	for _, h := range w.handles {
		w.unregister = append(w.unregister, store.WakeAfterCommit(h, w.wakeup.Wake))
	}
	return nil
}

func (w *wakeAfterCommit) Stop() {
	for _, u := range w.unregister {
		u()
	}
	w.unregister = nil
	w.wakeup.Stop()
}

// start brings the cluster side up; on an error what started is stopped.
func (b *background) start(ctx context.Context) error {
	return startstop.StartAll(ctx, b.services()...)
}

// stop stops every background service, the last started first.
func (b *background) stop() { startstop.StopAll(b.services()...) }

// eventService mounts EventAdminService.
func (b *background) eventService(opts []connect.HandlerOption, a *App) server.Service {
	path, h := eventpbconnect.NewEventAdminServiceHandler(eventrpc.NewAdminHandler(b.admin), opts...)
	return server.Service{Name: eventpbconnect.EventAdminServiceName, Path: path, Handler: h}
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}
