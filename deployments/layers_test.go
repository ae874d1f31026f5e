package deployments_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ------------------------------------------------------------------ the layers

// layer is one floor of the module's packages (import paths relative to
// the module).
type layer struct {
	name string
	pkgs []string
}

// layers are the module's packages, bottom to top, as their imports stand.
// To see them: go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...
// A new package must be placed here (TestLayers fails until it is).
var layers = []layer{
	{"types: the roles' data and rules, no I/O", []string{
		"roles",
	}},
	{"the step and time budget every CSS and XPath selector runs under", []string{
		"activities/selectors",
	}},
	{"the headless browser pool the fetch engine renders pages with", []string{
		"activities/render",
	}},
	{"the WARC archive, the rules of revisits (the fetch engine archives through the first), and the archive's reader for tests", []string{
		"activities/archive",
		"activities/archive/archivetest",
		"activities/revisit",
	}},
	{"foundations: the metadata store, metrics, the fetch engine and its demo site, " +
		"the crawler API users write against, the command-line conventions of both binaries and the CLI's start, " +
		"the connections' secrets", []string{
		"activities/metadata",
		"activities/telemetry",
		"activities/crawl",
		"activities/crawl/demosite",
		"activities/crawler",
		"activities/cmdline/exitcode",
		"activities/cmdline/flagenv",
		"activities/cmdline/version",
		"activities/connect/security",
		"activities/cmdline/initgc",
	}},
	{"the Prometheus collectors a worker keeps the activities' metrics in", []string{
		"activities/telemetry/prommetrics",
	}},
	{"jobs and connections: crawl jobs with their store interfaces, the SQL store and its conformance suite; " +
		"the connection settings of both binaries", []string{
		"activities/jobs",
		"activities/jobs/sqlstore",
		"activities/jobs/storetest",
		"activities/connect",
	}},
	{"what every cluster capability shares", []string{
		"activities/cluster",
	}},
	{"the cluster capabilities", []string{
		"activities/heartbeat",
		"activities/scale",
		"activities/runner",
		"activities/failover",
	}},
	{"membership (finishes the fail-overs a member claimed)", []string{
		"activities/membership",
	}},
	{"workflows", []string{
		"workflows",
	}},
	{"front doors: the worker (importable), the CLI, the test harness", []string{
		"worker",
		"starter",
		"testsuite",
	}},
	{"binaries over the worker, and packages nothing may import (the activities overview, repo-wide tests)", []string{
		"worker/cmd/baton-worker",
		"worker/examples/jsonapi",
		"worker/examples/shop",
		"testsuite/testdata/faultycrawler",
		"testsuite/testdata/barecolly",
		"testsuite/testdata/sinkcrawler",
		"testsuite/testdata/warccrawler",
		"testsuite/testdata/jscrawler",
		"testsuite/testdata/logincrawler",
		"activities",
		"deployments",
	}},
}

// allowedImport is an import the rules of TestLayers refuse unless it is
// listed, with its reason.
type allowedImport struct{ from, to, why string }

// allowedImports are exactly the children that import their parent under
// the rule of TestLayers: the parent is a library they build on.
var allowedImports = []allowedImport{
	{"activities/jobs/sqlstore", "activities/jobs", "implements the store interfaces jobs declares (SQLite, PostgreSQL)"},
	{"activities/jobs/storetest", "activities/jobs", "the one conformance suite of every jobs store"},
	{"activities/telemetry/prommetrics", "activities/telemetry", "keeps the metrics telemetry declares (its Recorder) as Prometheus collectors"},
	{"worker/cmd/baton-worker", "worker", "the baton-worker binary runs worker.Main"},
	{"worker/examples/jsonapi", "worker", "an example binary: a user's crawler run by worker.Main"},
	{"worker/examples/shop", "worker", "an example binary: a user's crawler run by worker.Main"},
}

// maxProductLines bounds a product Go file.
const maxProductLines = 600

