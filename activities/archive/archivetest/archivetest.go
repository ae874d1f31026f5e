// Package archivetest reads WARC files back for tests: every record with
// gowarc's strict reader, block and payload digests checked, and the
// files through warcio.js's check (the parser replayweb.page uses), as an
// archive's user would replay them.
package archivetest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nlnwa/gowarc/v3"
)

// Record is what a test reads of a WARC record.
type Record struct {
	File                                string // the file it was read from
	Type, ID, URI                       string // WARC-Type, WARC-Record-ID, WARC-Target-URI
	RefersTo, RefersToURI, RefersToDate string // a revisit's original
	Profile                             string // a revisit's WARC-Profile
	Block                               string // the block as written (a response's HTTP head and body)
}

// HTTP splits a request, response or revisit record's block into its
// start line, header lines and body.
func (r Record) HTTP() (status, header, body string) {
	head, body, _ := strings.Cut(r.Block, "\r\n\r\n")
	status, header, _ = strings.Cut(head, "\r\n")
	return status, header, body
}

// Files is the finished WARC files of dir (a file still being written, or
// left by a killed Runner, ends in .open); none fails the test.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no WARC file in %s (%v)", dir, err)
	}
	return names
}

// Read reads every record of files with gowarc's strict reader, failing
// the test on a malformed record or a wrong digest.
func Read(t testing.TB, files ...string) []Record {
	t.Helper()
	var out []Record
	for _, name := range files {
		r, err := gowarc.NewWarcFileReader(name, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: record %d: %v", name, len(out)+1, err)
			}
			out = append(out, record(t, name, rec.WarcRecord))
			_ = rec.Close()
		}
		_ = r.Close()
	}
	return out
}

func record(t testing.TB, file string, wr gowarc.WarcRecord) Record {
	t.Helper()
	h := wr.WarcHeader()
	if err := wr.Block().Cache(); err != nil {
		t.Fatalf("%s: %s: %v", file, h.Get(gowarc.WarcRecordID), err)
	}
	if v, err := wr.ValidateDigest(); err != nil || len(v) > 0 {
		t.Fatalf("%s: digest of %s %s: %v %v", file, wr.Type(), h.Get(gowarc.WarcTargetURI), err, v)
	}
	raw, err := wr.Block().RawBytes()
	if err != nil {
		t.Fatal(err)
	}
	block, err := io.ReadAll(raw)
	if err != nil {
		t.Fatal(err)
	}
	return Record{
		File: file, Type: wr.Type().String(), ID: h.Get(gowarc.WarcRecordID), URI: h.Get(gowarc.WarcTargetURI),
		RefersTo: h.Get(gowarc.WarcRefersTo), RefersToURI: h.Get(gowarc.WarcRefersToTargetURI),
		RefersToDate: h.Get(gowarc.WarcRefersToDate), Profile: h.Get(gowarc.WarcProfile),
		Block: string(block),
	}
}

// WarcioBin is warcio.js's CLI: $BATON_WARCIO_BIN, else
// <repo>/.stack/bin/warcio (deployments/scripts/install-warcio.sh), else
// warcio on $PATH. A missing warcio fails the test with the install
// command; -short skips it, as every test that needs an installed program.
func WarcioBin(t testing.TB) string {
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
	if b := filepath.Join(repoRoot(), ".stack", "bin", "warcio"); isExec(b) {
		return b
	}
	if b, err := exec.LookPath("warcio"); err == nil {
		return b
	}
	t.Fatalf("warcio.js is not installed: %s", install)
	return ""
}

// Warccheck runs activities/archive/testdata/warccheck.cjs over files with
// warcio.js: a JSON line a record, then "warccheck: N valid, M invalid".
// A check that finds a bad record answers its output and an error.
func Warccheck(t testing.TB, files ...string) ([]byte, error) {
	t.Helper()
	bin := WarcioBin(t)
	script := filepath.Join(repoRoot(), "activities", "archive", "testdata", "warccheck.cjs")
	cmd := exec.Command("node", append([]string{script}, files...)...)
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

// CheckValid runs Warccheck and fails the test unless warcio.js read at
// least one record and found none invalid.
func CheckValid(t testing.TB, files ...string) {
	t.Helper()
	out, err := Warccheck(t, files...)
	if err != nil || !strings.Contains(string(out), " 0 invalid") || strings.Contains(string(out), "warccheck: 0 valid") {
		t.Fatalf("warcio.js check of %d files: %v\n%s", len(files), err, out)
	}
}

func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// nodeModules is the node_modules directory warcio's CLI belongs to.
func nodeModules(t testing.TB, bin string) string {
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

// HTTPHeader is the value of the first header line of name in a request,
// response or revisit record's block ("" when it has none).
func (r Record) HTTPHeader(name string) string {
	_, header, _ := r.HTTP()
	for _, line := range strings.Split(header, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
