package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", which migrate.Up takes

	"github.com/rustbill/paymentd/internal/migrate"
)

const (
	templatePrefix = "paymentd_tmpl_"
	buildSuffix    = "_build"

	// lockKey keys the session advisory lock ("paymtest") every test process
	// takes on the admin database while it builds or drops templates.
	// internal/migrate's own lock is taken inside the database it migrates,
	// and advisory locks are per database, so the two never meet.
	lockKey int64 = 0x7061796d_74657374

	// orphanAge is how old a clone must be, with nobody connected, before a
	// later run takes it for the leftover of a test process that died.
	orphanAge = 12 * time.Hour

	sqlstateObjectInUse = "55006"
)

// templateName is the template of the migrations compiled into this binary.
func templateName() string {
	return templatePrefix + migrate.Fingerprint()[:12]
}

// templates remembers, per admin URL, the template this process has seen
// complete, so only the first clone of a process pays for the check.
var templates struct {
	mu    sync.Mutex
	ready map[string]string
}

// ensureTemplate returns the name of a complete template for our migrations
// on the server of adminURL, building it if no process has yet.
func ensureTemplate(ctx context.Context, adminURL string, logf func(string, ...any)) (string, error) {
	name := templateName()
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if templates.ready[adminURL] == name {
		return name, nil
	}

	conn, err := connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	if ok, err := isTemplate(ctx, conn, name); err != nil || !ok {
		if err != nil {
			return "", err
		}
		err := withLock(ctx, conn, func() error {
			// Another process may have built it while we waited for the lock.
			if ok, err := isTemplate(ctx, conn, name); err != nil || ok {
				return err
			}
			start := time.Now()
			if err := buildTemplate(ctx, conn, adminURL, name, migrate.Up); err != nil {
				return err
			}
			logf("testdb: built template %s in %s", name, time.Since(start).Round(time.Millisecond))
			dropStaleTemplates(ctx, conn, name, logf)
			dropOrphanClones(ctx, conn, time.Now(), logf)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	if templates.ready == nil {
		templates.ready = make(map[string]string)
	}
	templates.ready[adminURL] = name
	return name, nil
}

// forgetTemplate makes the next ensureTemplate look again, after a clone
// found the template gone (dropped by a run with other migrations).
func forgetTemplate(adminURL string) {
	templates.mu.Lock()
	defer templates.mu.Unlock()
	delete(templates.ready, adminURL)
}

// isTemplate reports whether name exists as a finished template. A database
// of that name that is not marked as a template is not ours (the rename is
// the last step, after the marking): it is dropped and rebuilt under the lock.
func isTemplate(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var isTmpl bool
	err := conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&isTmpl)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("testdb: look up template %s: %w", name, err)
	}
	return isTmpl, nil
}

// buildTemplate migrates a database under a temporary name and renames it to
// name only when complete, so a crash or a failing migration never leaves a
// template that later runs would clone. Callers hold the advisory lock.
func buildTemplate(ctx context.Context, conn *pgx.Conn, adminURL, name string,
	up func(context.Context, *sql.DB) error,
) error {
	build := name + buildSuffix
	for _, leftover := range []string{build, name} { // from a crashed run, or not a template
		if err := dropDatabase(ctx, conn, leftover); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(build)+" TEMPLATE template0"); err != nil {
		return fmt.Errorf("testdb: create %s: %w", build, err)
	}
	if err := migrateDatabase(ctx, withDatabase(adminURL, build), up); err != nil {
		if dropErr := dropDatabase(context.WithoutCancel(ctx), conn, build); dropErr != nil {
			return fmt.Errorf("testdb: migrate template %s: %w (and dropping it failed: %v)", name, err, dropErr)
		}
		return fmt.Errorf("testdb: migrate template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(build)+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("testdb: mark %s as a template: %w", build, err)
	}
	// The migration's connections are closed, but their backends may still
	// be exiting; the rename waits for them, and ends any that linger.
	return retryInUse(ctx, func() error {
		_, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", build)
		if err == nil {
			_, err = conn.Exec(ctx, "ALTER DATABASE "+ident(build)+" RENAME TO "+ident(name))
		}
		if err != nil {
			return fmt.Errorf("testdb: rename %s to %s: %w", build, name, err)
		}
		return nil
	})
}

func migrateDatabase(ctx context.Context, dbURL string, up func(context.Context, *sql.DB) error) error {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	err = up(ctx, db)
	if closeErr := db.Close(); err == nil {
		err = closeErr
	}
	return err
}

// dropStaleTemplates drops the templates of other migration sets. Another
// checkout with other migrations may still want its template; if so, its next
// clone finds it missing and builds it again (see cloneDatabase).
func dropStaleTemplates(ctx context.Context, conn *pgx.Conn, keep string, logf func(string, ...any)) {
	names, err := databasesLike(ctx, conn, templatePrefix)
	if err != nil {
		logf("testdb: list stale templates: %v", err)
		return
	}
	for _, name := range names {
		if name == keep {
			continue
		}
		if err := dropDatabase(ctx, conn, name); err != nil {
			logf("testdb: drop stale template %s: %v", name, err)
			continue
		}
		logf("testdb: dropped stale template %s", name)
	}
}

// dropOrphanClones drops clones left by test processes that died before
// their cleanup: older than orphanAge by the time in their name, and with
// nobody connected.
func dropOrphanClones(ctx context.Context, conn *pgx.Conn, now time.Time, logf func(string, ...any)) {
	names, err := databasesLike(ctx, conn, clonePrefix)
	if err != nil {
		logf("testdb: list orphaned test databases: %v", err)
		return
	}
	for _, name := range names {
		created, ok := cloneCreatedAt(name)
		if !ok || now.Sub(created) < orphanAge {
			continue
		}
		var inUse bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = $1)", name).Scan(&inUse); err != nil || inUse {
			continue
		}
		if err := dropDatabase(ctx, conn, name); err != nil {
			logf("testdb: drop orphaned test database %s: %v", name, err)
			continue
		}
		logf("testdb: dropped orphaned test database %s (created %s)", name, created.Format(time.RFC3339))
	}
}