// TestLayers fails unless the module's packages keep to layers:
//
//   - Every package of the module is in exactly one layer: those `go list
//     ./...` names and the packages under testdata directories (binaries
//     the tests build). A package missing from the table, placed twice, or
//     named by the table but gone fails.
//   - A package's imports are those of its non-test Go files, whatever
//     their build constraints. Test files may import anything (external
//     tests of low packages use testsuite).
//   - No package imports a package of a higher layer; no allowance
//     overrides that.
//   - No package imports a package of its own layer, nor an ancestor (the
//     package of a directory that holds its own: its parent, its parent's
//     parent), unless the pair is in allowedImports.
//   - The parent rule. "No package imports its parent" is aimed at a
//     parent that stands over its children, as activities did when it held
//     the one Activities struct of every capability and jobs imported it
//     for three batch types: such a parent sits both above and below its
//     children. A child may import its parent only when the parent is a
//     library the child builds on (it defines what the child implements,
//     tests or runs) and never an umbrella: an ancestor that a descendant
//     imports imports none of its own descendants (checked), and the pair
//     is listed in allowedImports with its reason. jobs/sqlstore and
//     jobs/storetest importing jobs (the store interfaces they implement
//     and test; jobs never imports them; they share jobs' layer as parts
//     of its capability) and the binaries under worker/ importing worker
//     follow it; allowedImports lists exactly those pairs. activities
//     itself holds no code and is in the top layer: nothing imports it.
//   - Every allowed pair is an import the code makes, and one that needs
//     the allowance (same layer or an ancestor).
//   - No import cycle among the module's packages.
func TestLayers(t *testing.T) {
	_, pkgs := loadModule(t)
	report(t, "layers", checkLayers(pkgs, layers, allowedImports))
}

// TestProductFilesAreShort fails when a product Go file is over
// maxProductLines lines: a non-test file of a package that is neither
// under a testdata directory nor an example (worker/examples).
func TestProductFilesAreShort(t *testing.T) {
	_, pkgs := loadModule(t)
	report(t, "file size", checkFileSizes(pkgs, maxProductLines))
}

// TestLinkerFlagsNameAVariable: every -X of the Makefile and the
// Dockerfile names a package-level variable of a package of the module.
// go build ignores an -X whose package is not linked, so a moved package
// would silently leave --version unstamped.
func TestLinkerFlagsNameAVariable(t *testing.T) {
	mod, pkgs := loadModule(t)
	x := regexp.MustCompile(`-X\s+` + regexp.QuoteMeta(mod) + `/([\w./-]+)\.(\w+)=`)
	for _, file := range []string{"../Makefile", dockerfilePath} {
		found := x.FindAllStringSubmatch(readText(t, file), -1)
		if len(found) == 0 {
			t.Errorf("%s: no -X %s/... flag", file, mod)
		}
		for _, m := range found {
			p, ok := pkgs[m[1]]
			if !ok {
				t.Errorf("%s: -X %s/%s.%s: no such package", file, mod, m[1], m[2])
				continue
			}
			if !slices.Contains(p.vars, m[2]) {
				t.Errorf("%s: -X %s/%s.%s: the package has no variable %s", file, mod, m[1], m[2], m[2])
			}
		}
	}
}

// The checks fail on broken copies of the module's graph.
func TestLayerChecksCatchBrokenGraphs(t *testing.T) {
	_, real := loadModule(t)
	if p := append(checkLayers(real, layers, allowedImports), checkFileSizes(real, maxProductLines)...); len(p) > 0 {
		t.Fatalf("the real module must pass first: %v", p)
	}
	addImport := func(from, to string) func(map[string]*pkgInfo, *[]layer, *[]allowedImport) {
		return func(g map[string]*pkgInfo, _ *[]layer, _ *[]allowedImport) {
			g[from].imports = append(g[from].imports, to)
		}
	}
	cases := []struct {
		name, want string
		edit       func(map[string]*pkgInfo, *[]layer, *[]allowedImport)
	}{
		{"roles imports jobs", "of a higher layer", addImport("roles", "activities/jobs")},
		{"crawler imports crawl", "of its own layer", addImport("activities/crawler", "activities/crawl")},
		{"cluster imports runner", "of a higher layer", addImport("activities/cluster", "activities/runner")},
		{"a cycle", "import cycle: activities/connect -> activities/connect/security -> activities/connect",
			addImport("activities/connect/security", "activities/connect")},
		{"a new package not placed", "not in the layers table", func(g map[string]*pkgInfo, _ *[]layer, _ *[]allowedImport) {
			g["activities/fresh"] = &pkgInfo{}
		}},
		{"a placed package gone", "no such package", func(g map[string]*pkgInfo, _ *[]layer, _ *[]allowedImport) {
			delete(g, "activities/scale")
		}},
		{"a package placed twice", "placed twice", func(_ map[string]*pkgInfo, l *[]layer, _ *[]allowedImport) {
			(*l)[0].pkgs = append(slices.Clone((*l)[0].pkgs), "workflows")
		}},
		{"a child imports its parent unlisted", "imports its ancestor", func(_ map[string]*pkgInfo, _ *[]layer, a *[]allowedImport) {
			*a = slices.DeleteFunc(slices.Clone(*a), func(p allowedImport) bool { return p.from == "worker/cmd/baton-worker" })
		}},
		{"a parent over its children", "imports its own descendant", func(g map[string]*pkgInfo, l *[]layer, _ *[]allowedImport) {
			g["activities/jobs/part"] = &pkgInfo{}
			(*l)[1].pkgs = append(slices.Clone((*l)[1].pkgs), "activities/jobs/part")
			g["activities/jobs"].imports = append(g["activities/jobs"].imports, "activities/jobs/part")
		}},
		{"an allowance the code does not use", "not an import", func(g map[string]*pkgInfo, _ *[]layer, _ *[]allowedImport) {
			g["activities/jobs/storetest"].imports = slices.DeleteFunc(g["activities/jobs/storetest"].imports,
				func(s string) bool { return s == "activities/jobs" })
		}},
		{"an allowance that needs none", "needs no allowance", func(_ map[string]*pkgInfo, _ *[]layer, a *[]allowedImport) {
			*a = append(slices.Clone(*a), allowedImport{"workflows", "roles", "test"})
		}},
		{"an allowance upwards", "of a higher layer", func(g map[string]*pkgInfo, _ *[]layer, a *[]allowedImport) {
			g["roles"].imports = append(g["roles"].imports, "workflows")
			*a = append(slices.Clone(*a), allowedImport{"roles", "workflows", "test"})
		}},
		{"a long product file", "601 lines, over 600", func(g map[string]*pkgInfo, _ *[]layer, _ *[]allowedImport) {
			g["roles"].files["roles/huge.go"] = 601
		}},
	}
	for _, c := range cases {
		g := cloneGraph(real)
		l := slices.Clone(layers)
		a := slices.Clone(allowedImports)
		c.edit(g, &l, &a)
		found := append(checkLayers(g, l, a), checkFileSizes(g, maxProductLines)...)
		if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: no problem says %q (found %q)", c.name, c.want, found)
			continue
		}
		t.Logf("%s: found %q", c.name, found)
	}
}

