package store_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/testdb"
)

// The tests make their own scratch databases (scratch_schema_*) on the server
// testdb.BaseURL chooses (PAYMENTD_TEST_DATABASE_URL, else 127.0.0.1:5432,
// else the private cluster in .data/postgres, so a bare machine works too):
// one migrated template per test binary, cloned for each test that needs the
// schema, and empty ones for the migration tests. All are dropped again.

// migrationsDir is the goose migration set, read from disk as internal/migrate
// embeds it.
const migrationsDir = "../../sql/migrations"

func TestMain(m *testing.M) {
	code := m.Run()
	if err := dropTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "store tests:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "store tests: goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func baseURL() string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u, err := testdb.BaseURL(ctx)
	if err != nil {
		panic(fmt.Sprintf("store tests: no PostgreSQL to test against: %v", err))
	}
	return u
}

func baseConfig() (*pgx.ConnConfig, error) {
	return pgx.ParseConfig(baseURL())
}

// adminExec runs one statement on the base database (CREATE/DROP DATABASE).
func adminExec(ctx context.Context, stmt string) error {
	cfg, err := baseConfig()
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}

func scratchName(kind string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "scratch_schema_" + kind + "_" + hex.EncodeToString(b[:])
}

// createMu serialises CREATE DATABASE, which fails when its template is in
// use by another CREATE DATABASE of the same process.
var createMu sync.Mutex

// newDatabase creates an empty database (template empty) or a clone of
// template, and drops it when the test ends.
func newDatabase(t *testing.T, kind, template string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := scratchName(kind)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		stmt += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	createMu.Lock()
	err := adminExec(ctx, stmt)
	createMu.Unlock()
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, adminExec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"))
	})
	return name
}

// openSQL opens a database/sql handle (what goose needs) on database name.
func openSQL(t *testing.T, name string) *sql.DB {
	t.Helper()
	cfg, err := baseConfig()
	require.NoError(t, err)
	cfg.Database = name
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openPool(t *testing.T, name string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(baseURL())
	require.NoError(t, err)
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func newProvider(t *testing.T, db *sql.DB) *goose.Provider {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS(migrationsDir))
	require.NoError(t, err)
	return p
}

var template struct {
	once sync.Once
	name string
	err  error
}

// templateDB returns the migrated template database, made on first use.
func templateDB(t *testing.T) string {
	t.Helper()
	template.once.Do(func() {
		template.name, template.err = makeTemplate()
	})
	require.NoError(t, template.err)
	return template.name
}

func makeTemplate() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := scratchName("tpl")
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	cfg, err := baseConfig()
	if err != nil {
		return name, err
	}
	cfg.Database = name
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS(migrationsDir))
	if err != nil {
		return name, err
	}
	if _, err := p.Up(ctx); err != nil {
		return name, fmt.Errorf("migrate template: %w", err)
	}
	return name, nil
}

func dropTemplate() error {
	if template.name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{template.name}.Sanitize()+" WITH (FORCE)")
}

// migratedPool is a pool on a fresh copy of the migrated schema, for one test.
func migratedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return openPool(t, newDatabase(t, "db", templateDB(t)))
}
