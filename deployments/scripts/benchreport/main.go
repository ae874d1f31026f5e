//go:build ignore

// Command benchreport rewrites the figures of docs/benchmarks.md from the
// output of `go test -bench`, so that they are never edited by hand.
//
// Each table of the page sits between two markers:
//
//	<!-- bench:PostgresCrawl pkg=./testsuite/ args="-benchtime=1x -count=3" cols="pages/s=Baton pages/s;ratio=vs bare Colly" -->
//	...generated...
//	<!-- /bench -->
//
// The opening marker names the benchmark (the function without its
// Benchmark prefix), the package that holds it (pkg=), the extra `go test`
// flags (args=) and environment (env="NAME=value ..."), and the table's
// columns (cols=): `metric=heading` pairs separated by `;`, where
// metric is a unit of b.ReportMetric (or ns/op), or `a minus b` for the
// difference of two of them in each run. An optional baseline="..." names
// what the figures compare against. The rows are the benchmark's cases
// (its sub-benchmarks), in the order they ran.
//
// Usage (make bench-report runs the first form):
//
//	go run deployments/scripts/benchreport/main.go -doc docs/benchmarks.md [-only REGEXP]
//	go run deployments/scripts/benchreport/main.go -doc docs/benchmarks.md -from NAME=FILE ...
//
// The first form runs each selected benchmark with `go test` and rewrites its
// table; the second rewrites tables from outputs captured earlier (a file
// may start with `# date: YYYY-MM-DD` and `# machine: ...` lines; without
// them the file's modification date and this machine are used).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	doc := flag.String("doc", "docs/benchmarks.md", "the page whose tables to rewrite")
	only := flag.String("only", "", "rewrite only the benchmarks whose name matches this regexp")
	var from fromFlags
	flag.Var(&from, "from", "NAME=FILE: rewrite NAME's table from captured `go test -bench` output (repeatable); nothing is run")
	check := flag.Bool("check", false, "only check the page's markers: each names a benchmark of its package; nothing is run or written")
	flag.Parse()
	var err error
	if *check {
		err = checkDoc(*doc)
	} else {
		err = run(*doc, *only, from)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

type fromFlags map[string]string

func (f *fromFlags) String() string { return fmt.Sprint(map[string]string(*f)) }

func (f *fromFlags) Set(v string) error {
	name, file, ok := strings.Cut(v, "=")
	if !ok || name == "" || file == "" {
		return fmt.Errorf("-from %q: want NAME=FILE", v)
	}
	if *f == nil {
		*f = fromFlags{}
	}
	(*f)[name] = file
	return nil
}

func run(doc, only string, from fromFlags) error {
	src, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	var sel *regexp.Regexp
	if only != "" {
		if sel, err = regexp.Compile(only); err != nil {
			return fmt.Errorf("-only: %w", err)
		}
	}
	out, err := rewrite(string(src), func(m marker) (*output, error) {
		if from != nil {
			file, ok := from[m.name]
			if !ok {
				return nil, nil
			}
			return readOutput(file)
		}
		if sel != nil && !sel.MatchString(m.name) {
			return nil, nil
		}
		return runBench(m)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(out), 0o644)
}

// checkDoc checks every marker of doc: it parses, and its benchmark is a
// function of its package's test files.
func checkDoc(doc string) error {
	src, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	n := 0
	_, err = rewrite(string(src), func(m marker) (*output, error) {
		n++
		files, _ := filepath.Glob(filepath.Join(m.pkg, "*_test.go"))
		decl := regexp.MustCompile(`(?m)^func Benchmark` + m.name + `\(b \*testing\.B\)`)
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && decl.Match(b) {
				return nil, nil
			}
		}
		return nil, fmt.Errorf("no func Benchmark%s(b *testing.B) in %s*_test.go", m.name, m.pkg)
	})
	if err == nil && n == 0 {
		err = errors.New("no <!-- bench:NAME ... --> markers")
	}
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return nil
}

// ------------------------------------------------------------------ markers

// marker is one table's opening comment.
type marker struct {
	name, pkg, args, env, baseline string
	cols                           []column
}

type column struct {
	metric, minus, heading string
}

var (
	openRE  = regexp.MustCompile(`<!-- bench:(\w+)((?:\s+\w+=(?:"[^"]*"|\S+))*)\s*-->`)
	attrRE  = regexp.MustCompile(`(\w+)=("[^"]*"|\S+)`)
	closeTx = "<!-- /bench -->"
)

func parseMarker(s string) (marker, error) {
	sub := openRE.FindStringSubmatch(s)
	m := marker{name: sub[1]}
	for _, a := range attrRE.FindAllStringSubmatch(sub[2], -1) {
		v := strings.Trim(a[2], `"`)
		switch a[1] {
		case "pkg":
			m.pkg = v
		case "args":
			m.args = v
		case "env":
			m.env = v
		case "baseline":
			m.baseline = v
		case "cols":
			for _, c := range strings.Split(v, ";") {
				metric, heading, ok := strings.Cut(strings.TrimSpace(c), "=")
				if !ok || metric == "" || heading == "" {
					return m, fmt.Errorf("bench:%s: column %q: want metric=heading", m.name, c)
				}
				col := column{metric: strings.TrimSpace(metric), heading: strings.TrimSpace(heading)}
				if a, b, ok := strings.Cut(col.metric, " minus "); ok {
					col.metric, col.minus = strings.TrimSpace(a), strings.TrimSpace(b)
				}
				m.cols = append(m.cols, col)
			}
		default:
			return m, fmt.Errorf("bench:%s: unknown attribute %q", m.name, a[1])
		}
	}
	if m.pkg == "" || len(m.cols) == 0 {
		return m, fmt.Errorf("bench:%s: the marker needs pkg= and cols=", m.name)
	}
	return m, nil
}

// command is the `make bench` line that produces a marker's table.
func (m marker) command() string {
	c := fmt.Sprintf("make bench BENCH='^Benchmark%s$' PKGS=%s", m.name, m.pkg)
	if m.env != "" {
		c = m.env + " " + c
	}
	if m.args != "" {
		c += fmt.Sprintf(" BENCH_FLAGS='%s'", m.args)
	}
	return c
}

// rewrite replaces the body of every marker for which get returns output
// (nil: left as it is).
func rewrite(doc string, get func(marker) (*output, error)) (string, error) {
	var b strings.Builder
	rest := doc
	for {
		loc := openRE.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			return b.String(), nil
		}
		m, err := parseMarker(rest[loc[0]:loc[1]])
		if err != nil {
			return "", err
		}
		end := strings.Index(rest[loc[1]:], closeTx)
		if end < 0 {
			return "", fmt.Errorf("bench:%s: no %s after it", m.name, closeTx)
		}
		end += loc[1]
		b.WriteString(rest[:loc[1]])
		out, err := get(m)
		if err != nil {
			return "", fmt.Errorf("bench:%s: %w", m.name, err)
		}
		if out == nil {
			b.WriteString(rest[loc[1]:end])
		} else {
			body, err := table(m, out)
			if err != nil {
				return "", fmt.Errorf("bench:%s: %w", m.name, err)
			}
			b.WriteString("\n" + body)
		}
		b.WriteString(closeTx)
		rest = rest[end+len(closeTx):]
	}
}

