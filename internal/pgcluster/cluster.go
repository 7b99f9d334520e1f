package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/localport"
)

const (
	portFileName = "paymentd.port" // the port chosen on first init, one decimal number
	confFileName = "paymentd.conf" // settings we depend on, rewritten before every start
	logFileName  = "postgres.log"  // the server's stderr, appended by every start
	pidFileName  = "postmaster.pid"

	superuser = "postgres" // initdb -U: the role in every URL we hand out

	startTimeout = 60 * time.Second // pg_ctl -t for start and stop
	readyTimeout = 30 * time.Second // an already running server must answer within this

	clientsSettleTimeout = 5 * time.Second // StopUnlessInUse: how long disconnecting clients may linger

	sqlstateDuplicateDatabase = "42P04"
)

// Cluster is one private PostgreSQL cluster as Ensure found or made it.
type Cluster struct {
	Dir    string // absolute data directory
	Port   int    // TCP port on 127.0.0.1
	BinDir string // directory holding initdb and pg_ctl

	runAs *owner // nil: run the binaries as ourselves
	logf  func(format string, args ...any)
}

// URL is the connection URL of database dbname in the cluster, as the
// superuser over loopback TCP (trusted, so no password).
func (c *Cluster) URL(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// LogFile is where the server writes its log.
func (c *Cluster) LogFile() string { return filepath.Join(c.Dir, logFileName) }

// Ensure makes sure a private cluster lives in dir (initialised on first use),
// is running, and has a database named dbname, and returns that database's
// URL, e.g. postgres://postgres@127.0.0.1:24817/paymentd?sslmode=disable. The
// URL is the same on every call for the same dir. logf receives one line per
// state change and may be nil.
//
// Ensure is safe to call from several goroutines and processes at once.
func Ensure(ctx context.Context, dir, dbname string, logf func(format string, args ...any)) (string, error) {
	if dbname == "" {
		return "", errors.New("pgcluster: empty database name")
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return "", err
	}
	defer unlock()

	binDir, err := ensureBinaries(ctx, logf)
	if err != nil {
		return "", err
	}
	if binDir, err = binariesFor(ctx, dir, binDir); err != nil {
		return "", err
	}
	runAs, err := serverOwner(ctx, dir, true, logf)
	if err != nil {
		return "", err
	}
	c := &Cluster{Dir: dir, BinDir: binDir, runAs: runAs, logf: logf}
	fresh, err := c.initIfNeeded(ctx)
	if err != nil {
		return "", err
	}
	if err := c.start(ctx, fresh); err != nil {
		return "", err
	}
	if err := c.createDatabase(ctx, dbname); err != nil {
		return "", err
	}
	return c.URL(dbname), nil
}

// Stop stops the cluster in dir with pg_ctl stop -m fast (open transactions
// are rolled back, nothing committed is lost). A cluster that does not exist
// or is not running is not an error.
func Stop(ctx context.Context, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()
	return stopLocked(ctx, dir)
}

// StopUnlessInUse stops the cluster in dir like Stop, unless another client
// is connected to it: the last user of a shared private cluster (paymentd dev
// and the tests may share one) stops it, the others leave it running. It
// reports whether the cluster is stopped now and, when it is not, how many
// clients still use it.
func StopUnlessInUse(ctx context.Context, dir string) (stopped bool, clients int, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return false, 0, fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		return true, 0, nil
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return false, 0, err
	}
	defer unlock()

	c := &Cluster{Dir: dir, logf: func(string, ...any) {}}
	if _, state := c.state(); state == stateRunning {
		if c.Port = c.pidFilePort(); c.Port == 0 {
			if err := c.loadPort(); err != nil {
				return false, 0, err
			}
		}
		// A client that has just disconnected (our own pool, closed a moment
		// ago) stays in pg_stat_activity until its backend has exited.
		settle, cancel := context.WithTimeout(ctx, clientsSettleTimeout)
		defer cancel()
		for {
			if clients, err = c.otherClients(ctx); err != nil {
				return false, 0, err
			}
			if clients == 0 {
				break
			}
			select {
			case <-settle.Done():
				return false, clients, nil
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return true, 0, stopLocked(ctx, dir)
}

// otherClients counts the client sessions of the cluster besides the one
// asking.
func (c *Cluster) otherClients(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: connect to the cluster in %s: %w", c.Dir, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity "+
		"WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: count the clients of the cluster in %s: %w", c.Dir, err)
	}
	return n, nil
}

// stopLocked is Stop with the directory lock held.
func stopLocked(ctx context.Context, dir string) error {
	var err error
	c := &Cluster{Dir: dir, logf: func(string, ...any) {}}
	pid, state := c.state()
	switch state {
	case stateStopped:
		return nil
	case stateStale:
		return c.removeStalePidFile(pid)
	}
	if c.runAs, err = serverOwner(ctx, dir, false, c.logf); err != nil {
		return err
	}
	if c.BinDir, err = FindBinaries(); err == nil {
		c.BinDir, err = binariesFor(ctx, dir, c.BinDir)
	}
	if err != nil {
		// The binaries went away under a running server (a package
		// removal); what pg_ctl stop -m fast would do is send SIGINT.
		return c.signalStop(ctx, pid)
	}
	out, err := c.command(ctx, "pg_ctl", "stop", "-D", dir, "-m", "fast", "-w",
		"-t", strconv.Itoa(int(startTimeout.Seconds()))).CombinedOutput()
	if err != nil {
		if _, state := c.state(); state != stateRunning {
			return nil // it stopped on its own meanwhile
		}
		return fmt.Errorf("pgcluster: pg_ctl stop in %s failed: %w: %s", dir, err, oneLine(out))
	}
	return nil
}

// initIfNeeded runs initdb when dir holds no cluster yet and reports whether
// it did; otherwise it loads the remembered port.
func (c *Cluster) initIfNeeded(ctx context.Context) (fresh bool, err error) {
	_, err = os.Stat(filepath.Join(c.Dir, "PG_VERSION"))
	switch {
	case err == nil:
		return false, c.loadPort()
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("pgcluster: %w", err)
	}
	if entries, err := os.ReadDir(c.Dir); err == nil && len(entries) > 0 {
		return false, fmt.Errorf("pgcluster: %s exists but is not a PostgreSQL data directory (no PG_VERSION): "+
			"remove it or choose another directory", c.Dir)
	}
	return true, c.initdb(ctx)
}

// initdb creates the cluster in a temporary sibling directory and renames it
// into place when complete, so an interrupted first run leaves only a
// .<name>.init-* directory, never a half cluster that later runs would trust.
func (c *Cluster) initdb(ctx context.Context) error {
	if err := checkTraversable(c.Dir, c.runAs); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(c.Dir), "."+filepath.Base(c.Dir)+".init-")
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left to remove once renamed
	if err := c.runAs.chown(tmp); err != nil {
		return err
	}

	c.logf("pgcluster: initializing a private PostgreSQL cluster in %s%s", c.Dir, c.asWhom())
	start := time.Now()
	out, err := c.command(ctx, "initdb", "-D", tmp, "-U", superuser, "--auth=trust",
		"--encoding=UTF8", "--no-locale").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: initdb failed: %w: %s", err, oneLine(lastLines(out, 5)))
	}

	port, err := localport.Free()
	if err != nil {
		return err
	}
	// Trust, but only on our own socket (inside the 0700 data directory) and
	// on loopback; listen_addresses keeps every other interface closed anyway.
	hba := "# Written by paymentd (internal/pgcluster): a private cluster, trusted on loopback only.\n" +
		"local all all trust\n" +
		"host  all all 127.0.0.1/32 trust\n" +
		"# A standby on this machine (pg_basebackup, streaming), as the failover tests make.\n" +
		"local replication all trust\n" +
		"host  replication all 127.0.0.1/32 trust\n"
	if err := c.writeFile(filepath.Join(tmp, "pg_hba.conf"), hba); err != nil {
		return err
	}
	// Small, editable settings go into postgresql.conf itself, before the
	// include; what the URL depends on comes after it and therefore wins.
	conf := "\n# Added by paymentd (internal/pgcluster): a small private cluster.\n" +
		"shared_buffers = 32MB\n" +
		"max_connections = 200\n" +
		"# port, listen_addresses, unix_socket_directories: rewritten before every start.\n" +
		"include '" + confFileName + "'\n"
	if err := appendFile(filepath.Join(tmp, "postgresql.conf"), conf); err != nil {
		return err
	}
	if err := c.writeFile(filepath.Join(tmp, portFileName), strconv.Itoa(port)+"\n"); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.Dir); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.Port = port
	c.logf("pgcluster: initialized %s in %s; port %d", c.Dir, time.Since(start).Round(time.Millisecond), port)
	return nil
}