// ------------------------------------------------------------------ checks

// pkgInfo is what the checks know of one package of the module.
type pkgInfo struct {
	// imports are the module's packages its non-test Go files import
	// (relative to the module).
	imports []string
	// files are its non-test Go files (relative to the module) with their
	// line counts, for a product package; nil otherwise.
	files map[string]int
	// vars are its package-level variables.
	vars []string
	// funcs are the line counts of its non-test functions and methods, by
	// "file: Recv.Name", for a product package; nil otherwise.
	funcs map[string]int
	// methods are the method counts of its types, for a product package;
	// nil otherwise.
	methods map[string]int
}

func checkLayers(pkgs map[string]*pkgInfo, layers []layer, allowed []allowedImport) []string {
	var p problems
	floor := map[string]int{}
	for i, l := range layers {
		for _, name := range l.pkgs {
			if j, ok := floor[name]; ok {
				p.add("%s is placed twice (layers %d and %d)", name, j, i)
			}
			floor[name] = i
			if _, ok := pkgs[name]; !ok {
				p.add("layer %d names %s: no such package", i, name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := floor[name]; !ok {
			p.add("%s is not in the layers table: place it in the layer its imports say", name)
		}
	}
	isAllowed := map[[2]string]bool{}
	for _, a := range allowed {
		isAllowed[[2]string{a.from, a.to}] = true
		from, to := floor[a.from], floor[a.to]
		switch {
		case pkgs[a.from] == nil || !slices.Contains(pkgs[a.from].imports, a.to):
			p.add("allowed %s -> %s is not an import of the code: remove the allowance", a.from, a.to)
		case to > from:
			p.add("allowed %s -> %s imports a package of a higher layer: no allowance can let it", a.from, a.to)
		case to < from && !isAncestor(a.to, a.from):
			p.add("allowed %s -> %s needs no allowance (a lower layer, not an ancestor)", a.from, a.to)
		}
		if isAncestor(a.to, a.from) && pkgs[a.to] != nil {
			for _, imp := range pkgs[a.to].imports {
				if isAncestor(a.to, imp) {
					p.add("%s imports its own descendant %s, so its descendants may not import it (%s does)", a.to, imp, a.from)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		from, placed := floor[name]
		for _, imp := range pkgs[name].imports {
			to, ok := floor[imp]
			if !placed || !ok || isAllowed[[2]string{name, imp}] {
				continue
			}
			switch {
			case to > from:
				p.add("%s (layer %d) imports %s, of a higher layer (%d)", name, from, imp, to)
			case to == from:
				p.add("%s imports %s, of its own layer (%d): move one, or allow the pair with its reason", name, imp, from)
			case isAncestor(imp, name):
				p.add("%s imports its ancestor %s: see the parent rule of TestLayers", name, imp)
			}
		}
	}
	found := cycles(pkgs)
	for i, c := range found {
		if i == 5 {
			p.add("and %d more import cycles", len(found)-i)
			break
		}
		p.add("import cycle: %s", strings.Join(c, " -> "))
	}
	return p
}

// isAncestor says whether package a's directory holds package b's.
func isAncestor(a, b string) bool { return strings.HasPrefix(b, a+"/") }

// cycles returns the import cycles of pkgs, each once, as the path that
// closes it.
func cycles(pkgs map[string]*pkgInfo) [][]string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var found [][]string
	var visit func(string)
	visit = func(n string) {
		state[n] = open
		stack = append(stack, n)
		for _, m := range pkgs[n].imports {
			if pkgs[m] == nil {
				continue
			}
			switch state[m] {
			case unseen:
				visit(m)
			case open:
				i := slices.Index(stack, m)
				found = append(found, canonicalCycle(stack[i:]))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range slices.Sorted(maps.Keys(pkgs)) {
		if state[n] == unseen {
			visit(n)
		}
	}
	return found
}

// canonicalCycle is the cycle through the packages of ring as the path
// that closes it, starting at its first package by name: the same cycle
// reads the same whatever package the search entered it by.
func canonicalCycle(ring []string) []string {
	i := slices.Index(ring, slices.Min(ring))
	c := append(slices.Clone(ring[i:]), ring[:i]...)
	return append(c, c[0])
}

func checkFileSizes(pkgs map[string]*pkgInfo, limit int) []string {
	var p problems
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		files := pkgs[name].files
		for _, f := range slices.Sorted(maps.Keys(files)) {
			if files[f] > limit {
				p.add("%s is %d lines, over %d: split it", f, files[f], limit)
			}
		}
	}
	return p
}

// ------------------------------------------------------------------ loading

// listed is what the checks read of `go list -json`.
type listed struct {
	ImportPath, Dir                   string
	GoFiles, CgoFiles, IgnoredGoFiles []string
	Error                             *struct{ Err string }
}

// loadModule lists every package of the module with go list, and parses
// their non-test Go files for imports and package-level variables.
func loadModule(t *testing.T) (string, map[string]*pkgInfo) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindStringSubmatch(readText(t, "../go.mod"))
	if m == nil {
		t.Fatal("../go.mod: no module line")
	}
	mod := m[1]
	patterns := append([]string{"./..."}, testdataPackages(t)...)
	cmd := exec.Command("go", append([]string{"list", "-e", "-json"}, patterns...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var l listed
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if l.Error != nil {
			t.Errorf("go list %s: %s", l.ImportPath, l.Error.Err)
		}
		rel, ok := strings.CutPrefix(l.ImportPath, mod+"/")
		if !ok {
			t.Fatalf("go list: %s is not in module %s", l.ImportPath, mod)
		}
		info := &pkgInfo{}
		product := !slices.Contains(strings.Split(rel, "/"), "testdata") && !strings.HasPrefix(rel, "worker/examples/")
		if product {
			info.files, info.funcs, info.methods = map[string]int{}, map[string]int{}, map[string]int{}
		}
		for _, f := range slices.Concat(l.GoFiles, l.CgoFiles, l.IgnoredGoFiles) {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			path := filepath.Join(l.Dir, f)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if r, ok := strings.CutPrefix(p, mod+"/"); ok && !slices.Contains(info.imports, r) {
					info.imports = append(info.imports, r)
				}
			}
			info.vars = append(info.vars, packageVars(file)...)
			if product {
				info.files[rel+"/"+f] = lines(src)
				measureFuncs(fset, file, rel+"/"+f, info)
			}
		}
		pkgs[rel] = info
	}
	return mod, pkgs
}

// testdataPackages returns the directories under testdata directories
// that hold non-test Go files, as go list patterns (./... skips them).
func testdataPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir, _ := filepath.Rel("..", filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if slices.Contains(strings.Split(dir, "/"), "testdata") && !slices.Contains(dirs, "./"+dir) {
			dirs = append(dirs, "./"+dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// packageVars returns the names of file's package-level variables.
func packageVars(file *ast.File) []string {
	var names []string
	for _, decl := range file.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// lines counts src's lines as wc -l does, a last line without its newline
// included.
func lines(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

func cloneGraph(g map[string]*pkgInfo) map[string]*pkgInfo {
	out := make(map[string]*pkgInfo, len(g))
	for k, v := range g {
		out[k] = &pkgInfo{imports: slices.Clone(v.imports), files: maps.Clone(v.files), vars: v.vars,
			funcs: maps.Clone(v.funcs), methods: maps.Clone(v.methods)}
		if out[k].files == nil {
			out[k].files, out[k].funcs, out[k].methods = map[string]int{}, map[string]int{}, map[string]int{}
		}
	}
	return out
}
