package deployments_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// The user documentation: the README and the pages of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, pages...)
}

// block is a fenced code block of a Markdown page.
type block struct {
	lang, text string
	line       int
}

// mdParts splits a page into its fenced code blocks and its prose (the
// lines outside them, each kept at its number).
func mdParts(src string) (blocks []block, prose []string) {
	var cur *block
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimPrefix(trimmed, "```"), line: i + 1}
			prose = append(prose, "")
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
			prose = append(prose, "")
		case cur != nil:
			cur.text += line + "\n"
			prose = append(prose, "")
		default:
			prose = append(prose, line)
		}
	}
	return blocks, prose
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
	headingRE    = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// anchors are the GitHub anchors of a page's headings.
func anchors(src string) map[string]bool {
	_, prose := mdParts(src)
	out, seen := map[string]bool{}, map[string]int{}
	for _, line := range prose {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocLinksResolve: every relative link of the README and of docs/
// names a file or directory of the repository, and its #anchor a heading
// of the page it points to.
func TestDocLinksResolve(t *testing.T) {
	for _, page := range docPages(t) {
		src := readText(t, page)
		_, prose := mdParts(src)
		for i, line := range prose {
			for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				where := fmt.Sprintf("%s:%d: link %s", strings.TrimPrefix(page, "../"), i+1, target)
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				rel, _ := filepath.Rel("..", path)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: no such file %s", where, rel)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(readText(t, path))[anchor] {
					t.Errorf("%s: %s has no heading #%s", where, rel, anchor)
				}
			}
		}
	}
}

// TestReadmeGoCompiles: every ```go block of the README and of docs/ that
// is a whole file (it starts with a package clause) builds and vets as a
// program of a module of its own that uses this repository, as a user's
// would.
func TestReadmeGoCompiles(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	goMod := "module readmecheck\n\ngo 1.26\n\nrequire github.com/batoncrawl/baton v0.0.0\n\nreplace github.com/batoncrawl/baton => " + repo + "\n"
	write(t, filepath.Join(mod, "go.mod"), goMod)
	write(t, filepath.Join(mod, "go.sum"), readText(t, "../go.sum"))
	n := 0
	for _, page := range docPages(t) {
		blocks, _ := mdParts(readText(t, page))
		for _, b := range blocks {
			if b.lang != "go" || !strings.HasPrefix(strings.TrimSpace(b.text), "package ") {
				continue
			}
			n++
			dir := filepath.Join(mod, fmt.Sprintf("block%d", n))
			write(t, filepath.Join(dir, "main.go"), b.text)
			t.Logf("block%d: %s:%d", n, strings.TrimPrefix(page, "../"), b.line)
		}
	}
	if n == 0 {
		t.Fatal("no Go program in the README: its crawler example is gone")
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the documentation's Go programs do not build (blocks listed above): %v\n%s", err, out)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// binaries builds baton and baton-worker once for the tests of this file.
var binaries = sync.OnceValues(func() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "readme-bin")
	if err != nil {
		return nil, err
	}
	pkgs := map[string]string{"baton": "./starter", "baton-worker": "./worker/cmd/baton-worker"}
	bins, errs := map[string]string{}, make(chan error, len(pkgs))
	for name, pkg := range pkgs {
		bins[name] = filepath.Join(dir, name)
		go func() {
			cmd := exec.Command("go", "build", "-o", bins[name], pkg)
			cmd.Dir = ".."
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
			errs <- nil
		}()
	}
	for range pkgs {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	return bins, nil
})

// commandRE finds a baton or baton-worker command at the start of a shell
// line, after environment assignments.
var commandRE = regexp.MustCompile(`^(?:[A-Z_]+=\S*\s+)*(?:bin/)?(baton|baton-worker)(\s.*)?$`)

// TestReadmeCommandsParse: every `baton ...` and `baton-worker ...`
// command line of a shell block of the README and of the pages of docs/
// this test knows parses against the real binaries: the subcommand exists
// and every flag is one of it, with a value of the right type (each is run
// with --help appended, which parses the line and runs nothing).
func TestReadmeCommandsParse(t *testing.T) {
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		where, bin string
		args       []string
	}
	var checks []check
	for _, page := range docPages(t) {
		blocks, _ := mdParts(readText(t, page))
		for _, b := range blocks {
			if b.lang != "sh" && b.lang != "bash" {
				continue
			}
			for i, line := range shellLines(b.text) {
				m := commandRE.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				where := fmt.Sprintf("%s:%d: %s", strings.TrimPrefix(page, "../"), b.line+1+i, line)
				args, err := shellWords(m[2])
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				checks = append(checks, check{where, bins[m[1]], args})
			}
		}
	}
	if len(checks) < 10 {
		t.Errorf("only %d baton commands found in the documentation's shell blocks", len(checks))
	}
	home := t.TempDir()
	failures := make([]string, len(checks))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, c := range checks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cmd := exec.Command(c.bin, append(c.args, "--help")...)
			cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
			if out, err := cmd.CombinedOutput(); err != nil {
				failures[i] = fmt.Sprintf("%s\n  does not parse: %v\n%s", c.where, err, lastLines(string(out), 3))
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		if f != "" {
			t.Error(f)
		}
	}
}

