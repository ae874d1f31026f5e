package jobs_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nlnwa/gowarc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// warcResponses reads the WARC files of dir with gowarc's strict reader,
// checking every record's digests, and returns the blocks of the response
// records by target URI.
func warcResponses(t *testing.T, dir string) map[string][]string {
	t.Helper()
	open, _ := filepath.Glob(filepath.Join(dir, "*.open"))
	assert.Empty(t, open, "every file closed when the batch ended")
	names, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.NoError(t, err)
	require.NotEmpty(t, names, "no WARC file in %s", dir)
	out := map[string][]string{}
	for _, name := range names {
		r, err := gowarc.NewWarcFileReader(name, 0, gowarc.WithStrictValidation())
		require.NoError(t, err)
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, name)
			wr := rec.WarcRecord
			require.NoError(t, wr.Block().Cache())
			v, err := wr.ValidateDigest()
			require.NoError(t, err)
			require.Empty(t, v, "digest of a record of %s", name)
			if wr.Type() == gowarc.Response {
				raw, err := wr.Block().RawBytes()
				require.NoError(t, err)
				b, err := io.ReadAll(raw)
				require.NoError(t, err)
				uri := wr.WarcHeader().Get(gowarc.WarcTargetURI)
				out[uri] = append(out[uri], string(b))
			}
			_ = rec.Close()
		}
		_ = r.Close()
	}
	return out
}

// A job with a WARC directory archives every response its batches fetch,
// as received: a gzip page keeps its encoding and bytes; the pages are
// still extracted from the decoded HTML.
func TestCrawlWritesWARC(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = io.WriteString(zw, "<html><head><title>Zipped</title></head><body><a href='/plain'>p</a></body></html>")
	require.NoError(t, zw.Close())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/robots.txt":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "User-agent: *\nAllow: /\n")
		case "/":
			_, _ = io.WriteString(w, "<html><head><title>Home</title></head><body><a href='/gz'>z</a></body></html>")
		case "/gz":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(zipped.Bytes())
		case "/plain":
			_, _ = io.WriteString(w, "<html><head><title>Plain</title></head></html>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := filepath.Join(t.TempDir(), "warc")
	st := openStore(t)
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth = true, 3
	opts.AllowedDomains = []string{strings.TrimPrefix(srv.URL, "http://")}
	spec := jobs.Spec{ID: "warc-job", Group: testGroup, Seeds: []string{srv.URL + "/"}, Options: opts, BatchSize: 10, WARCPath: dir}
	crawlJob(t, st, spec)

	titles := map[string]string{}
	require.NoError(t, st.Results(testCtx(t), spec.ID, func(p jobs.PageRecord) error {
		titles[strings.TrimPrefix(p.URL, srv.URL)] = p.Title
		return nil
	}))
	assert.Equal(t, map[string]string{"/": "Home", "/gz": "Zipped", "/plain": "Plain"}, titles)

	got := warcResponses(t, dir)
	for _, path := range []string{"/robots.txt", "/", "/gz", "/plain"} {
		assert.Len(t, got[srv.URL+path], 1, "one response record of %s", path)
	}
	if gz := got[srv.URL+"/gz"]; len(gz) == 1 {
		head, body, _ := strings.Cut(gz[0], "\r\n\r\n")
		assert.Contains(t, head, "Content-Encoding: gzip")
		assert.Equal(t, zipped.String(), body, "the body as sent, still gzip")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "warc-job-*.warc.gz"))
	assert.NotEmpty(t, files, "files named after the job")

	// warcio.js, the parser replayweb.page uses, reads every record and
	// finds every block and payload digest right.
	t.Run("warcio", func(t *testing.T) {
		out, err := warcioCheck(t, files)
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "warccheck: ")
		assert.Contains(t, string(out), " 0 invalid")
		assert.NotContains(t, string(out), "warccheck: 0 valid")
	})
}

// warcioCheck runs activities/archive/testdata/warccheck.cjs over files
// with warcio.js: $BATON_WARCIO_BIN, else <repo>/.stack/bin/warcio
// (deployments/scripts/install-warcio.sh), else warcio on $PATH. -short
// skips it; a missing warcio fails, with the install command.
func warcioCheck(t *testing.T, files []string) ([]byte, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs warcio.js (deployments/scripts/install-warcio.sh)")
	}
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	bin := os.Getenv("BATON_WARCIO_BIN")
	if bin == "" {
		bin = filepath.Join(root, ".stack", "bin", "warcio")
		if _, err := os.Stat(bin); err != nil {
			if bin, err = exec.LookPath("warcio"); err != nil {
				t.Fatal("warcio.js is not installed: run `bash deployments/scripts/install-warcio.sh` (or `make deps`), or set BATON_WARCIO_BIN")
			}
		}
	}
	real, err := filepath.EvalSymlinks(bin)
	require.NoError(t, err)
	modules := ""
	for d := filepath.Dir(real); d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			modules = d
			break
		}
	}
	require.NotEmpty(t, modules, "%s is not inside a node_modules directory", real)
	cmd := exec.Command("node", append([]string{filepath.Join(root, "activities", "archive", "testdata", "warccheck.cjs")}, files...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	return cmd.CombinedOutput()
}

func TestLimitsWARCPathUnderBodiesRoot(t *testing.T) {
	root := t.TempDir()
	l := jobs.Limits{BodiesRoot: root}
	spec := func(p string) jobs.Spec { return limitSpec(func(s *jobs.Spec) { s.WARCPath = p }) }
	requireLimitError(t, l.CheckSubmission(spec("/etc/warc")), "warc_path", "not under")
	_, err := l.Apply(spec("../out"))
	requireLimitError(t, err, "warc_path", "leaves")
	s, err := l.Apply(spec("shop/warc"))
	require.NoError(t, err)
	real, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(real, "shop", "warc"), s.WARCPath, "relative: under the root")
}