// loadPort reads the remembered port. A data directory initialised by
// someone else has none yet; it gets one now, remembered from then on.
func (c *Cluster) loadPort() error {
	path := filepath.Join(c.Dir, portFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		port, err := localport.Free()
		if err != nil {
			return err
		}
		c.logf("pgcluster: %s has no %s; using port %d from now on", c.Dir, portFileName, port)
		c.Port = port
		return c.writeFile(path, strconv.Itoa(port)+"\n")
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("pgcluster: %s does not hold a TCP port: %q", path, strings.TrimSpace(string(b)))
	}
	c.Port = port
	return nil
}

// start brings the cluster to running: reuse a live server, clear a stale
// pid file, start a stopped one.
func (c *Cluster) start(ctx context.Context, fresh bool) error {
	pid, state := c.state()
	switch state {
	case stateRunning:
		if p := c.pidFilePort(); p != 0 && p != c.Port {
			c.logf("pgcluster: the running server in %s listens on port %d, not %d from %s; using %d",
				c.Dir, p, c.Port, portFileName, p)
			c.Port = p
		}
		c.logf("pgcluster: reusing the running cluster in %s (pid %d, port %d)", c.Dir, pid, c.Port)
		return c.waitReady(ctx)
	case stateStale:
		if err := c.removeStalePidFile(pid); err != nil {
			return err
		}
	}

	if err := c.claimPort(fresh); err != nil {
		return err
	}
	if err := c.writeConf(); err != nil {
		return err
	}
	c.logf("pgcluster: starting PostgreSQL in %s on 127.0.0.1:%d (log %s)", c.Dir, c.Port, c.LogFile())
	start := time.Now()
	out, err := c.command(ctx, "pg_ctl", "start", "-w", "-t", strconv.Itoa(int(startTimeout.Seconds())),
		"-D", c.Dir, "-l", c.LogFile()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: pg_ctl start in %s failed: %w: %s; the log %s ends with: %s",
			c.Dir, err, oneLine(out), c.LogFile(), oneLine(c.logTail()))
	}
	c.logf("pgcluster: PostgreSQL is running on 127.0.0.1:%d (started in %s)", c.Port, time.Since(start).Round(time.Millisecond))
	return nil
}

