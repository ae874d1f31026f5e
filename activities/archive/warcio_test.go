package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batoncrawl/baton/activities/archive"
	"github.com/batoncrawl/baton/activities/archive/archivetest"
)

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

// The warcio.js check fails on a corrupted record: the test above can fail.
func TestWarcioCheckCatchesACorruptedPayload(t *testing.T) {
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
	out, err := archivetest.Warccheck(t, name)
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
	dir, want := writeMixedArchive(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(paths) < 3 {
		t.Fatalf("%d files, want several", len(paths))
	}

	out, err := archivetest.Warccheck(t, paths...)
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

	idx, err := exec.Command(archivetest.WarcioBin(t), append([]string{"cdx-index"}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("warcio cdx-index: %v\n%s", err, idx)
	}
	if n := strings.Count(string(idx), "http://m.test/"); n < 12 {
		t.Errorf("warcio cdx-index lists %d captures of m.test, want at least 12:\n%s", n, idx)
	}
}
