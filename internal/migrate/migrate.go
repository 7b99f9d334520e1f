package migrate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/store"
	sqlfs "github.com/rustbill/paymentd/sql"
)

// WaitTimeout is how long an instance waits for another one's migration run.
const WaitTimeout = 60 * time.Second

// LockID keys the advisory lock of the migration role ("paymentd:migration").
const LockID int64 = 0x7061796d_6d696772

// pollInterval is how often a waiting instance retries the lock.
const pollInterval = 250 * time.Millisecond

// FS returns the migration files, rooted so that the names are "00001_….sql".
func FS() fs.FS {
	sub, err := fs.Sub(sqlfs.Migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory exists
	}
	return sub
}

// Options tune a run; the zero value waits WaitTimeout, holds the lease with the
// API contract's 30 s TTL renewed every 10 s under a new node id, and logs
// nothing.
type Options struct {
	Logger *slog.Logger
	// Wait bounds how long to wait for another instance's migration run:
	// for its lock, and then for a lease it left behind to expire.
	Wait time.Duration
	// Holder is this instance in the `migration` lease (its node id;
	// default cluster.NewNodeID()).
	Holder string
	// LeaseTTL and LeaseRenew are the lease's time to live and renew
	// interval ([cluster].lease_ttl and lease_renew).
	LeaseTTL   time.Duration
	LeaseRenew time.Duration
	// Applied, when set, is added the number of migrations this call
	// applied (0 when the database was up to date or another instance
	// migrated it), so the caller can log what happened.
	Applied *int

	// beforeMigration (tests): called under the role before each
	// migration is applied, with its version.
	beforeMigration func(ctx context.Context, version int64) error
}

func (o *Options) defaults() {
	if o.Wait <= 0 {
		o.Wait = WaitTimeout
	}
	if o.Holder == "" {
		o.Holder = cluster.NewNodeID()
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = cluster.DefaultLeaseTTL
	}
	if o.LeaseRenew <= 0 {
		o.LeaseRenew = o.LeaseTTL / 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func newProvider(db *sql.DB, log *slog.Logger) (*goose.Provider, error) {
	var opts []goose.ProviderOption
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	// No goose locker: the caller holds the role (withRole).
	return goose.NewProvider(goose.DialectPostgres, db, FS(), opts...)
}

// Up applies every pending migration, waiting for another instance's run if
// one is in progress.
func Up(ctx context.Context, db *sql.DB) error {
	return UpWith(ctx, db, Options{})
}

// UpWith is Up with options. db must use the pgx driver (stdlib).
func UpWith(ctx context.Context, db *sql.DB, o Options) error {
	o.defaults()
	p, err := newProvider(db, o.Logger)
	if err != nil {
		return err
	}
	return withRole(ctx, db, o, func(ctx context.Context, r *role) error {
		for first := true; ; first = false {
			pending, err := p.HasPending(ctx)
			if err != nil {
				return fmt.Errorf("migrate up: %w", err)
			}
			if !pending {
				return nil
			}
			if first {
				// A release's database gets newer migrations only if it
				// has that release's schema (a pre-release build's does
				// not): refused in one line, nothing applied.
				recorded, err := p.GetDBVersion(ctx)
				if err != nil {
					return fmt.Errorf("migrate up: read the migrations applied: %w", err)
				}
				if err := checkBeforeUp(ctx, r.conn, recorded, KnownVersion()); err != nil {
					return err
				}
			}
			if err := r.holdLease(ctx); err != nil {
				return err
			}
			if o.beforeMigration != nil {
				next, err := nextVersion(ctx, p)
				if err != nil {
					return err
				}
				if err := o.beforeMigration(ctx, next); err != nil {
					return err
				}
			}
			res, err := p.UpByOne(ctx)
			if errors.Is(err, goose.ErrNoNextVersion) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("migrate up: %w", err)
			}
			if o.Applied != nil {
				*o.Applied++
			}
			// One line per migration this instance applied: the log says
			// which instance migrated, and what (the others apply nothing).
			o.Logger.InfoContext(ctx, "migration applied", "version", res.Source.Version,
				"source", filepath.Base(res.Source.Path), "took", res.Duration.Round(time.Millisecond).String())
		}
	})
}

// nextVersion is the lowest version not applied yet.
func nextVersion(ctx context.Context, p *goose.Provider) (int64, error) {
	st, err := p.Status(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range st {
		if s.State == goose.StatePending {
			return s.Source.Version, nil
		}
	}
	return 0, goose.ErrNoNextVersion
}

// Down rolls back the most recent migration.
func Down(ctx context.Context, db *sql.DB) error {
	o := Options{}
	o.defaults()
	p, err := newProvider(db, nil)
	if err != nil {
		return err
	}
	return withRole(ctx, db, o, func(ctx context.Context, _ *role) error {
		if _, err := p.Down(ctx); err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
			return fmt.Errorf("migrate down: %w", err)
		}
		return nil
	})
}

// DownTo rolls back to version (0 removes everything).
func DownTo(ctx context.Context, db *sql.DB, version int64) error {
	o := Options{}
	o.defaults()
	p, err := newProvider(db, nil)
	if err != nil {
		return err
	}
	return withRole(ctx, db, o, func(ctx context.Context, _ *role) error {
		if _, err := p.DownTo(ctx, version); err != nil {
			return fmt.Errorf("migrate down to %d: %w", version, err)
		}
		return nil
	})
}

// role is the migration role held by one run: the advisory lock on conn
// and, once taken, the `migration` lease through an Elector on conn too.
// conn is used by one goroutine at a time: the run's until the elector
// starts, the elector's until it is stopped.
type role struct {
	o        Options
	conn     *pgx.Conn
	log      *slog.Logger
	deadline time.Time
	lease    *cluster.Elector
}

// withRole runs fn holding the migration role (see the package doc).
func withRole(ctx context.Context, db *sql.DB, o Options, fn func(ctx context.Context, r *role) error) error {
	r := &role{o: o, log: o.Logger.With("role", cluster.RoleMigration, "node", o.Holder), deadline: time.Now().Add(o.Wait)}
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("migrate: the database handle must use the pgx driver, not %T", dc)
		}
		r.conn = sc.Conn()
		if err := r.lock(ctx); err != nil {
			return err
		}
		defer r.unlock()
		defer r.resign()
		return fn(ctx, r)
	})
}