// ------------------------------------------------------------------ output

// output is one run of `go test -bench`: the results of each case, in the
// order the cases first appeared.
type output struct {
	date, machine string
	cases         []string
	runs          map[string][]map[string]float64 // case -> one map of metric -> value per run
}

var (
	resultRE = regexp.MustCompile(`^(Benchmark\S+)\s+(\d+)\s+([-+.\deE]+ \S+(?:\s.*)?)$`)
	// a result whose name line was cut by what the benchmark printed
	nameRE    = regexp.MustCompile(`^(Benchmark\S+)`)
	numbersRE = regexp.MustCompile(`^\s+(\d+)\s+([-+.\deE]+ \S+(?:\s.*)?)$`)
	procsRE   = regexp.MustCompile(`-\d+$`)
	headerRE  = regexp.MustCompile(`^#\s*(date|machine):\s*(.+)$`)
)

// parseOutput reads `go test -bench` output: the result lines
// (`BenchmarkX/case-2   1   123 ns/op   4.5 pages/s ...`; ns/op is left out
// when a benchmark reports it as 0), whatever else is
// printed around them, and the optional `# date:` and `# machine:` lines.
func parseOutput(r io.Reader) (*output, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out := &output{runs: map[string][]map[string]float64{}}
	last := "" // the benchmark whose name line came last, awaiting its numbers
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r ")
		if h := headerRE.FindStringSubmatch(line); h != nil {
			if h[1] == "date" {
				out.date = strings.TrimSpace(h[2])
			} else {
				out.machine = strings.TrimSpace(h[2])
			}
			continue
		}
		var name, fields string
		if r := resultRE.FindStringSubmatch(line); r != nil {
			name, fields = r[1], r[3]
		} else if r := numbersRE.FindStringSubmatch(line); r != nil && last != "" {
			name, fields = last, r[2]
		} else {
			if n := nameRE.FindStringSubmatch(line); n != nil {
				last = n[1]
			}
			continue
		}
		last = ""
		metrics := map[string]float64{}
		for _, f := range strings.Split(fields, "\t") {
			v, unit, ok := strings.Cut(strings.TrimSpace(f), " ")
			if !ok {
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%q: metric %q: %w", line, f, err)
			}
			metrics[strings.TrimSpace(unit)] = x
		}
		if _, seen := out.runs[name]; !seen {
			out.cases = append(out.cases, name)
		}
		out.runs[name] = append(out.runs[name], metrics)
	}
	if len(out.cases) == 0 {
		return nil, errors.New("no benchmark results in the output")
	}
	out.stripProcs()
	return out, nil
}

