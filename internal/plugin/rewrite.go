package plugin

import "github.com/yuin/gopher-lua/ast"

// rewriteChunk replaces every concatenation `a .. b .. c` in the script with a
// call `(concat)(a, b, c)` of a hidden local, declared first and initialised
// from the chunk's first argument (state.load passes the state's guarded
// concatenation function). gopher-lua concatenates inside its VM with no hook,
// so without this `s = s .. s` doubles a string thirty times into a gigabyte
// in a few hundred instructions; through the call, the size is checked
// against the memory bound before the string is built.
func rewriteChunk(chunk []ast.Stmt) []ast.Stmt {
	rewriteStmts(chunk)
	decl := &ast.LocalAssignStmt{Names: []string{concatName}, Exprs: []ast.Expr{&ast.Comma3Expr{}}}
	if len(chunk) > 0 {
		decl.SetLine(chunk[0].Line())
		decl.SetLastLine(chunk[0].Line())
	}
	return append([]ast.Stmt{decl}, chunk...)
}

func rewriteStmts(stmts []ast.Stmt) {
	for _, st := range stmts {
		rewriteStmt(st)
	}
}

func rewriteStmt(st ast.Stmt) {
	switch s := st.(type) {
	case *ast.AssignStmt:
		rewriteExprs(s.Lhs)
		rewriteExprs(s.Rhs)
	case *ast.LocalAssignStmt:
		rewriteExprs(s.Exprs)
	case *ast.FuncCallStmt:
		s.Expr = rewriteExpr(s.Expr)
	case *ast.DoBlockStmt:
		rewriteStmts(s.Stmts)
	case *ast.WhileStmt:
		s.Condition = rewriteExpr(s.Condition)
		rewriteStmts(s.Stmts)
	case *ast.RepeatStmt:
		s.Condition = rewriteExpr(s.Condition)
		rewriteStmts(s.Stmts)
	case *ast.IfStmt:
		s.Condition = rewriteExpr(s.Condition)
		rewriteStmts(s.Then)
		rewriteStmts(s.Else)
	case *ast.NumberForStmt:
		s.Init = rewriteExpr(s.Init)
		s.Limit = rewriteExpr(s.Limit)
		s.Step = rewriteExpr(s.Step)
		rewriteStmts(s.Stmts)
	case *ast.GenericForStmt:
		rewriteExprs(s.Exprs)
		rewriteStmts(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name != nil {
			s.Name.Func = rewriteExpr(s.Name.Func)
			s.Name.Receiver = rewriteExpr(s.Name.Receiver)
		}
		if s.Func != nil {
			rewriteStmts(s.Func.Stmts)
		}
	case *ast.ReturnStmt:
		rewriteExprs(s.Exprs)
	}
}

func rewriteExprs(exprs []ast.Expr) {
	for i, e := range exprs {
		exprs[i] = rewriteExpr(e)
	}
}

func rewriteExpr(e ast.Expr) ast.Expr {
	switch x := e.(type) {
	case nil:
		return nil
	case *ast.StringConcatOpExpr:
		var args []ast.Expr
		args = flattenConcat(x, args)
		fn := &ast.IdentExpr{Value: concatName}
		fn.SetLine(x.Line())
		fn.SetLastLine(x.LastLine())
		// AdjustRet: the call stands for one value, like the operator.
		call := &ast.FuncCallExpr{Func: fn, Args: args, AdjustRet: true}
		call.SetLine(x.Line())
		call.SetLastLine(x.LastLine())
		return call
	case *ast.AttrGetExpr:
		x.Object = rewriteExpr(x.Object)
		x.Key = rewriteExpr(x.Key)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			f.Key = rewriteExpr(f.Key)
			f.Value = rewriteExpr(f.Value)
		}
	case *ast.FuncCallExpr:
		x.Func = rewriteExpr(x.Func)
		x.Receiver = rewriteExpr(x.Receiver)
		rewriteExprs(x.Args)
	case *ast.LogicalOpExpr:
		x.Lhs = rewriteExpr(x.Lhs)
		x.Rhs = rewriteExpr(x.Rhs)
	case *ast.RelationalOpExpr:
		x.Lhs = rewriteExpr(x.Lhs)
		x.Rhs = rewriteExpr(x.Rhs)
	case *ast.ArithmeticOpExpr:
		x.Lhs = rewriteExpr(x.Lhs)
		x.Rhs = rewriteExpr(x.Rhs)
	case *ast.UnaryMinusOpExpr:
		x.Expr = rewriteExpr(x.Expr)
	case *ast.UnaryNotOpExpr:
		x.Expr = rewriteExpr(x.Expr)
	case *ast.UnaryLenOpExpr:
		x.Expr = rewriteExpr(x.Expr)
	case *ast.FunctionExpr:
		rewriteStmts(x.Stmts)
	}
	return e
}

// flattenConcat turns the right-leaning tree of a .. b .. c into [a, b, c].
func flattenConcat(e ast.Expr, args []ast.Expr) []ast.Expr {
	if c, ok := e.(*ast.StringConcatOpExpr); ok {
		args = flattenConcat(c.Lhs, args)
		return flattenConcat(c.Rhs, args)
	}
	return append(args, rewriteExpr(e))
}
