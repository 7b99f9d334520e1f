package architecture_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/rustbill/paymentd/"

// parts are the layers of docs/architecture.md ("The layers"), each a list
// of path prefixes under the module; the longest prefix decides.
var parts = map[string][]string{
	"Entry":     {"cmd/", "bench/"},
	"App":       {"internal/app/"},
	"Transport": {"internal/payment/paymentrpc/", "internal/server/", "internal/export/", "internal/integration/"},
	"Domain": {"internal/payment/", "internal/order/", "internal/balance/", "internal/fulfillment/", "internal/identity/",
		"internal/gateway/", "internal/event/", "internal/notify/"},
	"Cluster": {"internal/cluster/", "internal/migrate/", "internal/ledger/", "internal/retention/", "internal/replica/"},
	"Store":   {"internal/store/"},
	"Plugins": {"internal/plugin/", "internal/outbound/"},
	"Leaves": {"internal/money/", "internal/audit/", "internal/paging/", "internal/text/", "internal/apperr/",
		"internal/startstop/", "internal/testsignal/", "internal/configschema/", "internal/rpcanswer/", "internal/rpc/"},
	"Config": {"internal/config/"},
	"TestOnly": {"internal/testdb/", "internal/testfixture/", "internal/plugintest/", "internal/clustertest/",
		"internal/testredis/", "internal/testkit/", "internal/fakes/"},
}

// never are the arrows the map forbids, with why.
var never = []struct{ from, to, why string }{
	{"Store", "Domain", "the store knows no rule"},
	{"Plugins", "Store", "a plugin never touches the database"},
	{"Plugins", "Domain", "the sandbox knows no money rule"},
	{"Domain", "Transport", "rules do not know how they are called"},
	{"Domain", "App", "rules do not know how they are wired"},
	{"Leaves", "Domain", "leaves stay leaves"},
	{"Domain", "TestOnly", "production code never links a fake or a test harness"},
	{"Domain", "Config", "a package owns its options; the configuration maps onto them"},
	{"Store", "Config", "a package owns its options; the configuration maps onto them"},
	{"Plugins", "Config", "a package owns its options; the configuration maps onto them"},
	{"Leaves", "Config", "a package owns its options; the configuration maps onto them"},
	{"Transport", "Config", "a package owns its options; the configuration maps onto them"},
	{"Config", "App", "the configuration does not know how it is wired"},
	{"Config", "TestOnly", "production code never links a fake or a test harness"},
	{"Transport", "TestOnly", "production code never links a fake or a test harness"},
	{"App", "TestOnly", "production code never links a fake or a test harness"},
}

// partOf is the part of a package path under the module ("" for none).
func partOf(path string) string {
	best, part := "", ""
	for name, prefixes := range parts {
		for _, p := range prefixes {
			if (strings.HasPrefix(path+"/", p)) && len(p) > len(best) {
				best, part = p, name
			}
		}
	}
	return part
}

// imports lists the module's packages and the module packages each one's
// production files import (test files are left out: a test may use a fake).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...")
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v: %s", err, errb.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		from := strings.TrimPrefix(p.ImportPath, module)
		graph[from] = nil
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				graph[from] = append(graph[from], strings.TrimPrefix(imp, module))
			}
		}
	}
	return graph
}

// No import runs where the map says never, straight or through packages
// of no part; and the map names only packages that exist.
func TestImportsKeepTheLayersOfTheArchitectureDoc(t *testing.T) {
	t.Parallel()
	graph := imports(t)
	forbidden := map[[2]string]string{}
	for _, n := range never {
		forbidden[[2]string{n.from, n.to}] = n.why
	}
	var broken []string
	for pkg := range graph {
		from := partOf(pkg)
		if from == "" {
			continue
		}
		// Walk the imports, through packages of no part, to the first
		// package on a part along each path.
		seen := map[string]bool{}
		var walk func(p string, via []string)
		walk = func(p string, via []string) {
			for _, imp := range graph[p] {
				if seen[imp] {
					continue
				}
				seen[imp] = true
				to := partOf(imp)
				if to == "" {
					walk(imp, append(via, imp))
					continue
				}
				if why, bad := forbidden[[2]string{from, to}]; bad {
					broken = append(broken, fmt.Sprintf("%s (%s) imports %s (%s) via %v: never %s -> %s, %s",
						pkg, from, imp, to, via, from, to, why))
				}
			}
		}
		walk(pkg, nil)
	}
	sort.Strings(broken)
	if len(broken) > 0 {
		t.Fatalf("imports that run against docs/architecture.md's layers:\n%s", strings.Join(broken, "\n"))
	}
	for name, prefixes := range parts {
		for _, p := range prefixes {
			found := false
			for pkg := range graph {
				if strings.HasPrefix(pkg+"/", p) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("part %s names %s, where no package is", name, p)
			}
		}
	}
}

// partOf takes the longest prefix, and a folder that only begins like a
// part's is on no part.
func TestPartOfTakesTheLongestPrefix(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"internal/payment/paymentrpc": "Transport",
		"internal/payment":            "Domain",
		"internal/payment/reconcile":  "Domain",
		"internal/store/dbsqlc":       "Store",
		"internal/auth":               "",
		"cmd/paymentd":                "Entry",
		"internal/paging":             "Leaves",
		"internal/pagingx":            "",
	} {
		if got := partOf(path); got != want {
			t.Errorf("partOf(%s) = %q, want %q", path, got, want)
		}
	}
}
