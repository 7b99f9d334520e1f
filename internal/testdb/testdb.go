package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	clonePrefix = "paymentd_test_"

	// setupTimeout bounds making a database, including waiting for another
	// process that builds the template or starts the private cluster.
	setupTimeout = 3 * time.Minute
	dropTimeout  = 30 * time.Second

	maxLabel = 20 // keeps clone names well inside PostgreSQL's 63 bytes
)

// URL creates a fresh database for this test, cloned from the migrated
// template, and drops it in t.Cleanup. Connections still open then are ended.
func URL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	start := time.Now()
	name, dbURL, err := createClone(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("testdb: database %s ready in %s", name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := dropClone(name); err != nil {
			t.Error(err)
		}
	})
	return dbURL
}

// Pool opens a pool on a fresh database (see URL); the pool is closed, then
// the database dropped, in t.Cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return openPool(t, URL(t))
}

var shared struct {
	mu      sync.Mutex
	managed bool // Main is running the tests and drops the database after
	name    string
	url     string
	err     error
}

// Main wraps m for TestMain so that the package's shared database (see
// Shared) is dropped, and the template of its private servers (see
// PrivateServer) removed, after all its tests ran:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }
//
// or, without goleak, os.Exit(testdb.Main(m).Run()).
func Main(m *testing.M) interface{ Run() int } {
	return mainRunner{m: m}
}

type mainRunner struct{ m *testing.M }

func (r mainRunner) Run() int {
	shared.mu.Lock()
	shared.managed = true
	shared.mu.Unlock()
	private.mu.Lock()
	private.managed = true
	private.mu.Unlock()

	code := r.m.Run()

	if err := removePrivateTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}

	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.managed = false
	if shared.name != "" {
		if err := dropClone(shared.name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
		shared.name, shared.url = "", ""
	}
	return code
}

// Shared is one database for all tests of the package that ask for it,
// created by the first and dropped when the run ends. It suits packages whose
// tests keep out of each other's way (their own rows, their own ids) and want
// no per-test setup cost. The package's TestMain must run through Main.
func Shared(t testing.TB) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.managed {
		t.Fatal("testdb.Shared needs the package's TestMain to run the tests through testdb.Main: " +
			"func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }")
	}
	if shared.url == "" && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		shared.name, shared.url, shared.err = createClone(ctx)
		if shared.err == nil {
			t.Logf("testdb: shared database %s created", shared.name)
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err) // every later caller learns why, too
	}
	return shared.url
}

// SharedPool opens a pool on the shared database (see Shared), closed in
// t.Cleanup; the database itself outlives the test.
func SharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return openPool(t, Shared(t))
}

func openPool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("testdb: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// createClone creates a database from the template, building the template
// first when this server has none for our migrations.
func createClone(ctx context.Context) (name, dbURL string, err error) {
	adminURL, err := BaseURL(ctx)
	if err != nil {
		return "", "", err
	}
	name, err = cloneName(packageLabel(os.Args[0]), time.Now())
	if err != nil {
		return "", "", err
	}
	for attempt := 1; ; attempt++ {
		tmpl, err := ensureTemplate(ctx, adminURL, stderrf)
		if err != nil {
			return "", "", err
		}
		err = cloneDatabase(ctx, adminURL, tmpl, name)
		var pgErr *pgconn.PgError
		if attempt == 1 && errors.As(err, &pgErr) && pgErr.Code == sqlstateInvalidCatalogName {
			// A run with other migrations dropped our template as stale.
			forgetTemplate(adminURL)
			continue
		}
		if err != nil {
			return "", "", err
		}
		return name, withDatabase(adminURL, name), nil
	}
}

// cloneDatabase runs CREATE DATABASE … TEMPLATE. Clones of one template may
// run side by side: the template accepts no connections, so "being accessed
// by other users" can only come from a moment of a template being built; we
// then wait under the lock, which the builder holds.
func cloneDatabase(ctx context.Context, adminURL, tmpl, name string) error {
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	create := func() error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tmpl))
		return err
	}
	err = create()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateObjectInUse {
		err = withLock(ctx, conn, func() error { return retryInUse(ctx, create) })
	}
	if err != nil {
		return fmt.Errorf("testdb: create %s from %s: %w", name, tmpl, err)
	}
	return nil
}

func dropClone(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	adminURL, err := BaseURL(ctx)
	if err != nil {
		return err
	}
	conn, err := connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return dropDatabase(ctx, conn, name)
}

// cloneName is paymentd_test_<label>_<unix seconds, base 36>_<8 hex>: the
// label says which package left a database behind, the time lets a later run
// recognise an orphan, the random part keeps parallel tests apart.
func cloneName(label string, now time.Time) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("testdb: %w", err)
	}
	return clonePrefix + label + "_" + strconv.FormatInt(now.Unix(), 36) + "_" + hex.EncodeToString(b[:]), nil
}

// packageLabel turns the test binary's name ("payment.test") into a short
// identifier ("payment").
func packageLabel(binary string) string {
	name := strings.TrimSuffix(filepath.Base(binary), ".test")
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() == maxLabel {
			break
		}
	}
	label := strings.Trim(b.String(), "_")
	if label == "" {
		return "pkg"
	}
	return label
}

// EmptyURL creates a fresh database with no schema at all (from template0),
// for tests of the migrations themselves; it is dropped in t.Cleanup.
func EmptyURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	adminURL, err := BaseURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name, err := cloneName(packageLabel(os.Args[0]), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE template0")
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		t.Fatalf("testdb: create %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := dropClone(name); err != nil {
			t.Error(err)
		}
	})
	return withDatabase(adminURL, name)
}
