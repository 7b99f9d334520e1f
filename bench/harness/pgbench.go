package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PgbenchResult is one pgbench run.
type PgbenchResult struct {
	TPS       float64
	Txns      int
	Failed    int
	Latencies []time.Duration // sorted, from the per-transaction log
	Elapsed   time.Duration
	// CPU is pgbench's own CPU time (the ceiling's load generator).
	CPU time.Duration
}

var (
	tpsRe    = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	txnsRe   = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
	failedRe = regexp.MustCompile(`number of failed transactions: ([0-9]+)`)
)

// Pgbench runs pgbench with a custom script against dbURL: prepared
// statements (as pgx uses them), clients connections, for duration, with
// vars defined for every client. workDir receives the script and the
// per-transaction logs.
func Pgbench(ctx context.Context, bin, dbURL, workDir, name, script string, clients int, duration time.Duration, vars map[string]string) (PgbenchResult, error) {
	secs := max(1, int(duration.Round(time.Second).Seconds()))
	return runPgbench(ctx, bin, dbURL, workDir, name, script, clients, []string{"-T", strconv.Itoa(secs)}, vars)
}

// pgbenchTxns is Pgbench for a number of transactions per client instead
// of a duration.
func pgbenchTxns(ctx context.Context, bin, dbURL, workDir, name, script string, clients, txns int, vars map[string]string) (PgbenchResult, error) {
	return runPgbench(ctx, bin, dbURL, workDir, name, script, clients, []string{"-t", strconv.Itoa(txns)}, vars)
}

func runPgbench(ctx context.Context, bin, dbURL, workDir, name, script string, clients int, limit []string, vars map[string]string) (PgbenchResult, error) {
	dir, err := os.MkdirTemp(workDir, "pgbench-"+name+"-")
	if err != nil {
		return PgbenchResult{}, err
	}
	defer os.RemoveAll(dir)
	scriptFile := filepath.Join(dir, name+".sql")
	if err := os.WriteFile(scriptFile, []byte(script), 0o644); err != nil {
		return PgbenchResult{}, err
	}
	args := append([]string{
		"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-f", scriptFile, "-l", "--log-prefix", filepath.Join(dir, "log"),
	}, limit...)
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "-D", k+"="+vars[k])
	}
	args = append(args, dbURL)
	cmd := exec.CommandContext(ctx, bin, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return PgbenchResult{}, fmt.Errorf("pgbench %s: %w: %s", name, err, lastLinesOf(string(out), 5))
	}
	r := PgbenchResult{Elapsed: elapsed}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	text := string(out)
	if m := tpsRe.FindStringSubmatch(text); m != nil {
		r.TPS, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := txnsRe.FindStringSubmatch(text); m != nil {
		r.Txns, _ = strconv.Atoi(m[1])
	}
	if m := failedRe.FindStringSubmatch(text); m != nil {
		r.Failed, _ = strconv.Atoi(m[1])
	}
	if r.TPS == 0 {
		return r, fmt.Errorf("pgbench %s: no tps in its output: %s", name, lastLinesOf(text, 5))
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "log.*"))
	for _, f := range logs {
		lat, err := readPgbenchLog(f)
		if err != nil {
			return r, err
		}
		r.Latencies = append(r.Latencies, lat...)
	}
	slices.Sort(r.Latencies)
	return r, nil
}

// readPgbenchLog reads the latencies of a per-transaction log: lines of
// "client_id transaction_no time script_no time_epoch time_us", time in µs.
func readPgbenchLog(path string) ([]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []time.Duration
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 3 {
			continue
		}
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			continue // "failed" / "skipped" lines
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out, s.Err()
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
