package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testBundle struct {
	dir string    // data directory, not created yet
	log *logLines // everything Ensure reported
}

// setup gives a test its own cluster directory under /tmp (reachable by the
// postgres user when we are root) and stops whatever runs there at the end.
func setup(t *testing.T) *testBundle {
	t.Helper()
	// Ensure installs the binaries itself where it can; a test machine
	// without them and without root cannot run these tests at all.
	if _, err := FindBinaries(); err != nil && os.Geteuid() != 0 {
		t.Fatalf("needs PostgreSQL server binaries: %v", err)
	}
	dir := filepath.Join(openTempDir(t), "postgres")
	t.Cleanup(func() { // registered after openTempDir's, so it runs before the removal
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, Stop(ctx, dir))
	})
	return &testBundle{dir: dir, log: &logLines{t: t}}
}

// logLines collects logf output and echoes it to the test log.
type logLines struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	l.t.Log(line)
}

func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// requireDatabaseAnswers connects to url and checks it reached database dbname.
func requireDatabaseAnswers(ctx context.Context, t *testing.T, url, dbname string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	var current string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&current))
	require.Equal(t, dbname, current)
}

func TestEnsureTwiceReusesTheRunningClusterAndItsURL(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), testContext(t)

	start := time.Now()
	first, err := Ensure(ctx, b.dir, "paymentd", b.log.logf)
	require.NoError(t, err)
	firstTook := time.Since(start)

	start = time.Now()
	second, err := Ensure(ctx, b.dir, "paymentd", b.log.logf)
	require.NoError(t, err)
	secondTook := time.Since(start)
	t.Logf("first Ensure (initdb + start) took %s, second (reuse) took %s", firstTook, secondTook)

	require.Regexp(t, `^postgres://postgres@127\.0\.0\.1:\d+/paymentd\?sslmode=disable$`, first)
	require.Equal(t, first, second)
	require.Less(t, secondTook, time.Second)
	require.True(t, b.log.contains("reusing the running cluster"))
	requireDatabaseAnswers(ctx, t, second, "paymentd")

	port, err := os.ReadFile(filepath.Join(b.dir, portFileName))
	require.NoError(t, err)
	require.Contains(t, first, ":"+strings.TrimSpace(string(port))+"/")
}

func TestEnsureRunsTheServerAsPostgresWhenRoot(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), testContext(t)
	if os.Geteuid() != 0 {
		// Not root: the cluster simply runs as the current user.
		_, err := Ensure(ctx, b.dir, "postgres", b.log.logf)
		require.NoError(t, err)
		return
	}

	_, err := Ensure(ctx, b.dir, "postgres", b.log.logf)
	require.NoError(t, err)

	pg, err := user.Lookup("postgres")
	require.NoError(t, err)
	fi, err := os.Stat(b.dir)
	require.NoError(t, err)
	require.Equal(t, pg.Uid, strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10))
	for _, name := range []string{portFileName, confFileName, "pg_hba.conf"} {
		fi, err := os.Stat(filepath.Join(b.dir, name))
		require.NoError(t, err)
		require.Equal(t, pg.Uid, strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10), name)
	}
}

func TestStopThenEnsureRestartsOnTheSameURLWithTheData(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), testContext(t)

	url, err := Ensure(ctx, b.dir, "kept", b.log.logf)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE survivor (id int); INSERT INTO survivor VALUES (42)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, Stop(ctx, b.dir))
	require.NoFileExists(t, filepath.Join(b.dir, pidFileName))
	_, err = pgx.Connect(ctx, url)
	require.Error(t, err, "the server should be down after Stop")
	require.NoError(t, Stop(ctx, b.dir), "stopping a stopped cluster is not an error")

	again, err := Ensure(ctx, b.dir, "kept", b.log.logf)
	require.NoError(t, err)
	require.Equal(t, url, again)
	conn, err = pgx.Connect(ctx, again)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var id int
	require.NoError(t, conn.QueryRow(ctx, "SELECT id FROM survivor").Scan(&id))
	require.Equal(t, 42, id)

	// The stopped cluster copied (StartCopy) is a cluster of its own: the
	// same data, another port, and the original untouched. Here rather than
	// in a test of its own, which would pay for another initdb.
	requireStartCopyCopiesAStoppedCluster(ctx, t, b, again)
}

