package deployments_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines bounds a product function or method, from its func keyword
// to its closing brace: a function a reader can hold in their head.
const maxFuncLines = 150

// maxTypeMethods bounds the methods of a product type: a type with more
// mixes concerns that belong in types of their own.
const maxTypeMethods = 40

// allowedLargeTypes are the product types allowed over maxTypeMethods,
// with their reason. Each entry is a debt: it must go.
var allowedLargeTypes = map[string]string{}

// TestProductFunctionsAreShort fails when a product function is over
// maxFuncLines lines.
func TestProductFunctionsAreShort(t *testing.T) {
	_, pkgs := loadModule(t)
	report(t, "function size", checkFuncSizes(pkgs, maxFuncLines))
}

// TestProductTypesHaveFewMethods fails when a product type has more than
// maxTypeMethods methods and is not in allowedLargeTypes.
func TestProductTypesHaveFewMethods(t *testing.T) {
	_, pkgs := loadModule(t)
	report(t, "type size", checkTypeSizes(pkgs, maxTypeMethods, allowedLargeTypes))
}

// The size checks fail on broken copies of the module's graph.
func TestSizeChecksCatchLargeCode(t *testing.T) {
	_, real := loadModule(t)
	check := func(g map[string]*pkgInfo, allowed map[string]string) []string {
		return append(checkFuncSizes(g, maxFuncLines), checkTypeSizes(g, maxTypeMethods, allowed)...)
	}
	if p := check(real, allowedLargeTypes); len(p) > 0 {
		t.Fatalf("the real module must pass first: %v", p)
	}
	cases := []struct {
		name, want string
		edit       func(map[string]*pkgInfo, map[string]string)
	}{
		{"a long function", "roles/huge.go: Huge is 151 lines, over 150", func(g map[string]*pkgInfo, _ map[string]string) {
			g["roles"].funcs["roles/huge.go: Huge"] = 151
		}},
		{"a type with many methods", "roles.Big has 41 methods, over 40", func(g map[string]*pkgInfo, _ map[string]string) {
			g["roles"].methods["Big"] = 41
		}},
		{"an allowance for a type gone", "allowed large type roles.Gone", func(_ map[string]*pkgInfo, a map[string]string) {
			a["roles.Gone"] = "test"
		}},
	}
	for _, c := range cases {
		g := cloneGraph(real)
		a := maps.Clone(allowedLargeTypes)
		c.edit(g, a)
		found := check(g, a)
		if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: no problem says %q (found %q)", c.name, c.want, found)
			continue
		}
		t.Logf("%s: found %q", c.name, found)
	}
}

func checkFuncSizes(pkgs map[string]*pkgInfo, limit int) []string {
	var p problems
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		funcs := pkgs[name].funcs
		for _, f := range slices.Sorted(maps.Keys(funcs)) {
			if funcs[f] > limit {
				p.add("%s is %d lines, over %d: split it along its seams", f, funcs[f], limit)
			}
		}
	}
	return p
}

func checkTypeSizes(pkgs map[string]*pkgInfo, limit int, allowed map[string]string) []string {
	var p problems
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		methods := pkgs[name].methods
		for _, typ := range slices.Sorted(maps.Keys(methods)) {
			full := name + "." + typ
			_, ok := allowed[full]
			if methods[typ] > limit && !ok {
				p.add("%s has %d methods, over %d: split it by concern", full, methods[typ], limit)
			}
		}
	}
	for _, full := range slices.Sorted(maps.Keys(allowed)) {
		i := strings.LastIndex(full, ".")
		if pkg := pkgs[full[:i]]; pkg == nil || pkg.methods[full[i+1:]] <= limit {
			p.add("allowed large type %s is not over %d methods: remove the allowance", full, limit)
		}
	}
	return p
}

// measureFuncs records the line count of every function of file under
// "path: Recv.Name" in info.funcs, and counts the methods of each receiver
// type in info.methods.
func measureFuncs(fset *token.FileSet, file *ast.File, path string, info *pkgInfo) {
	for _, decl := range file.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			recv := receiverType(fd.Recv.List[0].Type)
			info.methods[recv]++
			name = recv + "." + name
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		info.funcs[fmt.Sprintf("%s: %s", path, name)] = n
	}
}

// receiverType is the name of a method's receiver type, without pointer
// or type parameters.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}