// lock takes the advisory lock, retrying until the deadline.
func (r *role) lock(ctx context.Context) error {
	waiting := false
	for {
		ok, err := store.Q(r.conn).MigrationTryLock(ctx, LockID)
		if err != nil {
			return fmt.Errorf("migrate: take the migration lock: %w", err)
		}
		if ok {
			if waiting {
				r.log.Info("migration lock taken after waiting")
			}
			return nil
		}
		left := time.Until(r.deadline)
		if left <= 0 {
			return fmt.Errorf("migrate: another instance held the migration role for %s ([cluster].migration_wait); giving up", r.o.Wait)
		}
		if !waiting {
			waiting = true
			r.log.Info("another instance is migrating; waiting for the migration role", "wait", r.o.Wait.String())
		}
		t := time.NewTimer(min(pollInterval, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// unlock releases the advisory lock. If that fails the connection is closed
// (which releases it too), so that it cannot go back to the pool locked.
func (r *role) unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := store.Q(r.conn).MigrationUnlock(ctx, LockID); err != nil {
		r.log.Warn("could not release the migration lock; closing its connection", "err", err)
		_ = r.conn.Close(ctx)
	}
}

// holdLease makes sure the run holds the `migration` lease whenever the
// lease table exists: it starts the elector the first time the table is
// there and waits (until the deadline) to be elected, which takes until a
// lease left by a killed migrator has expired. Once held, it checks the
// lease is still trusted: a run that lost it must not apply more.
func (r *role) holdLease(ctx context.Context) error {
	if r.lease != nil {
		if !r.lease.IsLeader() {
			return errors.New("migrate: lost the migration lease (it could not be renewed in time); stopped before the next migration")
		}
		return nil
	}
	exists, err := store.Q(r.conn).LeaderLeasesTableExists(ctx)
	if err != nil {
		return fmt.Errorf("migrate: look for the lease table: %w", err)
	}
	if !exists {
		return nil // the advisory lock alone, until the table is created
	}
	e, err := cluster.NewElector(r.conn, cluster.ElectorOptions{
		Role: cluster.RoleMigration, Holder: r.o.Holder, TTL: r.o.LeaseTTL, RenewInterval: r.o.LeaseRenew, Logger: r.o.Logger,
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	changes, unsubscribe := e.Subscribe()
	defer unsubscribe()
	if err := e.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	r.lease = e
	t := time.NewTimer(max(time.Until(r.deadline), 0))
	defer t.Stop()
	for {
		select {
		case leading := <-changes:
			if leading {
				return nil
			}
		case <-t.C:
			return fmt.Errorf("migrate: the migration lease stayed held by another instance for %s ([cluster].migration_wait); giving up", r.o.Wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// resign stops the elector, which resigns the lease if it is held.
func (r *role) resign() {
	if r.lease != nil {
		r.lease.Stop()
	}
}

// Status reports each migration and whether it is applied. It only reads, so
// it does not wait for the migration role.
func Status(ctx context.Context, db *sql.DB) ([]*goose.MigrationStatus, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS())
	if err != nil {
		return nil, err
	}
	return p.Status(ctx)
}

var fingerprint = sync.OnceValue(func() string {
	entries, err := fs.ReadDir(FS(), ".")
	if err != nil {
		panic(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(FS(), n)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
})

// Fingerprint is a hash of the migration files' names and contents: equal
// fingerprints mean identical schemas (tests key their template database on it).
func Fingerprint() string { return fingerprint() }
