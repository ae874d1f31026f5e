package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/batoncrawl/baton/activities/archive"
)

// warcioBin is warcio.js's CLI: $BATON_WARCIO_BIN, else
// <repo>/.stack/bin/warcio (deployments/scripts/install-warcio.sh), else
// warcio on $PATH. A missing warcio fails the test with the install
// command; -short skips it, as every test that needs an installed program.
func warcioBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs warcio.js (deployments/scripts/install-warcio.sh)")
	}
	const install = "run `bash deployments/scripts/install-warcio.sh` (or `make deps`), or set BATON_WARCIO_BIN"
	if b := os.Getenv("BATON_WARCIO_BIN"); b != "" {
		if !isExec(b) {
			t.Fatalf("BATON_WARCIO_BIN=%s is not an executable warcio.js: %s", b, install)
		}
		return b
	}
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	if b := filepath.Join(root, ".stack", "bin", "warcio"); isExec(b) {
		return b
	}
	if b, err := exec.LookPath("warcio"); err == nil {
		return b
	}
	t.Fatalf("warcio.js is not installed: %s", install)
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// nodeModules is the node_modules directory warcio's CLI belongs to.
func nodeModules(t *testing.T, bin string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(real); d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			return d
		}
	}
	t.Fatalf("%s (%s) is not inside a node_modules directory", bin, real)
	return ""
}

// writeMixedArchive writes every kind of record Baton writes, over several
// files: gzip'd and plain, SHA-1 and SHA-256, responses, revisits of both
// profiles, a truncated body.
func writeMixedArchive(t *testing.T) (dir string, records int) {
	dir = t.TempDir()
	ctx := context.Background()
	for _, cfg := range []func(*archive.Config){
		func(c *archive.Config) { c.MaxFileSize = 2 << 10 },
		func(c *archive.Config) { c.Gzip = false; c.DigestAlgorithm = archive.DigestSHA1; c.Prefix = "sha1" },
	} {
		w := newWriter(t, dir, cfg)
		idx := archive.NewIndex()
		for i := range 6 {
			e := exchange(fmt.Sprintf("http://m.test/%d", i), fmt.Sprintf("page %d %s", i%3, strings.Repeat("z", 400)))
			if i == 5 {
				e.Truncated = "length"
			}
			if _, err := w.WriteDeduplicated(ctx, e, idx); err != nil {
				t.Fatal(err)
			}
			records += 2
		}
		if _, err := w.WriteDeduplicated(ctx, notModified("http://m.test/1"), idx); err != nil {
			t.Fatal(err)
		}
		records += 2
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	names := files(t, dir)
	return dir, records + len(names) // one warcinfo a file
}

// warccheck runs testdata/warccheck.cjs over paths with warcio.js.
func warccheck(t *testing.T, bin string, paths []string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("node", append([]string{filepath.Join("testdata", "warccheck.cjs")}, paths...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules(t, bin))
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return append(out, exit.Stderr...), err
	}
	if err != nil {
		t.Fatal(err)
	}
	return out, nil
}

// The warcio.js check fails on a corrupted record: the test above can fail.
func TestWarcioCheckCatchesACorruptedPayload(t *testing.T) {
	bin := warcioBin(t)
	dir := t.TempDir()
	w := newWriter(t, dir, func(c *archive.Config) { c.Gzip = false })
	write(t, w, exchange("http://a.test/", "the original bytes"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, files(t, dir)[0])
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(strings.Replace(string(b), "original", "ORIGINAL", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := warccheck(t, bin, []string{name})
	if err == nil || !strings.Contains(string(out), "WARC-Payload-Digest") || !strings.Contains(string(out), "1 invalid") {
		t.Errorf("warccheck passed a corrupted payload: %v\n%s", err, out)
	}
}

type checked struct {
	File, Type, ID, URI, RefersTo string
	Problems                      []string
}

// warcio.js reads every record of Baton's files, finds every block and
// payload digest valid and every revisit pointing somewhere, and indexes
// the captures.
func TestWarcioReadsTheArchive(t *testing.T) {
	bin := warcioBin(t)
	dir, want := writeMixedArchive(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(paths) < 3 {
		t.Fatalf("%d files, want several", len(paths))
	}

	out, err := warccheck(t, bin, paths)
	if err != nil {
		t.Fatalf("warccheck: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; last != fmt.Sprintf("warccheck: %d valid, 0 invalid", want) {
		t.Fatalf("warccheck summary %q, want %d valid records\n%s", last, want, out)
	}
	ids := map[string]checked{}
	for _, l := range lines[:len(lines)-1] {
		var c checked
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		ids[c.ID] = c
	}
	revisits := 0
	for _, c := range ids {
		if c.Type == "revisit" {
			revisits++
			if o, ok := ids[c.RefersTo]; !ok || o.Type != "response" {
				t.Errorf("revisit %s of %s refers to %s, a %q record", c.ID, c.URI, c.RefersTo, o.Type)
			}
		}
	}
	if revisits != 2*3 {
		t.Errorf("%d revisits read, want 6 (2 identical payloads and a 304 in each archive)", revisits)
	}

	idx, err := exec.Command(bin, append([]string{"cdx-index"}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("warcio cdx-index: %v\n%s", err, idx)
	}
	if n := strings.Count(string(idx), "http://m.test/"); n < 12 {
		t.Errorf("warcio cdx-index lists %d captures of m.test, want at least 12:\n%s", n, idx)
	}
}
