// Package blankerr is a vet-style check run by make check: an error assigned to the blank
// identifier ("v, _ := f()", "_ = f()") in a test. A test that drops an error reads
// a zero value on failure and goes on asserting on it, so it fails for the wrong reason or
// passes for one: the rule is that tests check every error (testkit.Check and Must make
// that one line). Product code is left to review and staticcheck: there, dropping an
// error is sometimes right and says why in a comment.
package blankerr

import (
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Analyzer reports errors assigned to _ in _test.go files.
var Analyzer = &analysis.Analyzer{
	Name: "blankerr",
	Doc:  "reports errors assigned to the blank identifier in tests",
	Run:  run,
}

var errorType = types.Universe.Lookup("error").Type()

func run(pass *analysis.Pass) (any, error) {
	for _, f := range pass.Files {
		if !strings.HasSuffix(pass.Fset.Position(f.Pos()).Filename, "_test.go") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok {
				return true
			}
			for k, lhs := range as.Lhs {
				if id, ok := lhs.(*ast.Ident); !ok || id.Name != "_" {
					continue
				}
				if t := resultType(pass, as, k); t != nil && types.Identical(t, errorType) {
					pass.Reportf(lhs.Pos(), "an error assigned to _ in a test: check it (testkit.Check, or t.Fatal)")
				}
			}
			return true
		})
	}
	return nil, nil
}

// resultType is the type of the k-th value the right-hand side of as yields.
func resultType(pass *analysis.Pass, as *ast.AssignStmt, k int) types.Type {
	if len(as.Rhs) == len(as.Lhs) {
		return pass.TypesInfo.TypeOf(as.Rhs[k])
	}
	if len(as.Rhs) != 1 {
		return nil
	}
	if tuple, ok := pass.TypesInfo.TypeOf(as.Rhs[0]).(*types.Tuple); ok && k < tuple.Len() {
		return tuple.At(k).Type()
	}
	return nil
}