// claimPort checks that our port is free before starting. A cluster
// initialised a moment ago can still move to another port; an older one must
// keep its port, because its URL may be written down somewhere.
func (c *Cluster) claimPort(fresh bool) error {
	if localport.IsFree(c.Port) {
		return nil
	}
	if !fresh {
		return fmt.Errorf("pgcluster: port %d on 127.0.0.1, remembered in %s, is taken by another program: "+
			"stop it, or write a free port into that file (the database URL changes with it)",
			c.Port, filepath.Join(c.Dir, portFileName))
	}
	port, err := localport.Free()
	if err != nil {
		return err
	}
	c.logf("pgcluster: port %d was taken meanwhile; using %d", c.Port, port)
	c.Port = port
	return c.writeFile(filepath.Join(c.Dir, portFileName), strconv.Itoa(port)+"\n")
}

// writeConf writes the settings our URL and isolation depend on.
func (c *Cluster) writeConf() error {
	var b strings.Builder
	b.WriteString("# Written by paymentd (internal/pgcluster) before every start and included at the end of\n" +
		"# postgresql.conf. Do not edit: the port comes from " + portFileName + ".\n")
	fmt.Fprintf(&b, "port = %d\n", c.Port)
	b.WriteString("listen_addresses = '127.0.0.1'\n")
	// The socket lives in the data directory so we never touch the system
	// cluster's /var/run/postgresql. A socket path has a hard limit of 107
	// bytes; past it, go without a socket (we connect over TCP anyway).
	if len(filepath.Join(c.Dir, ".s.PGSQL."+strconv.Itoa(c.Port))) < 108 {
		fmt.Fprintf(&b, "unix_socket_directories = %s\n", confQuote(c.Dir))
	} else {
		c.logf("pgcluster: %s is too long a path for a unix socket; the cluster listens on TCP only", c.Dir)
		b.WriteString("unix_socket_directories = ''\n")
	}
	return c.writeFile(filepath.Join(c.Dir, confFileName), b.String())
}

// createDatabase creates dbname unless it exists. We hold the directory lock,
// so only another client of the cluster could race us; 42P04 covers that.
func (c *Cluster) createDatabase(ctx context.Context, dbname string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect to the cluster in %s: %w", c.Dir, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", dbname).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: look up database %s: %w", dbname, err)
	}
	if exists {
		return nil
	}
	c.logf("pgcluster: creating database %s", dbname)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbname}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == sqlstateDuplicateDatabase {
			return nil
		}
		return fmt.Errorf("pgcluster: create database %s: %w", dbname, err)
	}
	return nil
}

