package architecture_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/rustbill/paymentd/"

// parts are the layers of docs/architecture.md ("The layers"), each a list
// of path prefixes under the module; the longest prefix decides.
var parts = map[string][]string{
	"Entry": {"cmd/", "bench/"},
	"App":   {"internal/app/"},
	"Transport": {"internal/server/", "internal/rpc/", "internal/export/", "internal/integration/",
		"internal/payment/paymentrpc/", "internal/order/orderrpc/", "internal/gateway/gatewayrpc/",
		"internal/identity/identityrpc/", "internal/event/eventrpc/"},
	"Domain": {"internal/payment/", "internal/order/", "internal/balance/", "internal/fulfillment/", "internal/identity/",
		"internal/gateway/", "internal/event/", "internal/notify/"},
	"Cluster": {"internal/cluster/", "internal/migrate/", "internal/ledger/", "internal/retention/", "internal/replica/"},
	"Store":   {"internal/store/"},
	"Plugins": {"internal/plugin/", "internal/outbound/"},
	"Leaves": {"internal/money/", "internal/audit/", "internal/paging/", "internal/text/", "internal/apperr/",
		"internal/startstop/", "internal/testsignal/", "internal/configschema/", "internal/rpcanswer/", "internal/timerange/"},
	"Config": {"internal/config/"},
	"TestOnly": {"internal/testdb/", "internal/testfixture/", "internal/plugintest/", "internal/clustertest/",
		"internal/testredis/", "internal/testkit/", "internal/fakes/", "internal/ordertest/", "internal/gatewaytest/",
		"internal/rpctest/"},
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

// wire are the import paths of the wire, each with what lies under it:
// Connect, the generated messages and services, protovalidate, and the
// protobuf runtime and well-known types. A Domain package's production files
// import none of them, so a handler cannot hide inside the domain: it needs
// them, and lives in the domain's Transport package (<domain>rpc) instead.
var wire = []string{
	"connectrpc.com",
	module + "gen",
	"buf.build/go/protovalidate",
	"buf.build/gen/go/bufbuild/protovalidate",
	"google.golang.org/protobuf",
	"google.golang.org/genproto",
}

// onTheWire reports whether import path imp is one of wire's or lies
// under one.
func onTheWire(imp string) bool {
	for _, w := range wire {
		if imp == w || strings.HasPrefix(imp, w+"/") {
			return true
		}
	}
	return false
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
	graph := map[string][]string{}
	for pkg, imps := range allImports(t) {
		graph[pkg] = nil
		for _, imp := range imps {
			if strings.HasPrefix(imp, module) {
				graph[pkg] = append(graph[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return graph
}

// allImports lists the module's packages (under the module, without its
// path) and every package each one's production files import, whole paths.
func allImports(t *testing.T) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	for _, p := range listPackages(t) {
		graph[strings.TrimPrefix(p.ImportPath, module)] = p.Imports
	}
	return graph
}

// listedPackage is what go list says of one of the module's packages.
type listedPackage struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// listPackages is go list's view of every package of the module.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"...")
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v: %s", err, errb.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
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

// No Domain package's production files import the wire (Connect, gen/,
// protovalidate, protobuf): the handlers and the wire forms live in
// Transport, each domain's in its <domain>rpc package. Only direct imports
// count: a domain may use a helper of no part (auth) that speaks Connect
// for its own interceptor.
func TestNoDomainPackageImportsTheWire(t *testing.T) {
	t.Parallel()
	var broken []string
	domains := 0
	for pkg, imps := range allImports(t) {
		if partOf(pkg) != "Domain" {
			continue
		}
		domains++
		for _, imp := range imps {
			if onTheWire(imp) {
				broken = append(broken, fmt.Sprintf("%s (Domain) imports %s: never Domain -> the wire, its handler and wire forms belong in %s (Transport)",
					pkg, imp, rpcHome(pkg)))
			}
		}
	}
	sort.Strings(broken)
	if len(broken) > 0 {
		t.Fatalf("Domain packages that speak the wire, against docs/architecture.md's layers:\n%s", strings.Join(broken, "\n"))
	}
	if domains < 8 {
		t.Fatalf("only %d Domain packages found: the part's prefixes no longer name the domain", domains)
	}
}

// rpcHome is where the transport of Domain package pkg lives: the
// <domain>rpc package in its domain's folder (internal/order/orderrpc for
// internal/order and internal/order/renewal).
func rpcHome(pkg string) string {
	root := ""
	for _, p := range parts["Domain"] {
		if strings.HasPrefix(pkg+"/", p) && len(p) > len(root) {
			root = p
		}
	}
	return root + path.Base(root) + "rpc"
}

// onTheWire takes a wire path and what lies under it, and nothing that
// merely begins like one.
func TestOnTheWireTakesWholePathElements(t *testing.T) {
	t.Parallel()
	for imp, want := range map[string]bool{
		"connectrpc.com/connect":                          true,
		"connectrpc.com/otelconnect":                      true,
		module + "gen/billing/order":                      true,
		module + "gen/billing/order/orderpbconnect":       true,
		"buf.build/go/protovalidate":                      true,
		"google.golang.org/protobuf/types/known/structpb": true,
		module + "generated":                              false,
		module + "internal/rpc":                           false,
		"github.com/google/uuid":                          false,
	} {
		if got := onTheWire(imp); got != want {
			t.Errorf("onTheWire(%s) = %v, want %v", imp, got, want)
		}
	}
}

// rpcHome names the domain's own <domain>rpc package, from any of the
// domain's packages.
func TestRPCHomeIsTheDomainsRPCPackage(t *testing.T) {
	t.Parallel()
	for pkg, want := range map[string]string{
		"internal/order":             "internal/order/orderrpc",
		"internal/order/renewal":     "internal/order/orderrpc",
		"internal/payment/reconcile": "internal/payment/paymentrpc",
		"internal/identity":          "internal/identity/identityrpc",
	} {
		if got := rpcHome(pkg); got != want {
			t.Errorf("rpcHome(%s) = %s, want %s", pkg, got, want)
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
		"internal/order/orderrpc":     "Transport",
		"internal/order":              "Domain",
		"internal/order/renewal":      "Domain",
		"internal/rpc":                "Transport",
		"internal/rpcanswer":          "Leaves",
		"internal/timerange":          "Leaves",
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
