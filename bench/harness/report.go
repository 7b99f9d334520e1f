package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Measurement is one run of one workload or ceiling.
type Measurement struct {
	Workload string `json:"workload"`
	InFlight int    `json:"in_flight"`
	Round    int    `json:"round"`
	Requests int    `json:"requests"`
	Errors   int    `json:"errors"`
	// ErrorSamples counts the errors by kind.
	ErrorSamples map[string]int `json:"error_samples,omitempty"`
	Seconds      float64        `json:"seconds"`
	Throughput   float64        `json:"throughput"`
	P50ms        float64        `json:"p50_ms"`
	P99ms        float64        `json:"p99_ms"`
	// CPU per request in microseconds: the server process (paymentd, the
	// empty server; 0 for pgbench), PostgreSQL (postmaster and backends),
	// the fakes, and the load generator (this process, or pgbench).
	ServerCPUus   float64 `json:"server_cpu_us_per_req"`
	PostgresCPUus float64 `json:"postgres_cpu_us_per_req"`
	FakesCPUus    float64 `json:"fakes_cpu_us_per_req,omitempty"`
	LoadCPUus     float64 `json:"loadgen_cpu_us_per_req"`
	// LoadShare is the load generator's part of all the CPU the run used.
	LoadShare float64 `json:"loadgen_cpu_share"`
	// CPUBusy is the CPU used by everything measured over the machine's
	// capacity (wall time × CPUs).
	CPUBusy float64 `json:"cpu_busy"`
	// OtherCPU is the CPU other processes of the machine used meanwhile,
	// over the machine's capacity: noise in the figures.
	OtherCPU float64 `json:"other_cpu"`
	// RSS of the server while the run lasted (max of samples every 50 ms).
	RSSMiB float64 `json:"rss_max_mib,omitempty"`
	// Exhausted: the prepared requests ran out before the duration.
	Exhausted bool   `json:"exhausted,omitempty"`
	Note      string `json:"note,omitempty"`
	// Waits: where the requests waited (--waits).
	Waits *Waits `json:"waits,omitempty"`
}