// requireStartCopyCopiesAStoppedCluster copies the running cluster in
// b.dir, whose URL is url and whose table survivor holds one row, 42.
func requireStartCopyCopiesAStoppedCluster(ctx context.Context, t *testing.T, b *testBundle, url string) {
	t.Helper()
	copyDir := filepath.Join(filepath.Dir(b.dir), "copy")
	t.Cleanup(func() { // runs before setup's removal of the directory
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, Stop(stopCtx, copyDir))
	})
	_, err := StartCopy(ctx, b.dir, copyDir, b.log.logf)
	require.ErrorContains(t, err, "is running", "a running cluster is not copied")
	require.NoDirExists(t, copyDir)

	require.NoError(t, Stop(ctx, b.dir))
	c, err := StartCopy(ctx, b.dir, copyDir, b.log.logf)
	require.NoError(t, err)
	require.NotContains(t, url, fmt.Sprintf(":%d/", c.Port), "the copy has a port of its own")
	copyURL, err := Ensure(ctx, copyDir, "other", b.log.logf)
	require.NoError(t, err)
	require.Equal(t, c.URL("other"), copyURL, "Ensure reuses the running copy")
	requireDatabaseAnswers(ctx, t, copyURL, "other")
	conn, err := pgx.Connect(ctx, c.URL("kept"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var id int
	require.NoError(t, conn.QueryRow(ctx, "SELECT id FROM survivor").Scan(&id))
	require.Equal(t, 42, id, "the copy holds the original's data")
	_, err = conn.Exec(ctx, "INSERT INTO survivor VALUES (43)")
	require.NoError(t, err)

	_, state := (&Cluster{Dir: b.dir}).state()
	require.Equal(t, stateStopped, state, "the original stays stopped")
	again, err := Ensure(ctx, b.dir, "kept", b.log.logf)
	require.NoError(t, err)
	require.Equal(t, url, again, "the original keeps its port")
	orig, err := pgx.Connect(ctx, again)
	require.NoError(t, err)
	defer orig.Close(ctx)
	var n int
	require.NoError(t, orig.QueryRow(ctx, "SELECT count(*) FROM survivor").Scan(&n))
	require.Equal(t, 1, n, "what the copy writes stays in the copy")

	require.NoError(t, orig.Close(ctx))
	require.NoError(t, Stop(ctx, b.dir))
	_, err = StartCopy(ctx, b.dir, copyDir, b.log.logf)
	require.ErrorContains(t, err, "exists already", "a copy never goes over an existing directory")
	entries, err := os.ReadDir(filepath.Dir(b.dir))
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".copy-", "no copy leftovers")
	}
}

func TestEnsureReplacesAStalePidFile(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), testContext(t)

	url, err := Ensure(ctx, b.dir, "postgres", b.log.logf)
	require.NoError(t, err)
	require.NoError(t, Stop(ctx, b.dir))
	// A crash leaves postmaster.pid behind; after a reboot its pid may belong
	// to something else that is alive (here: this test binary).
	stale := fmt.Sprintf("%d\n%s\n0\n0\n", os.Getpid(), b.dir)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, pidFileName), []byte(stale), 0o600))

	again, err := Ensure(ctx, b.dir, "postgres", b.log.logf)
	require.NoError(t, err)
	require.Equal(t, url, again)
	require.True(t, b.log.contains("removing stale postmaster.pid"))
	requireDatabaseAnswers(ctx, t, again, "postgres")
}

