package architecture_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A test's t may stop the test (FailNow, hence Fatal, Skip and every
// require.*) only from the goroutine running the test: FailNow is a
// runtime.Goexit, and it ends the goroutine it runs in. Run anywhere else
// (the condition of require.Eventually or Never, which testify runs in a
// goroutine of its own; a goroutine the test starts; an HTTP handler of a
// test server) it ends that goroutine, not the test: Eventually then waits
// out its timeout and says "Condition never satisfied", or a goroutine's
// result never arrives, and the reason scrolls past in the log. The guard
// below reads every test file (and the test-only packages' helpers) with
// go/ast and fails on a function run in another goroutine that stops one
// of the tests in scope, directly or through a helper it hands t to.
//
// Without types, it knows a test by its parameter's type (*testing.T, B,
// F, testing.TB, require.TestingT, testkit.T), a helper by its name (a
// function of the package or of a module package the file imports; a
// method by its name alone), and a local closure by the name it is
// assigned to. A t kept in a struct, or a helper called through an
// interface or a function value, goes unseen.

const testifyRequire = "github.com/stretchr/testify/require"

// stopsTest are the methods of testing.T (B, F, TB) that end the goroutine.
var stopsTest = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

// goroutineRunners run their function argument in a goroutine of their
// own: testify's polling assertions (condition: argument 1), time.AfterFunc
// (argument 1), a WaitGroup's or an errgroup's Go and a benchmark's
// RunParallel (argument 0).
var goroutineRunners = map[string]int{
	"Eventually": 1, "Eventuallyf": 1, "EventuallyWithT": 1, "EventuallyWithTf": 1, "Never": 1, "Neverf": 1,
	"AfterFunc": 1, "Go": 0, "RunParallel": 0,
}

// testFile is a parsed file that may hold tests or test helpers.
type testFile struct {
	dir     string // its package's directory, from the module's root
	fset    *token.FileSet
	ast     *ast.File
	imports map[string]string // local name → import path
}

// helper is a function or method whose parameters may include a test's t.
type helper struct {
	file *testFile
	decl *ast.FuncDecl
	// params are its parameters' names by position: whatever its type
	// says, a parameter it is handed a test's t for is a test there.
	params []string
}

// goroutineGuard finds the calls that stop a test from another goroutine.
type goroutineGuard struct {
	files []*testFile
	// funcs are the package-level functions by "dir.Name", methods by
	// "dir.(method)Name"; a directory's test packages (p and p_test) share
	// one name space, which is close enough for helpers.
	funcs map[string][]*helper
	// stopsBy caches how a helper's parameter stops its test (a zero
	// stop when it does not; a missing entry is not decided yet).
	stopsBy map[*helper]map[int]stop
	// deciding marks the helpers on the stack (recursion: not stopping).
	deciding map[*helper]bool
	found    []string
}

// testingType says whether a parameter's type is a test's t.
func testingType(f *testFile, typ ast.Expr) bool {
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	sel, ok := typ.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	switch f.imports[pkg.Name] {
	case "testing":
		return sel.Sel.Name == "T" || sel.Sel.Name == "B" || sel.Sel.Name == "F" || sel.Sel.Name == "TB"
	case testifyRequire:
		return sel.Sel.Name == "TestingT"
	case module + "internal/testkit":
		return sel.Sel.Name == "T"
	}
	return false
}

// paramNames lists a function type's parameters by position, with "" for
// those that are not a test's t (or are unnamed); all lists every name.
func paramNames(f *testFile, ft *ast.FuncType) (tests []string, all map[string]bool) {
	all = map[string]bool{}
	for _, field := range ft.Params.List {
		isT := testingType(f, field.Type)
		if len(field.Names) == 0 {
			tests = append(tests, "")
			continue
		}
		for _, n := range field.Names {
			all[n.Name] = true
			if isT {
				tests = append(tests, n.Name)
			} else {
				tests = append(tests, "")
			}
		}
	}
	return tests, all
}

func newGoroutineGuard() *goroutineGuard {
	return &goroutineGuard{funcs: map[string][]*helper{}, stopsBy: map[*helper]map[int]stop{}, deciding: map[*helper]bool{}}
}