// stripProcs drops the -GOMAXPROCS suffix go test adds to every name (none
// when GOMAXPROCS is 1): only when every case has the same one.
func (o *output) stripProcs() {
	suffix := procsRE.FindString(o.cases[0])
	for _, c := range o.cases {
		if suffix == "" || !strings.HasSuffix(c, suffix) {
			return
		}
	}
	runs := map[string][]map[string]float64{}
	for i, c := range o.cases {
		o.cases[i] = strings.TrimSuffix(c, suffix)
		runs[o.cases[i]] = append(runs[o.cases[i]], o.runs[c]...)
	}
	o.runs = runs
}

func readOutput(file string) (*output, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := parseOutput(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if out.date == "" {
		if st, err := f.Stat(); err == nil {
			out.date = st.ModTime().UTC().Format(time.DateOnly)
		}
	}
	if out.machine == "" {
		out.machine = thisMachine()
	}
	return out, nil
}

// runBench runs a marker's benchmark with go test, its output shown as it
// goes, and parses it.
func runBench(m marker) (*output, error) {
	args := []string{"test", "-run", "^$", "-bench", "^Benchmark" + m.name + "$", "-timeout", "60m"}
	args = append(args, strings.Fields(m.args)...)
	args = append(args, m.pkg)
	fmt.Fprintln(os.Stderr, "benchreport: go", strings.Join(args, " "))
	var buf bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), strings.Fields(m.env)...)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stdout, &buf), os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go test: %w", err)
	}
	out, err := parseOutput(&buf)
	if err != nil {
		return nil, err
	}
	out.date, out.machine = time.Now().UTC().Format(time.DateOnly), thisMachine()
	return out, nil
}

// thisMachine describes the machine: cores and memory.
func thisMachine() string {
	s := fmt.Sprintf("%d cores", runtime.NumCPU())
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %g kB", &kb); err == nil {
			s += fmt.Sprintf(", %.0f GiB", kb/(1<<20))
		}
	}
	return s + ", " + runtime.GOOS + "/" + runtime.GOARCH
}

// ------------------------------------------------------------------ table

// table renders a marker's generated body: the caption and the table.
func table(m marker, out *output) (string, error) {
	prefix := "Benchmark" + m.name
	var b strings.Builder
	runs, fewer := 0, false
	var rows [][]string
	for _, c := range out.cases {
		if c != prefix && !strings.HasPrefix(c, prefix+"/") {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(c, prefix), "/")
		if name == "" {
			name = m.name
		}
		row := []string{name}
		for _, col := range m.cols {
			row = append(row, cell(col, out.runs[c]))
		}
		rows = append(rows, row)
		fewer = fewer || (runs > 0 && len(out.runs[c]) != runs)
		runs = max(runs, len(out.runs[c]))
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("no results of Benchmark%s in the output", m.name)
	}
	fmt.Fprintf(&b, "Measured %s on %s with `%s`", out.date, out.machine, m.command())
	if runs > 1 {
		upTo := ""
		if fewer {
			upTo = "up to "
		}
		fmt.Fprintf(&b, "; %s%d runs a case, each cell the median (lowest to highest)", upTo, runs)
	}
	b.WriteString(".")
	if m.baseline != "" {
		fmt.Fprintf(&b, " Baseline: %s.", m.baseline)
	}
	b.WriteString("\n\n| case |")
	for _, col := range m.cols {
		b.WriteString(" " + col.heading + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(m.cols)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String(), nil
}

// cell is a column's figure over the runs of one case: the value of a
// single run, else the median and the range (one value when all agree); "—" when no run reported it.
func cell(col column, runs []map[string]float64) string {
	var vs []float64
	for _, r := range runs {
		v, ok := r[col.metric]
		if col.minus != "" {
			w, ok2 := r[col.minus]
			v, ok = v-w, ok && ok2
		}
		if ok {
			vs = append(vs, v)
		}
	}
	switch len(vs) {
	case 0:
		return "—"
	case 1:
		return number(vs[0])
	}
	sort.Float64s(vs)
	mid := len(vs) / 2
	median := vs[mid]
	if len(vs)%2 == 0 {
		median = (vs[mid-1] + vs[mid]) / 2
	}
	lo, hi := number(vs[0]), number(vs[len(vs)-1])
	if lo == hi {
		return lo
	}
	return fmt.Sprintf("%s (%s to %s)", number(median), lo, hi)
}

// number writes a figure with three significant digits at most below 100
// and as a whole number with thousands separators above.
func number(v float64) string {
	neg := v < 0
	a := math.Abs(v)
	var s string
	switch {
	case a >= 100:
		s = group(strconv.FormatFloat(math.Round(a), 'f', 0, 64))
	case a >= 10:
		s = strconv.FormatFloat(math.Round(a*10)/10, 'f', -1, 64)
	default:
		s = strconv.FormatFloat(math.Round(a*100)/100, 'f', -1, 64)
	}
	if neg && s != "0" {
		return "−" + s
	}
	return s
}

func group(digits string) string {
	var parts []string
	for len(digits) > 3 {
		parts = append([]string{digits[len(digits)-3:]}, parts...)
		digits = digits[:len(digits)-3]
	}
	return strings.Join(slices.Insert(parts, 0, digits), ",")
}