func databasesLike(ctx context.Context, conn *pgx.Conn, prefix string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY datname", prefix)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// dropDatabase drops name if it exists, ending its connections. A template
// must be unmarked before PostgreSQL lets it go; nothing else may be altered
// first, because a database whose drop is under way elsewhere is "invalid",
// and altering one ends our session with a FATAL.
func dropDatabase(ctx context.Context, conn *pgx.Conn, name string) error {
	var isTmpl bool
	err := conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&isTmpl)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err == nil && isTmpl {
		_, err = conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH IS_TEMPLATE false")
	}
	if err == nil {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
	}
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == sqlstateInvalidCatalogName) { // gone meanwhile: fine
		return fmt.Errorf("testdb: drop %s: %w", name, err)
	}
	return nil
}

// withLock runs fn holding the advisory lock. The lock is a session lock, so
// if this process dies the server releases it with the connection.
func withLock(ctx context.Context, conn *pgx.Conn, fn func() error) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("testdb: take the template lock: %w", err)
	}
	defer func() {
		// A failed unlock is harmless: the connection is closed right after.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey)
	}()
	return fn()
}

// retryInUse retries fn while PostgreSQL answers "being accessed by other
// users" (55006), which lasts only as long as a backend takes to exit.
func retryInUse(ctx context.Context, fn func() error) error {
	const attempts = 50
	for i := 1; ; i++ {
		err := fn()
		var pgErr *pgconn.PgError
		if err == nil || i == attempts || !errors.As(err, &pgErr) || pgErr.Code != sqlstateObjectInUse {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(min(i, 10)) * 20 * time.Millisecond):
		}
	}
}

func connect(ctx context.Context, connString string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("testdb: connect to the test server: %w", err)
	}
	return conn, nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// cloneCreatedAt reads the creation time out of a clone's name
// (paymentd_test_<pkg>_<unix seconds, base 36>_<random>).
func cloneCreatedAt(name string) (time.Time, bool) {
	parts := strings.Split(strings.TrimPrefix(name, clonePrefix), "_")
	if len(parts) < 3 {
		return time.Time{}, false
	}
	secs, err := strconv.ParseInt(parts[len(parts)-2], 36, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(secs, 0), true
}

// stderrf is where events of the whole run go (template builds, cluster
// starts): they belong to no one test.
func stderrf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