// loadModule adds the module's test files and the Go files of the
// test-only packages: every file that imports testing or testify.
func (g *goroutineGuard) loadModule(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, file)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".git", rel == "admin-ui", rel == "gen", rel == ".data", rel == "third_party",
				rel == "internal/store/dbsqlc", d.Name() == "testdata", d.Name() == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte(`"testing"`)) && !bytes.Contains(src, []byte(`"github.com/stretchr/testify/`)) {
			return nil
		}
		return g.add(rel, src)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// add parses one file (rel, from the module's root) and indexes its
// functions.
func (g *goroutineGuard) add(rel string, src []byte) error {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	f := &testFile{dir: path.Dir(rel), fset: fset, ast: file, imports: map[string]string{}}
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		f.imports[name] = p
	}
	g.files = append(g.files, f)
	for _, d := range file.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		var params []string
		for _, field := range fn.Type.Params.List {
			for _, n := range field.Names {
				params = append(params, n.Name)
			}
			if len(field.Names) == 0 {
				params = append(params, "_")
			}
		}
		key := f.dir + "." + fn.Name.Name
		if fn.Recv != nil {
			key = f.dir + ".(method)" + fn.Name.Name
		}
		g.funcs[key] = append(g.funcs[key], &helper{file: f, decl: fn, params: params})
	}
	return nil
}

// findings checks every function of every file added, and lists the
// calls that stop a test from another goroutine, sorted.
func (g *goroutineGuard) findings() []string {
	g.found = nil
	for _, f := range g.files {
		for _, d := range f.ast.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				g.check(f, fn)
			}
		}
	}
	sort.Strings(g.found)
	return g.found
}

// at names a position as path:line.
func at(f *testFile, pos token.Pos) string {
	p := f.fset.Position(pos)
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

// callees are the helpers a call may reach: a function of the file's
// directory or of a package of the module it imports, or any method of
// that name in those directories (without types, a method is known by its
// name).
func (g *goroutineGuard) callees(f *testFile, call *ast.CallExpr) []*helper {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return g.funcs[f.dir+"."+fun.Name]
	case *ast.SelectorExpr:
		if pkg, ok := fun.X.(*ast.Ident); ok {
			if imp, ok := f.imports[pkg.Name]; ok {
				return g.funcs[strings.TrimPrefix(imp, module)+"."+fun.Sel.Name]
			}
		}
		found := g.funcs[f.dir+".(method)"+fun.Sel.Name]
		for _, imp := range f.imports {
			if strings.HasPrefix(imp, module) {
				found = append(found, g.funcs[strings.TrimPrefix(imp, module)+".(method)"+fun.Sel.Name]...)
			}
		}
		return found
	}
	return nil
}

// scope is what a body is read with: the names that are a test's t, and
// the file's local closures (name := func…), which a call runs in place.
type scope struct {
	file     *testFile
	tests    map[string]bool
	closures map[string]*ast.FuncLit
	visiting map[*ast.FuncLit]bool
}

func (s scope) with(tests map[string]bool) scope {
	s.tests = tests
	return s
}

// without is the scope inside a literal: the tests its parameters do not
// shadow.
func (s scope) without(lit *ast.FuncLit) scope {
	_, own := paramNames(s.file, lit.Type)
	inner := map[string]bool{}
	for name := range s.tests {
		if !own[name] {
			inner[name] = true
		}
	}
	return s.with(inner)
}

// testArg is the test name a call passes as argument i ("" if none).
func (s scope) testArg(call *ast.CallExpr, i int) string {
	if i >= len(call.Args) {
		return ""
	}
	if id, ok := call.Args[i].(*ast.Ident); ok && s.tests[id.Name] {
		return id.Name
	}
	return ""
}

// stop is a call that stops a test: where it is, and what it calls,
// down to the call that stops ("count(t, …)", ", which calls
// require.NoError(t, …) at x_test.go:12").
type stop struct{ at, call, then string }

// through is the stop of a call that stops its test by calling inner.
func through(at, call string, inner stop) stop {
	return stop{at, call, ", which calls " + inner.call + " at " + inner.at + inner.then}
}