func TestConcurrentEnsureSharesOneCluster(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), testContext(t)

	const callers = 6
	urls := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			// Half ask for the same database, half for their own.
			urls[i], errs[i] = Ensure(ctx, b.dir, "db"+strconv.Itoa(i%(callers/2)), b.log.logf)
		})
	}
	wg.Wait()

	var hostPort string
	for i := range callers {
		require.NoError(t, errs[i])
		u, err := pgx.ParseConfig(urls[i])
		require.NoError(t, err)
		if hostPort == "" {
			hostPort = fmt.Sprintf("%s:%d", u.Host, u.Port)
		}
		require.Equal(t, hostPort, fmt.Sprintf("%s:%d", u.Host, u.Port), "one cluster, one port")
		requireDatabaseAnswers(ctx, t, urls[i], "db"+strconv.Itoa(i%(callers/2)))
	}
	entries, err := os.ReadDir(filepath.Dir(b.dir))
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".init-", "no initdb leftovers")
	}
}

func TestStopOfAMissingClusterIsANoOp(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nothing", "here")
	require.NoError(t, Stop(testContext(t), dir))
	require.NoDirExists(t, filepath.Dir(dir), "Stop creates nothing")
}

func TestEnsureRefusesADirectoryThatIsNotACluster(t *testing.T) {
	t.Parallel()
	b, ctx := setup(t), testContext(t)
	require.NoError(t, os.MkdirAll(b.dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "notes.txt"), []byte("mine"), 0o644))

	_, err := Ensure(ctx, b.dir, "postgres", b.log.logf)
	require.ErrorContains(t, err, "is not a PostgreSQL data directory")
	require.FileExists(t, filepath.Join(b.dir, "notes.txt"))
}

func TestEnsureHonoursACancelledContextWhileAnotherHoldsTheLock(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(openTempDir(t), "postgres")
	unlock, err := lockDir(testContext(t), dir)
	require.NoError(t, err)
	defer unlock()

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = Ensure(ctx, dir, "postgres", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestPidFileOfAnotherServerIsStale(t *testing.T) {
	t.Parallel()
	root := openTempDir(t)
	// A stand-in postmaster: a program named postgres, running in some
	// data directory, as another cluster's server would be.
	sleep, err := os.ReadFile("/bin/sleep")
	require.NoError(t, err)
	fake := filepath.Join(root, "postgres")
	require.NoError(t, os.WriteFile(fake, sleep, 0o755))
	ours, theirs := filepath.Join(root, "ours"), filepath.Join(root, "theirs")
	require.NoError(t, os.Mkdir(ours, 0o700))
	require.NoError(t, os.Mkdir(theirs, 0o700))

	cmd := exec.Command(fake, "60")
	cmd.Dir = theirs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pidFile := fmt.Sprintf("%d\n", cmd.Process.Pid)
	for _, dir := range []string{ours, theirs} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, pidFileName), []byte(pidFile), 0o600))
	}

	_, state := (&Cluster{Dir: theirs}).state()
	require.Equal(t, stateRunning, state, "a postgres in its own data directory is running")
	_, state = (&Cluster{Dir: ours}).state()
	require.Equal(t, stateStale, state, "someone else's postgres does not make ours run")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	_, state = (&Cluster{Dir: theirs}).state()
	require.Equal(t, stateStale, state, "a dead pid is stale")
}

func TestStopUnlessInUseLeavesAClusterWithClientsRunning(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := testContext(t)
	url, err := Ensure(ctx, tb.dir, "app", tb.log.logf)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)

	stopped, clients, err := StopUnlessInUse(ctx, tb.dir)
	require.NoError(t, err)
	require.False(t, stopped, "a client is connected")
	require.Equal(t, 1, clients)
	require.NoError(t, conn.Ping(ctx), "the cluster still serves its client")

	require.NoError(t, conn.Close(ctx))
	stopped, _, err = StopUnlessInUse(ctx, tb.dir)
	require.NoError(t, err)
	require.True(t, stopped, "the last client is gone")
	_, state := (&Cluster{Dir: tb.dir}).state()
	require.Equal(t, stateStopped, state)
}
