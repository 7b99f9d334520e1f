package app

import (
	"context"
	"runtime/debug"
	"time"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/event/eventrpc"
	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/server"
	"github.com/rustbill/paymentd/internal/store"
)

// background is the cluster side of an instance: the LISTEN connection,
// the heartbeat, the billing and event_worker leader roles, the event worker
// with its fulfilment handlers and periodic tasks, the notification
// sender, and the retention job. Started in
// order, stopped in reverse (gracefully: leases are resigned).
type background struct {
	node      string
	listener  *cluster.Listener
	heartbeat *cluster.Heartbeat
	billing   *cluster.Elector
	eventLead *cluster.Elector
	worker    *event.Worker
	notifier  *notify.Notifier
	retention *retention.Purger
	admin     *event.Admin
}

// trendFoldInterval is how often the payment trends' changes are folded:
// what waits for a fold is what every GetPaymentTrends reads beside the
// rollup, so it stays a few seconds' worth of writes.
const trendFoldInterval = 2 * time.Second

// idempotencySweepInterval is how often expired idempotency keys are
// deleted: they are ignored once expired, so this only bounds the table.
const idempotencySweepInterval = 10 * time.Minute

func (a *App) buildBackground(pay *payment.Service) (*background, error) {
	c := a.cfg
	b := &background{node: a.node}
	b.listener = cluster.NewListener(cluster.ConnectLike(a.pool, "paymentd-"+b.node), cluster.ListenerOptions{Logger: a.log})
	var err error
	b.heartbeat, err = cluster.NewHeartbeat(a.pool, cluster.HeartbeatOptions{
		Node:     cluster.NodeInfo{ID: b.node, Hostname: cluster.Hostname(), Version: buildVersion()},
		Interval: c.Cluster.HeartbeatInterval, LostAfter: c.Cluster.NodeLostAfter, Logger: a.log,
	})
	if err != nil {
		return nil, err
	}
	elector := func(role string) (*cluster.Elector, error) {
		return cluster.NewElector(a.pool, cluster.ElectorOptions{
			Role: role, Holder: b.node, TTL: c.Cluster.LeaseTTL, RenewInterval: c.Cluster.LeaseRenew,
			Waker: b.listener, Logger: a.log,
		})
	}
	if b.billing, err = elector(cluster.RoleBilling); err != nil {
		return nil, err
	}
	if b.eventLead, err = elector(cluster.RoleEventWorker); err != nil {
		return nil, err
	}
	var wake cluster.Waker = b.listener
	if a.opts.pollOnlyWorker {
		wake = nil
	}
	wopts := c.Events.WorkerOptions(b.node)
	wopts.Waker, wopts.Logger, wopts.Tracer = wake, a.log, a.backgroundTracer()
	b.worker, err = event.NewWorker(a.pool, b.eventLead, wopts)
	if err != nil {
		return nil, err
	}
	plugins := plugin.PluginsFunc(a.registry.Plugin)
	nopts := c.Notify.Options()
	nopts.Tracer = a.backgroundTracer()
	nopts.SMTP.TLSConfig = a.opts.smtpTLS
	if err := nopts.Validate(); err != nil {
		return nil, err
	}
	b.notifier, err = notify.New(a.pool, plugins, nopts, b.listener, a.log)
	if err != nil {
		return nil, err
	}
	fulfillment.New(a.pool, fulfillment.NewPluginProvisioner(plugins, a.secrets), pay, b.notifier, fulfillment.Options{
		Node: b.node, PaymentTimeout: c.Billing.PaymentTimeout, TimeoutScanInterval: c.Events.TimeoutScanInterval,
		Clock: a.opts.clock, BillingLocation: c.Billing.RenewalOptions(b.node).Location, Logger: a.log,
	}).Register(b.worker)
	// The trends' changes go into their rollup while this instance leads
	// the worker (docs/decisions.md, "trends rollup"): readers count the
	// unfolded ones too, so folding only keeps GetPaymentTrends fast.
	b.worker.Every(event.Periodic{Name: "payment trends fold", Every: trendFoldInterval, Run: func(ctx context.Context) error {
		_, err := store.FoldPaymentTrends(ctx, a.pool)
		return err
	}})
	// Idempotency keys are kept a day (internal/idempotency); the leader
	// deletes the expired ones a thousand at a time.
	b.worker.Every(event.Periodic{Name: "idempotency key sweep", Every: idempotencySweepInterval, Run: func(ctx context.Context) error {
		for {
			n, err := store.SweepIdempotencyKeys(ctx, a.pool, a.opts.clock(), 1000)
			if err != nil || n < 1000 {
				return err
			}
		}
	}})
	// Retention ([retention]) runs on the event_worker leader like the
	// other housekeeping, as a service of its own: a round over a backlog
	// takes minutes, and it starts and stops apart from the worker.
	ropts := c.Retention.Options()
	ropts.Clock, ropts.Active, ropts.Logger, ropts.Tracer = a.opts.clock, b.eventLead.IsLeader, a.log, a.backgroundTracer()
	if b.retention, err = retention.New(a.pool, ropts); err != nil {
		return nil, err
	}
	b.admin = event.NewAdmin(a.db, event.AdminOptions{MaxAttempts: c.Events.MaxAttempts, NodeLostAfter: c.Cluster.NodeLostAfter, Clock: a.opts.clock})
	return b, nil
}

// eventService mounts EventAdminService.
func (b *background) eventService(opts []connect.HandlerOption, a *App) server.Service {
	path, h := eventpbconnect.NewEventAdminServiceHandler(eventrpc.NewAdminHandler(b.admin), opts...)
	return server.Service{Name: eventpbconnect.EventAdminServiceName, Path: path, Handler: h}
}

// start brings the cluster side up; on an error what started is stopped.
func (b *background) start(ctx context.Context) error {
	starters := []interface {
		Start(context.Context) error
		Stop()
	}{b.listener, b.heartbeat, b.billing, b.eventLead, b.worker, b.notifier, b.retention}
	for i, s := range starters {
		if err := s.Start(ctx); err != nil {
			for j := i - 1; j >= 0; j-- {
				starters[j].Stop()
			}
			return err
		}
	}
	return nil
}

// stop is the graceful path: drain the worker and the sender, resign the
// leases so another instance takes over at once, then stop beating.
func (b *background) stop() {
	b.retention.Stop()
	b.worker.Stop()
	b.notifier.Stop()
	b.eventLead.Stop()
	b.billing.Stop()
	b.heartbeat.Stop()
	b.listener.Stop()
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}