// stopsIn finds the calls in body that stop one of s.tests. A literal
// that runs in a goroutine of its own is left to its own check; any other
// literal may run here.
func (g *goroutineGuard) stopsIn(body ast.Node, s scope) []stop {
	var found []stop
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			return false
		case *ast.FuncLit:
			if n == body {
				return true
			}
			if !isHandler(s.file, n) {
				found = append(found, g.stopsIn(n.Body, s.without(n))...)
			}
			return false
		case *ast.CallExpr:
			if runner := runnerArg(s.file, n); runner >= 0 {
				// Its function is checked as a goroutine; the other
				// arguments (and a call that makes the function) run here.
				for i, a := range n.Args {
					if _, ok := a.(*ast.FuncLit); i == runner && ok {
						continue
					}
					if _, ok := a.(*ast.Ident); i == runner && ok {
						continue
					}
					found = append(found, g.stopsIn(a, s)...)
				}
				if st, ok := g.stopsCall(n, s); ok {
					found = append(found, st)
				}
				return false
			}
			if st, ok := g.stopsCall(n, s); ok {
				found = append(found, st)
			}
		}
		return true
	})
	return found
}

// stopsCall says whether one call stops one of s.tests, and how.
func (g *goroutineGuard) stopsCall(call *ast.CallExpr, s scope) (stop, bool) {
	name, where := callName(call.Fun), at(s.file, call.Pos())
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok {
			if s.file.imports[x.Name] == testifyRequire && s.testArg(call, 0) != "" {
				return stop{where, fmt.Sprintf("%s(%s, …)", name, s.testArg(call, 0)), ""}, true
			}
			if s.tests[x.Name] && stopsTest[sel.Sel.Name] {
				return stop{where, name, ""}, true
			}
		}
	}
	if id, ok := call.Fun.(*ast.Ident); ok {
		if lit := s.closures[id.Name]; lit != nil {
			if s.visiting[lit] {
				return stop{}, false
			}
			s.visiting[lit] = true
			defer delete(s.visiting, lit)
			params, _ := paramNames(s.file, lit.Type)
			inner := s.without(lit).tests
			for i, p := range params {
				if p != "" && s.testArg(call, i) != "" {
					inner[p] = true
				}
			}
			if why := g.stopsIn(lit.Body, s.with(inner)); len(why) > 0 {
				return through(where, name+"(…)", why[0]), true
			}
			return stop{}, false
		}
	}
	for _, h := range g.callees(s.file, call) {
		for i, p := range h.params {
			if p == "_" || s.testArg(call, i) == "" {
				continue
			}
			if why, ok := g.stops(h, i); ok {
				return through(where, fmt.Sprintf("%s(%s, …)", name, s.testArg(call, i)), why), true
			}
		}
	}
	return stop{}, false
}

// stops says whether a helper may stop the test passed as its parameter
// i, and how; a helper on the stack (recursion) is taken not to.
func (g *goroutineGuard) stops(h *helper, i int) (stop, bool) {
	if why, ok := g.stopsBy[h][i]; ok {
		return why, why.at != ""
	}
	if g.deciding[h] {
		return stop{}, false
	}
	g.deciding[h] = true
	defer delete(g.deciding, h)
	why := g.stopsIn(h.decl.Body, g.scopeOf(h.file, h.decl.Body, map[string]bool{h.params[i]: true}))
	if g.stopsBy[h] == nil {
		g.stopsBy[h] = map[int]stop{}
	}
	g.stopsBy[h][i] = stop{}
	if len(why) > 0 {
		g.stopsBy[h][i] = why[0]
	}
	return g.stopsBy[h][i], len(why) > 0
}

// scopeOf is a function body's scope: its local closures, and tests.
func (g *goroutineGuard) scopeOf(f *testFile, body *ast.BlockStmt, tests map[string]bool) scope {
	s := scope{file: f, tests: tests, closures: map[string]*ast.FuncLit{}, visiting: map[*ast.FuncLit]bool{}}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if lit, ok := rhs.(*ast.FuncLit); ok && i < len(n.Lhs) {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						s.closures[id.Name] = lit
					}
				}
			}
		case *ast.ValueSpec:
			for i, v := range n.Values {
				if lit, ok := v.(*ast.FuncLit); ok && i < len(n.Names) {
					s.closures[n.Names[i].Name] = lit
				}
			}
		}
		return true
	})
	return s
}

