package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/rustbill/paymentd/internal/clustertest"
)

// figures counts what the run made, from the database: payments, invoices,
// renewed periods, refunds.
func figures(ctx context.Context, c *clustertest.Cluster) string {
	var b strings.Builder
	for _, q := range []struct{ name, sql string }{
		{"payments", `SELECT coalesce(string_agg(k || '=' || n, ' ' ORDER BY k), '') FROM (
			SELECT method || '/' || status || CASE WHEN invoice_id IS NOT NULL THEN '/invoice' ELSE '' END
			       || CASE WHEN captured_amount > 0 THEN '/captured' ELSE '' END AS k, count(*) AS n
			FROM payments GROUP BY 1) x`},
		{"invoices", `SELECT coalesce(string_agg(status || '=' || n, ' ' ORDER BY status), '') FROM (
			SELECT status, count(*) AS n FROM invoices GROUP BY 1) x`},
		{"periods", `SELECT coalesce(string_agg(k || '=' || n, ' ' ORDER BY k), '') FROM (
			SELECT CASE WHEN seq = 1 THEN 'first' ELSE 'renewal' END || '/' || status AS k, count(*) AS n
			FROM service_periods GROUP BY 1) x`},
		{"orders", `SELECT coalesce(string_agg(status || '=' || n, ' ' ORDER BY status), '') FROM (
			SELECT status, count(*) AS n FROM orders GROUP BY 1) x`},
		{"refunds", `SELECT coalesce(string_agg(k || '=' || n, ' ' ORDER BY k), '') FROM (
			SELECT r.destination || '/' || r.status || CASE WHEN p.invoice_id IS NOT NULL THEN '/renewal' ELSE '' END AS k, count(*) AS n
			FROM refunds r JOIN payments p ON p.id = r.payment_id GROUP BY 1) x`},
	} {
		var s string
		if err := c.Pool.QueryRow(ctx, q.sql).Scan(&s); err != nil {
			s = "? (" + err.Error() + ")"
		}
		fmt.Fprintf(&b, "%s: %s\n", q.name, s)
	}
	return strings.TrimRight(b.String(), "\n")
}

var ids = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// requestFailures groups the nodes' "request failed" log lines (the cause
// of every Internal and Unavailable answer, which the client sees only as
// "internal error" or "database unavailable, retry") by procedure and
// cause, ids blanked, most frequent first.
func requestFailures(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	counts := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			line := s.Bytes()
			if !strings.Contains(string(line), `"request failed"`) {
				continue
			}
			var rec map[string]any
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			proc, _ := rec["procedure"].(string)
			if proc == "" {
				proc, _ = rec["rpc.method"].(string)
			}
			cause, _ := rec["err"].(string)
			cause = strings.ReplaceAll(ids.ReplaceAllString(cause, "…"), "\n", " | ")
			counts[filepath.Base(proc)+": "+cause]++
		}
		f.Close()
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%5d × %s", counts[k], k))
	}
	return out
}