// Summary is the median over the rounds of one workload at one
// concurrency.
type Summary struct {
	Workload      string  `json:"workload"`
	InFlight      int     `json:"in_flight"`
	Rounds        int     `json:"rounds"`
	Throughput    float64 `json:"throughput"`
	ThroughputMin float64 `json:"throughput_min"`
	ThroughputMax float64 `json:"throughput_max"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	P99msMax      float64 `json:"p99_ms_max"`
	Errors        int     `json:"errors"`
	ServerCPUus   float64 `json:"server_cpu_us_per_req"`
	PostgresCPUus float64 `json:"postgres_cpu_us_per_req"`
	LoadCPUus     float64 `json:"loadgen_cpu_us_per_req"`
	LoadShare     float64 `json:"loadgen_cpu_share"`
	CPUBusy       float64 `json:"cpu_busy"`
	OtherCPU      float64 `json:"other_cpu"`
	RSSMiB        float64 `json:"rss_max_mib"`
}

// Ratio is one target: a measured value against its bound.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Pass   bool    `json:"pass"`
	How    string  `json:"how"`
}

// Check is one invariant checked after the run.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Report is everything a run measured.
type Report struct {
	Started     time.Time         `json:"started"`
	Command     string            `json:"command"`
	Machine     map[string]string `json:"machine"`
	Options     map[string]string `json:"options"`
	StartReady  []float64         `json:"start_to_ready_ms"`
	FirstStart  float64           `json:"first_start_to_ready_ms"`
	IdleRSS     []float64         `json:"idle_rss_mib"`
	IdleAnonRSS []float64         `json:"idle_anon_rss_mib"`
	// Trends: GetPaymentTrends timed on the run's database (90 and 7 days).
	Trends      []TrendsTiming `json:"trends_timing,omitempty"`
	Measurement []Measurement  `json:"measurements"`
	Summaries   []Summary      `json:"summaries"`
	Ratios      []Ratio        `json:"ratios"`
	Checks      []Check        `json:"invariants"`
	Notes       []string       `json:"notes,omitempty"`
	Took        float64        `json:"took_seconds"`
}

func (r *Report) add(m Measurement) { r.Measurement = append(r.Measurement, m) }

// summarize computes the medians of every (workload, in-flight) pair, in
// the order they first ran.
func (r *Report) summarize() {
	type key struct {
		w string
		c int
	}
	var order []key
	groups := map[key][]Measurement{}
	for _, m := range r.Measurement {
		k := key{m.Workload, m.InFlight}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	r.Summaries = nil
	for _, k := range order {
		ms := groups[k]
		col := func(f func(Measurement) float64) []float64 {
			out := make([]float64, len(ms))
			for i, m := range ms {
				out[i] = f(m)
			}
			return out
		}
		tp := col(func(m Measurement) float64 { return m.Throughput })
		p99 := col(func(m Measurement) float64 { return m.P99ms })
		s := Summary{
			Workload: k.w, InFlight: k.c, Rounds: len(ms),
			Throughput: median(tp), ThroughputMin: slices.Min(tp), ThroughputMax: slices.Max(tp),
			P50ms: median(col(func(m Measurement) float64 { return m.P50ms })),
			P99ms: median(p99), P99msMax: slices.Max(p99),
			ServerCPUus:   median(col(func(m Measurement) float64 { return m.ServerCPUus })),
			PostgresCPUus: median(col(func(m Measurement) float64 { return m.PostgresCPUus })),
			LoadCPUus:     median(col(func(m Measurement) float64 { return m.LoadCPUus })),
			LoadShare:     median(col(func(m Measurement) float64 { return m.LoadShare })),
			CPUBusy:       median(col(func(m Measurement) float64 { return m.CPUBusy })),
			OtherCPU:      median(col(func(m Measurement) float64 { return m.OtherCPU })),
			RSSMiB:        slices.Max(col(func(m Measurement) float64 { return m.RSSMiB })),
		}
		for _, m := range ms {
			s.Errors += m.Errors
		}
		r.Summaries = append(r.Summaries, s)
	}
}

// Summary of a workload at a concurrency; ok false when it did not run.
func (r *Report) Summary(workload string, inFlight int) (Summary, bool) {
	for _, s := range r.Summaries {
		if s.Workload == workload && s.InFlight == inFlight {
			return s, true
		}
	}
	return Summary{}, false
}

func (r *Report) ratio(name string, value float64, pass bool, target, how string) {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		value = 0
	}
	r.Ratios = append(r.Ratios, Ratio{Name: name, Value: value, Pass: pass, Target: target, How: how})
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# paymentd benchmark, %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "`%s` — %s\n\n", r.Command, machineLine(r.Machine))
	b.WriteString("## Targets\n\n| ratio | value | target | | how |\n|---|---:|---|---|---|\n")
	for _, x := range r.Ratios {
		mark := "PASS"
		if !x.Pass {
			mark = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.Name, fmtNum(x.Value), x.Target, mark, x.How)
	}
	b.WriteString("\n## Workloads (median of rounds; spread is min–max throughput)\n\n")
	b.WriteString("| workload | in flight | req/s | spread | p50 ms | p99 ms | errors | server µs/req | postgres µs/req | loadgen µs/req | loadgen share | CPU busy | other load | RSS MiB |\n")
	b.WriteString("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Summaries {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f–%.0f | %s | %s | %d | %.0f | %.0f | %.0f | %.1f%% | %.0f%% | %.0f%% | %s |\n",
			s.Workload, inFlightText(s.InFlight), s.Throughput, s.ThroughputMin, s.ThroughputMax, msText(s.P50ms), msText(s.P99ms), s.Errors,
			s.ServerCPUus, s.PostgresCPUus, s.LoadCPUus, 100*s.LoadShare, 100*s.CPUBusy, 100*s.OtherCPU, rssText(s.RSSMiB))
	}
	b.WriteString("\nCPU per request is CPU time over requests (drain: over orders). Server is paymentd (the empty server for `empty`), " +
		"postgres the whole cluster, loadgen this harness's HTTP/2 client (pgbench itself for the pgbench rows). " +
		"CPU busy is all of that over the machine's capacity; other load is what other processes used meanwhile.\n")
	fmt.Fprintf(&b, "\nStart to /ready on a migrated database: %s ms (first start, migrating an empty database: %.0f ms). "+
		"Idle RSS: %s MiB, of which anonymous (heap, stacks; the rest is the executable's pages): %s MiB.\n",
		joinNums(r.StartReady, "%.0f"), r.FirstStart, joinNums(r.IdleRSS, "%.1f"), joinNums(r.IdleAnonRSS, "%.1f"))
	if len(r.Trends) > 0 {
		fmt.Fprintf(&b, "\n%s\n", trendsText(r.Trends))
	}
	waitsSection(&b, r.Measurement)
	b.WriteString("\n## Invariants\n\n")
	for _, c := range r.Checks {
		mark := "ok"
		if !c.OK {
			mark = "**BROKEN**"
		}
		fmt.Fprintf(&b, "- %s: %s — %s\n", mark, c.Name, c.Detail)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\nThe run took %.0f s.\n", r.Took)
	return b.String()
}

func inFlightText(n int) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprint(n)
}

func msText(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func rssText(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func machineLine(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+m[k])
	}
	return strings.Join(parts, "; ")
}

func joinNums(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// write saves the report as <dir>/<stamp>.json and .md.
func (r *Report) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	stamp := r.Started.UTC().Format("2006-01-02T1504Z")
	if strings.Contains(r.Command, "--quick") {
		stamp += "-quick"
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, stamp)
	if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	return base, os.WriteFile(base+".md", []byte(r.Markdown()), 0o644)
}

// printLine is one measurement as the run goes.
func printLine(w io.Writer, m Measurement) {
	extra := ""
	if m.Errors > 0 {
		extra = fmt.Sprintf(" errors=%d %v", m.Errors, m.ErrorSamples)
	}
	if m.Exhausted {
		extra += " (ran out of prepared requests)"
	}
	if m.Note != "" {
		extra += " " + m.Note
	}
	if m.Waits != nil {
		extra += "\n      waits: " + m.Waits.text()
	}
	fmt.Fprintf(w, "  round %d %-18s %3d in flight: %8.0f/s  p50 %6.2f ms  p99 %6.2f ms  server %5.0f µs  pg %5.0f µs  loadgen %4.0f µs (%4.1f%%)  other load %3.0f%%%s\n",
		m.Round, m.Workload, m.InFlight, m.Throughput, m.P50ms, m.P99ms, m.ServerCPUus, m.PostgresCPUus, m.LoadCPUus, 100*m.LoadShare, 100*m.OtherCPU, extra)
}

// waitsSection lists, for every measurement sampled with --waits, where
// its requests waited.
func waitsSection(b *strings.Builder, ms []Measurement) {
	head := false
	for _, m := range ms {
		if m.Waits == nil {
			continue
		}
		if !head {
			b.WriteString("\n## Where the requests waited (--waits)\n\n" +
				"PostgreSQL's client backends of the service database, sampled every 10 ms from pg_stat_activity: how many were, on average, " +
				"running (CPU), idle in a transaction (paymentd's turn), or waiting on an event (type:name); then paymentd's pool " +
				"acquire wait per request, the share of acquires that found no idle connection, and the requests waiting for a " +
				"[server].max_concurrency slot, on average.\n\n| workload | in flight | round | req/s | p99 ms | where |\n|---|---:|---:|---:|---:|---|\n")
			head = true
		}
		fmt.Fprintf(b, "| %s | %d | %d | %.0f | %s | %s |\n", m.Workload, m.InFlight, m.Round, m.Throughput, msText(m.P99ms), m.Waits.text())
	}
}