// runnerArg is the argument a call runs in a goroutine of its own (-1 if
// none): testify's polling assertions, AfterFunc, Go, RunParallel.
func runnerArg(f *testFile, call *ast.CallExpr) int {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return -1
	}
	i, ok := goroutineRunners[sel.Sel.Name]
	if !ok || i >= len(call.Args) {
		return -1
	}
	if x, ok := sel.X.(*ast.Ident); ok {
		switch imp := f.imports[x.Name]; {
		case strings.HasPrefix(imp, "github.com/stretchr/testify/"), imp == "time" && sel.Sel.Name == "AfterFunc":
			return i
		case imp != "":
			return -1 // another package's function of that name
		}
	}
	switch sel.Sel.Name {
	case "Go", "RunParallel":
		return i
	}
	return -1
}

// callName prints a call's function: "require.NoError", "b.call".
func callName(fun ast.Expr) string { return types.ExprString(fun) }

// check walks one function with the tests in scope, and checks each
// literal it runs in another goroutine.
func (g *goroutineGuard) check(f *testFile, decl *ast.FuncDecl) {
	params, _ := paramNames(f, decl.Type)
	tests := map[string]bool{}
	for _, p := range params {
		if p != "" {
			tests[p] = true
		}
	}
	g.walk(decl.Body, g.scopeOf(f, decl.Body, tests))
}

// walk reads body with the tests of s in scope (a literal's own test
// parameters, as t.Run's, join it inside), and checks each function that
// runs in another goroutine.
func (g *goroutineGuard) walk(body ast.Node, s scope) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			if n == body {
				return true
			}
			if isHandler(s.file, n) {
				g.checkGoroutine(n.Pos(), nil, n, "an HTTP handler", s)
			}
			params, _ := paramNames(s.file, n.Type)
			inner := s.without(n).tests
			for _, p := range params {
				if p != "" {
					inner[p] = true
				}
			}
			g.walk(n, s.with(inner))
			return false
		case *ast.GoStmt:
			g.checkGoroutine(n.Pos(), n.Call, n.Call.Fun, "a go statement's function", s)
		case *ast.CallExpr:
			if i := runnerArg(s.file, n); i >= 0 {
				g.checkGoroutine(n.Pos(), n, n.Args[i], "the function given to "+callName(n.Fun), s)
			}
		}
		return true
	})
}

// checkGoroutine checks fun, which runs in another goroutine (what, at
// pos): a go statement's function or a runner's argument (call the go
// statement's call or the runner's), or an HTTP handler (call nil).
func (g *goroutineGuard) checkGoroutine(pos token.Pos, call *ast.CallExpr, fun ast.Expr, what string, s scope) {
	var stops []stop
	if id, ok := fun.(*ast.Ident); ok && s.closures[id.Name] != nil {
		fun = s.closures[id.Name]
	}
	switch lit := fun.(type) {
	case *ast.FuncLit:
		inner := s.without(lit).tests
		if call != nil && fun == call.Fun { // go func(t *testing.T) {…}(t)
			params, _ := paramNames(s.file, lit.Type)
			for i, p := range params {
				if p != "" && s.testArg(call, i) != "" {
					inner[p] = true
				}
			}
		}
		stops = g.stopsIn(lit.Body, s.with(inner))
	default:
		if call != nil && fun == call.Fun { // go helper(t)
			if st, ok := g.stopsCall(call, s); ok {
				stops = append(stops, st)
			}
		}
	}
	line := s.file.fset.Position(pos).Line
	for _, st := range stops {
		g.found = append(g.found, fmt.Sprintf("%s: %s%s, inside %s at line %d, which runs in a goroutine of its own", st.at, st.call, st.then, what, line))
	}
}

