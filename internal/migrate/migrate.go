// Package migrate applies the embedded goose migrations.
//
// Only one instance may migrate at a time: the "migration" leader role is a
// PostgreSQL session advisory lock held for the whole run (the lease table
// itself is created by a migration, so it cannot guard the first one). An
// instance that finds the lock taken waits for it, up to WaitTimeout, and then
// finds nothing left to apply.
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

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	sqlfs "github.com/rustbill/paymentd/sql"
)

// WaitTimeout is how long an instance waits for another one's migration run.
const WaitTimeout = 60 * time.Second

// LockID keys the advisory lock of the migration role ("paymentd:migration").
const LockID int64 = 0x7061796d_6d696772

// pollInterval is how often a waiting instance retries the lock (goose's
// session locker counts in whole seconds).
const pollInterval = time.Second

// FS returns the migration files, rooted so that the names are "00001_….sql".
func FS() fs.FS {
	sub, err := fs.Sub(sqlfs.Migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory exists
	}
	return sub
}

// Options tune a provider; the zero value waits WaitTimeout and logs nothing.
type Options struct {
	Logger *slog.Logger
	// Wait bounds how long to wait for another instance's migration run.
	Wait time.Duration
}

// NewProvider returns a goose provider over db that takes the migration lock.
func NewProvider(db *sql.DB, o Options) (*goose.Provider, error) {
	wait := o.Wait
	if wait <= 0 {
		wait = WaitTimeout
	}
	tries := max(uint64(wait/pollInterval), 1)
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(LockID),
		lock.WithLockTimeout(uint64(pollInterval/time.Second), tries),
	)
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if o.Logger != nil {
		opts = append(opts, goose.WithSlog(o.Logger))
	}
	return goose.NewProvider(goose.DialectPostgres, db, FS(), opts...)
}

// Up applies every pending migration, waiting for another instance's run if
// one is in progress.
func Up(ctx context.Context, db *sql.DB) error {
	return UpWith(ctx, db, Options{})
}

// UpWith is Up with options.
func UpWith(ctx context.Context, db *sql.DB, o Options) error {
	p, err := NewProvider(db, o)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	// One line per migration this instance applied: the log says which
	// instance migrated, and what (the others apply nothing).
	if o.Logger != nil {
		for _, r := range results {
			o.Logger.InfoContext(ctx, "migration applied", "version", r.Source.Version,
				"source", filepath.Base(r.Source.Path), "took", r.Duration.Round(time.Millisecond).String())
		}
	}
	return nil
}

// Down rolls back the most recent migration.
func Down(ctx context.Context, db *sql.DB) error {
	p, err := NewProvider(db, Options{})
	if err != nil {
		return err
	}
	if _, err := p.Down(ctx); err != nil {
		if errors.Is(err, goose.ErrNoNextVersion) {
			return nil
		}
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// DownTo rolls back to version (0 removes everything).
func DownTo(ctx context.Context, db *sql.DB, version int64) error {
	p, err := NewProvider(db, Options{})
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
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
