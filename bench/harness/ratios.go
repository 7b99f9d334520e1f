package harness

import (
	"fmt"
	"slices"
)

// computeRatios turns the summaries into the targets of docs/performance.md.
func (b *bench) computeRatios() {
	r := b.rep
	cb, okCB := r.Summary("callback", 8)
	pgb, okPgb := r.Summary("pgbench-callback", ceilingClients)
	minimal, okMin := r.Summary("pgbench-minimal", ceilingClients)
	read, okRead := r.Summary("pgbench-read", ceilingClients)
	empty, okEmpty := r.Summary("empty", ceilingClients)
	get, okGet := r.Summary("get", 8)
	drain, okDrain := r.Summary("drain", 0)
	probe, okProbe := r.Summary("commit-to-active", 0)
	bal, okBal := r.Summary("balance", 8)

	if okCB && okPgb {
		r.ratio("HandleCallback / pgbench callback ceiling, 8 in flight", cb.Throughput/pgb.Throughput, cb.Throughput/pgb.Throughput >= 0.80,
			"≥ 0.80", fmt.Sprintf("%.0f / %.0f per s", cb.Throughput, pgb.Throughput))
	}
	if okCB && okMin {
		// The yardstick that does not move with the service's SQL, and
		// what the database spends on a callback against it (both
		// measured in this run, so they hold on any machine).
		r.ratio("HandleCallback / pgbench-minimal, 8 in flight", cb.Throughput/minimal.Throughput, cb.Throughput >= 0.60*minimal.Throughput,
			"≥ 0.60", fmt.Sprintf("%.0f / %.0f per s", cb.Throughput, minimal.Throughput))
		if minimal.PostgresCPUus > 0 {
			r.ratio("PostgreSQL CPU per callback / per minimal transaction", cb.PostgresCPUus/minimal.PostgresCPUus, cb.PostgresCPUus <= 1.3*minimal.PostgresCPUus,
				"≤ 1.3", fmt.Sprintf("%.0f / %.0f µs", cb.PostgresCPUus, minimal.PostgresCPUus))
		}
	}
	if okCB && cb.PostgresCPUus > 0 {
		r.ratio("paymentd CPU per callback / PostgreSQL CPU per callback", cb.ServerCPUus/cb.PostgresCPUus, cb.ServerCPUus <= 0.35*cb.PostgresCPUus,
			"≤ 0.35", fmt.Sprintf("%.0f / %.0f µs, 8 in flight", cb.ServerCPUus, cb.PostgresCPUus))
	}
	if okCB && okBal && cb.PostgresCPUus > 0 {
		// PayWithBalance does the callback's kind of work (one payment,
		// one order move, one event) plus the ledger row: issue 40 holds
		// it to no more of the database than a callback, in the same run.
		r.ratio("PayWithBalance PostgreSQL CPU / callback's, 8 in flight", bal.PostgresCPUus/cb.PostgresCPUus, bal.PostgresCPUus <= cb.PostgresCPUus,
			"≤ 1.0", fmt.Sprintf("%.0f / %.0f µs", bal.PostgresCPUus, cb.PostgresCPUus))
	}
	if okCB && okPgb {
		r.ratio("HandleCallback p99 / pgbench callback p99, 8 in flight", cb.P99ms/pgb.P99ms, cb.P99ms <= 2*pgb.P99ms,
			"≤ 2", fmt.Sprintf("%.2f / %.2f ms", cb.P99ms, pgb.P99ms))
	}
	if okCB {
		errs := 0
		for _, m := range r.Measurement {
			if m.Workload == "callback" || m.Workload == "commit-to-active" {
				errs += m.Errors
			}
		}
		r.ratio("HandleCallback errors, every run", float64(errs), errs == 0, "0", "errors answered to signed callbacks of pending payments")
	}
	if okGet && okRead && okEmpty {
		combined := 1 / (1/empty.Throughput + 1/read.Throughput)
		r.ratio("GetPayment / 1/(1/empty + 1/read), 8 in flight", get.Throughput/combined, get.Throughput >= 0.60*combined,
			"≥ 0.60", fmt.Sprintf("%.0f / %.0f per s (empty handler %.0f, point read %.0f)", get.Throughput, combined, empty.Throughput, read.Throughput))
	}
	if okDrain && okCB {
		r.ratio("event worker drain / HandleCallback rate", drain.Throughput/cb.Throughput, drain.Throughput >= 1.5*cb.Throughput,
			"≥ 1.5", fmt.Sprintf("%.0f orders/s provisioned / %.0f callbacks/s", drain.Throughput, cb.Throughput))
	}
	if okProbe {
		r.ratio("callback commit → order active, p99 ms (NOTIFY)", probe.P99ms, probe.P99ms < 200,
			"< 200", fmt.Sprintf("p50 %.1f ms; %.0f callbacks/s, half of 1/(1/callbacks + 1/drain)", probe.P50ms, probe.Throughput))
	}
	if len(r.IdleRSS) > 0 {
		idle := slices.Max(r.IdleRSS)
		r.ratio("RSS idle, MiB (largest of the rounds)", idle, idle < 40, "< 40",
			fmt.Sprintf("1 s after /ready answered; anonymous part %s MiB, the rest pages of the executable", joinNums(r.IdleAnonRSS, "%.1f")))
	}
	heaviest, which := 0.0, ""
	for _, m := range r.Measurement {
		if m.Workload != "empty" && m.RSSMiB > heaviest {
			heaviest, which = m.RSSMiB, fmt.Sprintf("%s, %d in flight", m.Workload, m.InFlight)
		}
	}
	if heaviest > 0 {
		r.ratio("RSS at the heaviest workload, MiB", heaviest, heaviest < 200, "< 200", which)
	}
	if len(r.StartReady) > 0 {
		start := median(r.StartReady)
		r.ratio("start to /ready on a migrated database, ms (median)", start, start < 300, "< 300",
			fmt.Sprintf("exec of the binary to the first 200 from /ready; every start: %s", joinNums(r.StartReady, "%.0f")))
	}
}