// shellLines joins a shell block's continued lines (a trailing
// backslash); the number of lines stays that of the block's first lines
// only approximately, which is enough to find a command.
func shellLines(text string) []string {
	return strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n")
}

// shellWords splits the rest of a command line into its words as a POSIX
// shell would, up to the end of the command (; & | < > or a comment);
// quotes are removed, a $(...) substitution is dropped and a variable
// ("$job") kept as a placeholder word.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	flush := func() {
		if in {
			words = append(words, w.String())
		}
		w.Reset()
		in = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !in:
			flush()
			return words, nil
		case strings.IndexByte(";&|<>)", c) >= 0:
			flush()
			return words, nil
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			in, i = true, i+1+j
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated double quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			in, i = true, i+1+j
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			in, i = true, i+1
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			if j == len(s) {
				return nil, fmt.Errorf("unterminated $(")
			}
			i = j
		default:
			w.WriteByte(c)
			in = true
		}
	}
	flush()
	return words, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ownDocs are the pages whose flags TestDocFlagsExist checks (pages of
// other subjects may name other tools' flags).
var ownDocs = []string{"../README.md", "../docs/crawling.md", "../docs/crawler.md", "../docs/operating.md", "../docs/how-it-works.md", "../docs/development.md", "../docs/benchmarks.md", "../docs/changelog.md", "../docs/README.md"}

// otherTools are flags of other programs the pages name in prose.
var otherTools = []string{"--build-arg", "--codec-endpoint", "--replicas", "--from-file", "--rm"}

// TestDocFlagsExist: every --flag the README and the user pages name in
// their prose is a flag of baton (any command) or baton-worker, so a
// renamed or misspelt flag (--max-body-bytes for --max-body) is caught.
func TestDocFlagsExist(t *testing.T) {
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	flagRE := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`)
	var helps func(args ...string)
	helps = func(args ...string) {
		out, _ := exec.Command(bins["baton"], append(args, "--help")...).CombinedOutput()
		for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
			known[m[1]] = true
		}
		if _, cmds, ok := strings.Cut(string(out), "Available Commands:\n"); ok {
			cmds, _, _ = strings.Cut(cmds, "\n\n")
			for _, l := range strings.Split(cmds, "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
					helps(append(slices.Clone(args), f[0])...)
				}
			}
		}
	}
	helps()
	out, _ := exec.Command(bins["baton-worker"], "--help").CombinedOutput()
	for _, m := range flagRE.FindAllStringSubmatch(string(out), -1) {
		known[m[1]] = true
	}
	known["--timers"] = true // crawl's deprecated, hidden flag; the worker's
	if !known["--max-body-bytes"] || !known["--zk-session-timeout"] {
		t.Fatalf("the help texts were not read: %d flags", len(known))
	}
	mentionRE := regexp.MustCompile("`[^`]*`")
	flagInRE := regexp.MustCompile(`(?:^|[\s(\[])(--[a-z][a-z0-9-]*[a-z0-9])`)
	for _, page := range ownDocs {
		_, prose := mdParts(readText(t, page))
		for i, line := range prose {
			for _, code := range mentionRE.FindAllString(line, -1) {
				for _, m := range flagInRE.FindAllStringSubmatch(strings.Trim(code, "`"), -1) {
					if !known[m[1]] && !slices.Contains(otherTools, m[1]) {
						t.Errorf("%s:%d: %s is not a flag of baton or baton-worker", strings.TrimPrefix(page, "../"), i+1, m[1])
					}
				}
			}
		}
	}
}

// TestCrawlFlagsDocumented: docs/crawling.md names every flag of `baton
// crawl`, so a new flag does not go unexplained.
func TestCrawlFlagsDocumented(t *testing.T) {
	bins, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bins["baton"], "crawl", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("baton crawl --help: %v\n%s", err, out)
	}
	own, _, _ := strings.Cut(string(out), "Global Flags:")
	page := readText(t, "../docs/crawling.md")
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`).FindAllStringSubmatch(own, -1)
	if len(flags) < 20 {
		t.Fatalf("baton crawl --help lists %d flags", len(flags))
	}
	for _, m := range flags {
		if m[1] != "--help" && !strings.Contains(page, "`"+m[1]) {
			t.Errorf("docs/crawling.md does not document baton crawl %s", m[1])
		}
	}
}
