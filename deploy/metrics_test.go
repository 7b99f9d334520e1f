package deploy_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// ruleFile is the shape of a Prometheus rule file; unknown keys fail the
// decode.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// scrapeLabels are the labels Prometheus adds to every series it scrapes.
var scrapeLabels = []string{"instance", "job"}

// prometheusOwn are the series Prometheus writes itself, not paymentd.
var prometheusOwn = map[string][]string{"up": nil}

// exportedFamilies starts a paymentd and returns every family its metrics
// registry describes (those of labelled counters that have not counted yet
// included), with their label names.
func exportedFamilies(t *testing.T) map[string][]string {
	t.Helper()
	s := startService(t, nil)
	ch := make(chan *prometheus.Desc)
	go func() {
		s.app.Metrics().Registry().Describe(ch)
		close(ch)
	}()
	re := regexp.MustCompile(`^Desc\{fqName: "([a-zA-Z_:][a-zA-Z0-9_:]*)", .*variableLabels: \{([^}]*)\}\}$`)
	out := map[string][]string{}
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		require.NotNil(t, m, "unreadable description %s", d)
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		out[m[1]] = labels
	}
	require.Contains(t, out, "paymentd_payment_captured_cents_total", "a counter that never counted is still described")
	return out
}

// documentedFamilies are the paymentd_* families of docs/operations.md's
// metrics table; go_* and process_* are documented as families by the
// sentence above it.
func documentedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	ops := readRepoFile(t, "docs/operations.md")
	require.True(t, strings.Contains(strings.Join(strings.Fields(ops), " "), "Go's `go_*` and the process's `process_*` families"),
		"docs/operations.md no longer says that Go's go_* and the process's process_* families are exposed")
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(paymentd_[a-z_]+)`").FindAllStringSubmatch(ops, -1) {
		out[m[1]] = true
	}
	require.NotEmpty(t, out)
	return out
}

// family resolves a series name to its family: histograms are read through
// their _bucket, _sum and _count series.
func family(exported map[string][]string, name string) (string, bool) {
	if _, ok := exported[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := exported[base]; ok {
				return base, true
			}
		}
	}
	return "", false
}

// checkExpr checks that every metric of expr is exported with the labels
// its matchers and groupings name, and documented, and returns the families
// and the labels a template may use on its result.
func checkExpr(t *testing.T, where, expr string, exported map[string][]string, documented map[string]bool) (families []string, resultLabels []string) {
	t.Helper()
	q, err := parsePromQL(expr)
	require.NoError(t, err, where)
	var all []string
	for _, sel := range q.selectors {
		if own, ok := prometheusOwn[sel.metric]; ok {
			for _, l := range sel.labels {
				require.Contains(t, append(slices.Clone(own), scrapeLabels...), l, "%s: %s has no label %s", where, sel.metric, l)
			}
			all = append(all, scrapeLabels...)
			continue
		}
		fam, ok := family(exported, sel.metric)
		require.True(t, ok, "%s: %s is not exported by paymentd", where, sel.metric)
		if strings.HasPrefix(fam, "paymentd_") {
			require.True(t, documented[fam], "%s: %s is not in the metrics table of docs/operations.md", where, fam)
		} else {
			require.True(t, strings.HasPrefix(fam, "go_") || strings.HasPrefix(fam, "process_"), "%s: %s is neither paymentd's nor Go's nor the process's", where, fam)
		}
		labels := append(slices.Clone(exported[fam]), scrapeLabels...)
		if fam != sel.metric && strings.HasSuffix(sel.metric, "_bucket") {
			labels = append(labels, "le")
		}
		for _, l := range sel.labels {
			require.Contains(t, labels, l, "%s: %s has no label %s", where, sel.metric, l)
		}
		all = append(all, labels...)
		families = append(families, fam)
	}
	for _, l := range q.grouping {
		require.Contains(t, all, l, "%s: no metric of the expression has the label %s it groups by", where, l)
	}
	if q.aggregates {
		return families, q.grouping
	}
	return families, all
}

// headingAnchors are the anchors of a Markdown file's headings as GitHub
// makes them.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`).FindAllStringSubmatch(md, -1) {
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")] = true
	}
	return out
}

