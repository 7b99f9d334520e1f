package app

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/replica"
	"github.com/rustbill/paymentd/internal/store"
)

// readReplica is [db].replica_url: its pool and the watcher that says
// whether the heavy reads may go to it (docs/decisions.md, "read replica").
type readReplica struct {
	pool    *pgxpool.Pool
	watcher *replica.Watcher
}

// replicaSpareConns is what the replica's pool holds beside one connection
// per export streaming ([export].max_concurrent, each holds one for its
// whole file): the short reads (trends, stats, lists) and the lag check.
const replicaSpareConns = 4

// openReplica opens the pool of [db].replica_url when it is set, without
// connecting: a replica that is down at start keeps the heavy reads on the
// primary until it answers, and never stops the start.
func (a *App) openReplica(ctx context.Context) error {
	c := a.cfg.DB
	if c.ReplicaURL == "" {
		return nil
	}
	pc, err := poolConfig("[db].replica_url", c.ReplicaURL, c)
	if err != nil {
		return err
	}
	pc.MaxConns = int32(min(c.MaxConnections, a.cfg.Export.MaxConcurrent+replicaSpareConns))
	// One kept open for the check every second.
	pc.MinConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	acquire := time.Duration(c.AcquireTimeoutSecs) * time.Second
	a.replica = &readReplica{pool: pool, watcher: replica.New(a.db, store.NewBoundedPool(pool, acquire), pool,
		replica.Options{MaxLag: c.ReplicaMaxLag, Logger: a.log})}
	a.log.Info("read replica configured: the heavy reads go to it once it answers within [db].replica_max_lag",
		"host", pc.ConnConfig.Host, "port", pc.ConnConfig.Port, "max_lag", c.ReplicaMaxLag.String(), "max_connections", pc.MaxConns)
	return nil
}

// reads is where the heavy reads go: the replica while it is usable, else
// the primary (always, without [db].replica_url).
func (a *App) reads() func() store.DB {
	if a.replica == nil {
		return func() store.DB { return a.db }
	}
	return a.replica.watcher.Reads
}

// ReplicaInUse reports whether the heavy reads go to the replica now
// (false without one).
func (a *App) ReplicaInUse() bool { return a.replica != nil && a.replica.watcher.InUse() }

// registerReplica puts the replica's gauges on the registry (described,
// without series, when there is none).
func (a *App) registerReplica() error {
	if a.replica == nil {
		return a.tel.metrics.RegisterReplica(nil, nil)
	}
	return a.tel.metrics.RegisterReplica(a.replica.watcher, a.replica.pool)
}

// startReplica starts the lag checks; the returned stop ends them.
func (a *App) startReplica(ctx context.Context) (stop func(), err error) {
	if a.replica == nil {
		return func() {}, nil
	}
	if err := a.replica.watcher.Start(ctx); err != nil {
		return nil, err
	}
	return a.replica.watcher.Stop, nil
}

// closeReplica releases the replica's pool.
func (a *App) closeReplica() {
	if a.replica != nil {
		a.replica.pool.Close()
	}
}
