package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rustbill/paymentd/internal/localport"
)

// StartStandby makes dir a streaming standby of the running private cluster
// in primaryDir, as an operator's failover set-up would: pg_basebackup -R
// (the WAL streamed with it, a fast checkpoint), primary_conninfo naming
// the standby name (what the primary's synchronous_standby_names lists),
// a port of its own, started and answering read-only queries. dir must not
// exist or be empty. The tests of failover use it; a service never does.
//
// Make the primary synchronous only after this returns: a setting in the
// primary's postgresql.auto.conf at the time of the copy would be copied
// too, and a standby promoted with synchronous_standby_names of its own
// would wait for a standby it does not have at every commit.
func StartStandby(ctx context.Context, primaryDir, dir, name string, logf func(format string, args ...any)) (*Cluster, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	primaryDir, err := filepath.Abs(primaryDir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	primary := &Cluster{Dir: primaryDir, logf: logf}
	if err := primary.loadPort(); err != nil {
		return nil, err
	}
	binDir, runAs, err := serverOf(ctx, primaryDir, logf)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if err := runAs.chown(dir); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, BinDir: binDir, runAs: runAs, logf: logf}
	if err := checkTraversable(dir, runAs); err != nil {
		return nil, err
	}

	logf("pgcluster: copying the cluster on port %d into %s as standby %q", primary.Port, dir, name)
	start := time.Now()
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=%s application_name=%s", primary.Port, superuser, name)
	out, err := c.command(ctx, "pg_basebackup", "-d", conn, "-D", dir, "-R", "-X", "stream", "--checkpoint=fast").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: pg_basebackup into %s failed: %w: %s", dir, err, oneLine(lastLines(out, 5)))
	}
	// The copy holds the primary's port file and log; the standby gets its
	// own port and starts its own log.
	port, err := localport.Free()
	if err != nil {
		return nil, err
	}
	c.Port = port
	if err := c.writeFile(filepath.Join(dir, portFileName), strconv.Itoa(port)+"\n"); err != nil {
		return nil, err
	}
	_ = os.Remove(c.LogFile())
	if err := c.start(ctx, true); err != nil {
		return nil, err
	}
	logf("pgcluster: standby %q streams from port %d (ready in %s)", name, primary.Port, time.Since(start).Round(time.Millisecond))
	return c, nil
}

// Promote makes the standby in dir the primary (pg_ctl promote -w): what a
// failover manager does once it has decided that the primary is gone.
func Promote(ctx context.Context, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{Dir: dir, logf: func(string, ...any) {}}
	if c.runAs, err = serverOwner(ctx, dir, false, c.logf); err != nil {
		return err
	}
	if c.BinDir, err = FindBinaries(); err != nil {
		return err
	}
	if c.BinDir, err = binariesFor(ctx, dir, c.BinDir); err != nil {
		return err
	}
	out, err := c.command(ctx, "pg_ctl", "promote", "-w", "-t", strconv.Itoa(int(startTimeout.Seconds())), "-D", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: pg_ctl promote in %s failed: %w: %s", dir, err, oneLine(out))
	}
	return nil
}

// Kill ends the server in dir as the death of its machine would: SIGKILL to
// the postmaster and every process it started, so no backend finishes
// anything and no connection is closed politely. The stale pid file it
// leaves is cleared by the next Ensure or Stop.
func Kill(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{Dir: dir}
	pid, state := c.state()
	if state != stateRunning {
		return fmt.Errorf("pgcluster: no server runs in %s", dir)
	}
	children, err := childrenOf(pid)
	if err != nil {
		return err
	}
	// The postmaster first, so that it restarts nothing.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgcluster: kill %d: %w", pid, err)
	}
	for _, child := range children {
		if err := syscall.Kill(child, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgcluster: kill %d: %w", child, err)
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out, nil
}
