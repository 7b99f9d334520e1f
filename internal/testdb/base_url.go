package testdb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/pgcluster"
)

const (
	// EnvURL names the variable that points tests at a server of your choice;
	// its database is the one testdb connects to for CREATE and DROP DATABASE.
	EnvURL = "PAYMENTD_TEST_DATABASE_URL"

	// localURL is a developer's own server, used when it answers.
	localURL     = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	probeTimeout = time.Second

	modulePath = "github.com/rustbill/paymentd"

	sqlstateInvalidCatalogName = "3D000" // database does not exist
)

var base struct {
	mu  sync.Mutex
	url string
}

// BaseURL is the server tests use, chosen once per process: $EnvURL, else
// 127.0.0.1:5432 (database test, or postgres if the server has no test
// database) when it answers within a second, else the private cluster in
// <repo>/.data/postgres (database postgres), started when needed.
func BaseURL(ctx context.Context) (string, error) {
	base.mu.Lock()
	defer base.mu.Unlock()
	if base.url != "" {
		return base.url, nil
	}
	u, err := resolveBaseURL(ctx, os.Getenv(EnvURL), probe, startPrivateCluster)
	if err != nil {
		return "", err
	}
	base.url = u
	return u, nil
}

// resolveBaseURL is BaseURL's decision with its effects passed in.
func resolveBaseURL(ctx context.Context, env string, probe func(context.Context, string) (string, bool),
	private func(context.Context) (string, error),
) (string, error) {
	if env != "" {
		return env, nil
	}
	if u, ok := probe(ctx, localURL); ok {
		return u, nil
	}
	return private(ctx)
}

// probe reports whether a server answers at u. A server that answers but
// lacks u's database is still ours to use, through its postgres database.
func probe(ctx context.Context, u string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
		return u, err == nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateInvalidCatalogName {
		return withDatabase(u, "postgres"), true
	}
	return "", false
}

func startPrivateCluster(ctx context.Context) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testdb: %w", err)
	}
	root, err := repoRoot(wd)
	if err != nil {
		return "", err
	}
	u, err := pgcluster.Ensure(ctx, filepath.Join(root, ".data", "postgres"), "postgres", stderrf)
	if err != nil {
		return "", fmt.Errorf("testdb: no server at $%s or 127.0.0.1:5432, and no private cluster: %w", EnvURL, err)
	}
	return u, nil
}

// repoRoot walks up from dir to the directory whose go.mod declares our
// module (tools/go.mod, a module of its own, does not count).
func repoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if declaresModule(filepath.Join(d, "go.mod"), modulePath) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("testdb: no go.mod of module %s above %s", modulePath, dir)
		}
	}
}

func declaresModule(goMod, module string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module
		}
	}
	return false
}

// withDatabase points a connection string at another database on the same
// server; it accepts both URLs and keyword/value strings ("host=… dbname=…").
func withDatabase(conn, dbname string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		if u, err := url.Parse(conn); err == nil {
			u.Path = "/" + dbname
			u.RawPath = ""
			return u.String()
		}
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return conn + " dbname=" + dbname
}