// waitReady waits until a server that is already running answers, which it
// may not yet do when someone else started it a moment ago.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(attempt)
			_ = conn.Close(attempt)
		}
		cancelAttempt()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: the server running in %s does not answer on port %d (see %s): %w",
				c.Dir, c.Port, c.LogFile(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type serverState int

const (
	stateStopped serverState = iota // no postmaster.pid
	stateRunning                    // postmaster.pid names a live postgres process
	stateStale                      // postmaster.pid left behind by a server that died
)

// state reads postmaster.pid. A pid that is dead, or alive but now some other
// program or another cluster's server (pids are reused after a reboot), makes
// the file stale; postgres itself would refuse to start over a pid file whose
// pid is alive.
func (c *Cluster) state() (pid int, state serverState) {
	b, err := os.ReadFile(filepath.Join(c.Dir, pidFileName))
	if err != nil {
		return 0, stateStopped
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, stateStale
	}
	if !isPostmasterOf(pid, c.Dir) {
		return pid, stateStale
	}
	return pid, stateRunning
}

// isPostmasterOf reports whether pid is a live postgres serving dir. The
// postmaster's working directory is its data directory, which tells our
// server from another one (the system cluster's) that inherited the pid.
func isPostmasterOf(pid int, dir string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if cwd, err := os.Readlink(proc + "/cwd"); err == nil {
		if real, err := filepath.EvalSymlinks(dir); err == nil && cwd != real {
			return false
		}
	}
	name := ""
	if exe, err := os.Readlink(proc + "/exe"); err == nil {
		name = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	} else if cmdline, err := os.ReadFile(proc + "/cmdline"); err == nil {
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		name = filepath.Base(string(argv0))
	} else {
		return true // alive, and we cannot tell what it is: assume it is ours
	}
	return name == "postgres" || name == "postmaster"
}

// pidFilePort is the port line (the 4th) of postmaster.pid, 0 if unknown.
func (c *Cluster) pidFilePort() int {
	b, err := os.ReadFile(filepath.Join(c.Dir, pidFileName))
	if err != nil {
		return 0
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0
	}
	port, _ := strconv.Atoi(strings.TrimSpace(lines[3]))
	return port
}

func (c *Cluster) removeStalePidFile(pid int) error {
	c.logf("pgcluster: removing stale %s in %s (pid %d is not a running postgres)", pidFileName, c.Dir, pid)
	if err := os.Remove(filepath.Join(c.Dir, pidFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// signalStop is pg_ctl stop -m fast without pg_ctl: SIGINT, then wait for the
// postmaster to go away.
func (c *Cluster) signalStop(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgcluster: stop postgres (pid %d): %w", pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if _, state := c.state(); state != stateRunning {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres (pid %d) in %s did not stop: %w", pid, c.Dir, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// command prepares one of the cluster's binaries: as the server's account
// when we are root, in its own process group so a Ctrl-C meant for us does
// not reach a server that outlives us, and without PG* variables (a PGDATA or
// PGPORT meant for another cluster must not redirect pg_ctl).
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, name), args...)
	cmd.Dir = "/" // the server's account may not be able to enter our working directory
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var env []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "PG") {
			continue
		}
		if c.runAs != nil && (key == "HOME" || key == "USER" || key == "LOGNAME") {
			continue
		}
		env = append(env, kv)
	}
	if c.runAs != nil {
		cmd.SysProcAttr.Credential = c.runAs.credential()
		env = append(env, "HOME="+c.runAs.home, "USER="+c.runAs.name, "LOGNAME="+c.runAs.name)
	}
	cmd.Env = env
	return cmd
}

func (c *Cluster) asWhom() string {
	if c.runAs == nil {
		return ""
	}
	return " as " + c.runAs.String()
}

// writeFile writes a file of the data directory, owned by the server's account.
func (c *Cluster) writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return c.runAs.chown(path)
}

func appendFile(path, content string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := io.WriteString(f, content); err != nil {
		_ = f.Close()
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

func (c *Cluster) logTail() []byte {
	f, err := os.Open(c.LogFile())
	if err != nil {
		return nil
	}
	defer f.Close()
	const tail = 4096
	if fi, err := f.Stat(); err == nil && fi.Size() > tail {
		_, _ = f.Seek(-tail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return lastLines(b, 5)
}

// confQuote quotes a postgresql.conf string value.
func confQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// oneLine folds command output into one line for an error message.
func oneLine(b []byte) string {
	var parts []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if s := strings.TrimSpace(line); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " | ")
}