// The alert rules read only metrics paymentd exports, with labels they
// have, all documented; every rule has a severity, a summary whose
// templates name labels its result keeps, and a runbook link to a heading
// of docs/runbooks.md; every runbook is linked; docs/operations.md points at
// the file instead of holding a copy.
func TestAlertRulesUseExportedDocumentedMetricsAndLinkToRunbooks(t *testing.T) {
	t.Parallel()
	exported := exportedFamilies(t)
	documented := documentedFamilies(t)
	anchors := headingAnchors(readRepoFile(t, "docs/runbooks.md"))

	var rules ruleFile
	dec := yaml.NewDecoder(strings.NewReader(readRepoFile(t, "deploy/prometheus/paymentd-alerts.yml")))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rules))
	require.NotEmpty(t, rules.Groups)

	seen := map[string]bool{}
	linked := map[string]bool{}
	for _, g := range rules.Groups {
		require.NotEmpty(t, g.Name)
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: a rule without a name (recording rules do not belong here)", g.Name)
			require.False(t, seen[r.Alert], "alert %s twice", r.Alert)
			seen[r.Alert] = true
			if r.For != "" {
				_, err := time.ParseDuration(r.For)
				require.NoError(t, err, "%s: for", r.Alert)
			}
			require.Contains(t, []string{"page", "ticket"}, r.Labels["severity"], "%s: severity", r.Alert)
			require.Len(t, r.Labels, 1, "%s: only severity among the labels", r.Alert)
			for key := range r.Annotations {
				require.Contains(t, []string{"summary", "description", "runbook_url"}, key, "%s: annotation", r.Alert)
			}
			require.NotEmpty(t, r.Annotations["summary"], "%s: summary", r.Alert)
			_, resultLabels := checkExpr(t, r.Alert, r.Expr, exported, documented)
			for _, m := range regexp.MustCompile(`\{\{ *\$labels\.([a-zA-Z_]+) *\}\}`).FindAllStringSubmatch(r.Annotations["summary"]+r.Annotations["description"], -1) {
				require.Contains(t, resultLabels, m[1], "%s: the summary names a label the expression's result does not have", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], "docs/runbooks.md#")
			require.True(t, ok, "%s: runbook_url must be docs/runbooks.md#<heading>, got %q", r.Alert, r.Annotations["runbook_url"])
			require.True(t, anchors[anchor], "%s: docs/runbooks.md has no heading #%s", r.Alert, anchor)
			linked[anchor] = true
		}
	}
	for _, must := range []string{"callbacks-failing", "a-breaker-open", "a-refund-outcome-unknown", "failed-events",
		"a-leader-lost", "captured-money-waiting", "the-database-busy"} {
		require.True(t, linked[must], "no alert links the runbook #%s", must)
	}
	for _, m := range regexp.MustCompile(`(?m)^## +(.+)$`).FindAllStringSubmatch(readRepoFile(t, "docs/runbooks.md"), -1) {
		a := strings.ReplaceAll(regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		require.True(t, linked[a], "the runbook %q is linked by no alert", m[1])
	}
	require.Contains(t, seen, "PaymentdMoneyCaptured")

	ops := readRepoFile(t, "docs/operations.md")
	require.True(t, strings.Contains(ops, "deploy/prometheus/paymentd-alerts.yml"), "docs/operations.md does not point at the rules")
	require.False(t, strings.Contains(ops, "- alert:"), "the rules live in deploy/prometheus/paymentd-alerts.yml, not in a copy in docs/operations.md")
}

// The dashboard reads only metrics paymentd exports, with labels they have,
// all documented, and shows every documented paymentd family.
func TestGrafanaDashboardUsesExportedDocumentedMetricsAndShowsEveryFamily(t *testing.T) {
	t.Parallel()
	exported := exportedFamilies(t)
	documented := documentedFamilies(t)

	raw := readRepoFile(t, "deploy/grafana/paymentd.json")
	type panel struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"` // rows
	}
	var dash struct {
		UID        string          `json:"uid"`
		Title      string          `json:"title"`
		Panels     []panel         `json:"panels"`
		Templating json.RawMessage `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	require.NoError(t, dec.Decode(&dash))
	require.Equal(t, "paymentd", dash.UID)
	require.Contains(t, string(dash.Templating), `"name": "datasource"`)
	require.NotEmpty(t, dash.Panels)

	shown := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		require.Empty(t, p.Panels, "no nested rows: every panel at the top")
		require.NotEmpty(t, p.Title)
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.Equal(t, "${datasource}", p.Datasource.UID, "%s: the dashboard's datasource variable", p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			fams, _ := checkExpr(t, p.Title+" "+tg.RefID, tg.Expr, exported, documented)
			for _, f := range fams {
				shown[f] = true
			}
		}
	}
	for f := range documented {
		require.True(t, shown[f], "the dashboard shows nothing of %s", f)
	}
}