// isHandler says whether a literal is an HTTP handler: its first
// parameter an http.ResponseWriter.
func isHandler(f *testFile, lit *ast.FuncLit) bool {
	params := lit.Type.Params.List
	if len(params) == 0 {
		return false
	}
	sel, ok := params[0].Type.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && f.imports[x.Name] == "net/http" && sel.Sel.Name == "ResponseWriter"
}

// Every call that can stop a test (require.*, t.Fatal, t.FailNow, t.Skip,
// or a helper that does one of them on the t it is given) runs in the
// test's own goroutine: never in the function given to Eventually or
// Never, nor in a goroutine the test starts, nor in an HTTP handler.
func TestNoTestIsStoppedFromAnotherGoroutine(t *testing.T) {
	t.Parallel()
	g := newGoroutineGuard()
	g.loadModule(t, "../..")
	found := g.findings()
	for _, s := range found {
		t.Errorf("%s", s)
	}
	if len(found) > 0 {
		t.Errorf("%d calls stop a test from a goroutine that is not the test's: FailNow ends that goroutine, not the test, "+
			"which then times out or hangs. Report to the *assert.CollectT of require.EventuallyWithT (a helper takes a testkit.T), "+
			"assert instead of require where the test waits for the goroutine, "+
			"or return the error (or send it on a channel) and require on it in the test's goroutine.", len(found))
	}
}

// guardCases is a test package for the guard itself: each line marked
// "stops" is a call it must name, and nothing else.
const guardCases = `package demo

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testkit"
)

func count(t testkit.T) int {
	t.Helper()
	require.NoError(t, nil)
	return 1
}

func counted(t *testing.T) int { return count(t) }

func quiet(t *testing.T) int { t.Helper(); return 1 }

type env struct{}

func (env) get(t *testing.T) int { t.Fatalf("no"); return 0 }

func TestCases(t *testing.T) {
	e := env{}
	require.Eventually(t, func() bool {
		require.NoError(t, nil) // stops
		return count(t) == 1    // stops
	}, time.Second, time.Millisecond)
	assert.Never(t, func() bool { return counted(t) == 2 }, time.Second, time.Millisecond) // stops
	require.Eventually(t, func() bool { return e.get(t) == 1 }, time.Second, time.Millisecond) // stops
	local := func() int { t.FailNow(); return 0 }
	require.Eventually(t, func() bool { return local() == 1 }, time.Second, time.Millisecond) // stops
	go func() { t.Fatal("x") }() // stops
	go counted(t) // stops
	var wg sync.WaitGroup
	wg.Go(func() { require.True(t, false) }) // stops
	_ = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { require.NoError(t, nil) }) // stops
	time.AfterFunc(time.Second, func() { t.SkipNow() }) // stops

	// Not stopping the test from elsewhere:
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, nil)
		assert.Equal(c, 1, count(c))
	}, time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return quiet(t) == 1 }, time.Second, time.Millisecond)
	go func() { assert.NoError(t, nil) }()
	t.Run("sub", func(t *testing.T) { require.NoError(t, nil) })
	go func() {
		t.Run("sub", func(t *testing.T) { require.NoError(t, nil) })
	}()
	require.NoError(t, nil)
	wg.Wait()
}
`

// The guard names each way a test can be stopped from another goroutine
// (directly, through a helper of the package or of testkit, a method, a
// local closure; in Eventually, Never, a go statement, a WaitGroup's Go,
// an HTTP handler, AfterFunc) and nothing that is not one.
func TestGoroutineGuardFindsEachWayToStopATest(t *testing.T) {
	t.Parallel()
	g := newGoroutineGuard()
	require.NoError(t, g.add("internal/demo/demo_test.go", []byte(guardCases)))
	var want []string
	for i, line := range strings.Split(guardCases, "\n") {
		if strings.HasSuffix(line, "// stops") {
			want = append(want, fmt.Sprintf("internal/demo/demo_test.go:%d", i+1))
		}
	}
	var got []string
	for _, f := range g.findings() {
		got = append(got, f[:strings.Index(f, ": ")])
		t.Log(f)
	}
	sort.Strings(want)
	sort.Strings(got)
	require.Equal(t, want, got)
}
