package architecture_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// storeFunc is a hand-written function of internal/store, as storeFuncs
// reads it.
type storeFunc struct {
	name, file string
	lines      int
	// queries counts the calls of generated queries in its body.
	queries int
	// endsInMapError: its last statement returns MapError(…) last.
	endsInMapError bool
	// passThrough: it calls one generated query and returns what the
	// query returned, its error mapped or not, and does nothing else.
	passThrough bool
}

// generatedQueries are the method names of sqlc's *dbsqlc.Queries.
func generatedQueries(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../store/dbsqlc/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("internal/store/dbsqlc: %v (%d files)", err, len(files))
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.Name != "WithTx" {
				names[fn.Name.Name] = true
			}
		}
	}
	return names
}

// storeFuncs reads the functions and methods of internal/store's
// production files (sqlc's output and tests left out).
func storeFuncs(t *testing.T) []storeFunc {
	t.Helper()
	queries := generatedQueries(t)
	files, err := filepath.Glob("../store/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("internal/store: %v (%d files)", err, len(files))
	}
	var funcs []storeFunc
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			sf := storeFunc{
				name:  fn.Name.Name,
				file:  filepath.Base(f),
				lines: fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1,
			}
			var call *ast.CallExpr
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok && isQueryCall(c, queries) {
					sf.queries++
					call = c
				}
				return true
			})
			sf.endsInMapError = endsInMapError(fn.Body)
			sf.passThrough = sf.queries == 1 && onlyReturns(fn.Body, call) && !computes(call)
			funcs = append(funcs, sf)
		}
	}
	return funcs
}

// isQueryCall reports whether c calls a generated query: a method of that
// name on dbsqlc.New(…), Q(…) or a variable (q).
func isQueryCall(c *ast.CallExpr, queries map[string]bool) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || !queries[sel.Sel.Name] {
		return false
	}
	switch x := sel.X.(type) {
	case *ast.Ident:
		return x.Name != "dbsqlc" && x.Name != "store"
	case *ast.CallExpr:
		switch f := x.Fun.(type) {
		case *ast.SelectorExpr:
			return f.Sel.Name == "New"
		case *ast.Ident:
			return f.Name == "Q"
		}
	}
	return false
}

// basicTypes are the conversions an argument may make and still be
// handed on: int32(limit) is the query's type, not a computation.
var basicTypes = map[string]bool{
	"int": true, "int32": true, "int64": true, "string": true, "bool": true, "float64": true, "byte": true,
}

// computes reports whether one of call's arguments calls a function (other
// than a conversion to a basic type): a default, an encoding — a rule of
// the function's own, not a query handed on; or whether the executor it
// runs on is made (later(db): a statement that waits in a pipelined
// transaction).
func computes(call *ast.CallExpr) bool {
	if recv, ok := call.Fun.(*ast.SelectorExpr).X.(*ast.CallExpr); ok && len(recv.Args) == 1 {
		if _, ok := recv.Args[0].(*ast.Ident); !ok {
			return true
		}
	}
	found := false
	for _, a := range call.Args[1:] {
		ast.Inspect(a, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); !ok || !basicTypes[id.Name] {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

func isMapError(e ast.Expr) (*ast.CallExpr, bool) {
	c, ok := e.(*ast.CallExpr)
	if !ok || len(c.Args) != 1 {
		return nil, false
	}
	id, ok := c.Fun.(*ast.Ident)
	return c, ok && id.Name == "MapError"
}

func endsInMapError(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	ret, ok := body.List[len(body.List)-1].(*ast.ReturnStmt)
	if !ok || len(ret.Results) == 0 {
		return false
	}
	_, ok = isMapError(ret.Results[len(ret.Results)-1])
	return ok
}

// onlyReturns reports whether body is call's answer handed back as it
// came, the error mapped or not: `return call`, `return MapError(call)`,
// or `v, err := call` then `return v, MapError(err)` (or `return v, err`).
func onlyReturns(body *ast.BlockStmt, call *ast.CallExpr) bool {
	unwrap := func(e ast.Expr) ast.Expr {
		if m, ok := isMapError(e); ok {
			return m.Args[0]
		}
		return e
	}
	switch len(body.List) {
	case 1:
		ret, ok := body.List[0].(*ast.ReturnStmt)
		return ok && len(ret.Results) == 1 && unwrap(ret.Results[0]) == ast.Expr(call)
	case 2:
		as, ok := body.List[0].(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 || as.Rhs[0] != ast.Expr(call) {
			return false
		}
		ret, ok := body.List[1].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != len(as.Lhs) {
			return false
		}
		for i, r := range ret.Results {
			got, ok1 := unwrap(r).(*ast.Ident)
			want, ok2 := as.Lhs[i].(*ast.Ident)
			if !ok1 || !ok2 || got.Name != want.Name {
				return false
			}
		}
		return true
	}
	return false
}

// A query the store only hands on is called through store.Q, which maps
// its errors, not wrapped in a function of its own: a hand-written store
// function converts types, joins queries, fills a column's default or
// refuses arguments the query cannot take (docs/decisions.md, "the store's
// generated queries"). The test logs the figures of the hand-written store
// (go test -v -run TestTheStoreWrapsNoQueryItOnlyHandsOn ./internal/architecture/).
func TestTheStoreWrapsNoQueryItOnlyHandsOn(t *testing.T) {
	t.Parallel()
	funcs := storeFuncs(t)
	var lines, mapEnd, pass, passLines, oneQuery int
	var passNames []string
	for _, f := range funcs {
		lines += f.lines
		if f.endsInMapError {
			mapEnd++
		}
		if f.queries == 1 {
			oneQuery++
		}
		if f.passThrough {
			pass++
			passLines += f.lines
			passNames = append(passNames, f.file+": "+f.name)
		}
	}
	sort.Strings(passNames)
	t.Logf("functions %d (%d lines); ending in MapError %d; calling one query %d; pass-through %d (%d lines)",
		len(funcs), lines, mapEnd, oneQuery, pass, passLines)
	for _, n := range passNames {
		t.Errorf("internal/store/%s only hands a generated query on: delete it and call the query through store.Q(db)", n)
	}
}

// Only internal/store imports sqlc's package, in its code and its tests:
// everything above calls the store's functions or store.Q, whose row and
// parameter types the store re-exports (docs/architecture.md, "The layers").
func TestOnlyTheStoreImportsDbsqlc(t *testing.T) {
	t.Parallel()
	const dbsqlc = module + "internal/store/dbsqlc"
	for _, p := range listPackages(t) {
		if strings.HasPrefix(p.ImportPath+"/", module+"internal/store/") {
			continue
		}
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if imp == dbsqlc {
				t.Errorf("%s imports internal/store/dbsqlc: call store.Q(db) and use the store's aliases", p.ImportPath)
			}
		}
	}
}
