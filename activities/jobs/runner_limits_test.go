package jobs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// A job above the worker's caps fails its batch with the reason, naming
// the field, its value, the cap and the Runner, and fetches nothing.
func TestRunBatchAboveTheLimitsFails(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		name  string
		mod   func(*jobs.Spec)
		parts []string
	}{
		{"body size", func(s *jobs.Spec) { s.Options.MaxBodyBytes = 5000000 },
			[]string{"options.max_body_bytes: 5000000 is above this group's cap of 1048576 (--max-job-body-bytes)"}},
		{"timeout", func(s *jobs.Spec) { s.Options.Timeout = time.Hour }, []string{"options.timeout: 1h0m0s", "cap of 1m0s", "--max-job-timeout"}},
		{"delay", func(s *jobs.Spec) { s.Options.Delay = time.Minute }, []string{"options.delay: 1m0s", "cap of 2s", "--max-job-delay"}},
		{"bodies outside the root", func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, "/etc/x" },
			[]string{`bodies_path: "/etc/x" is not under this group's bodies root ` + root, "--bodies-root"}},
		{"bodies escaping with ..", func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, "../x" },
			[]string{`bodies_path: "../x" leaves this group's bodies root`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newBatchEnv(t, 2, pageURLs(3), c.mod)
			e.br.Limits = jobs.Limits{MaxBodyBytes: 1 << 20, MaxTimeout: time.Minute, MaxDelay: 2 * time.Second, BodiesRoot: root}
			out, err := e.run()
			require.NoError(t, err, "not retried: the job cannot run here")
			assert.False(t, out.Fenced)
			assert.Contains(t, out.Failed, "job job-run: refused by the operator limits of "+e.runner)
			for _, p := range c.parts {
				assert.Contains(t, out.Failed, p)
			}
			calls, _, _ := e.pages.count()
			assert.Zero(t, calls, "nothing fetched")
			info := e.info()
			assert.Equal(t, jobs.BatchFailed, info.State)
			assert.Equal(t, out.Failed, info.Error, "the batch records the reason")
			assert.Empty(t, e.results())
		})
	}
}

// A job within the caps runs: a zero (default) body size and timeout are
// lowered to caps below the defaults, and a relative bodies directory is
// written under the bodies root.
func TestRunBatchWithinTheLimitsRuns(t *testing.T) {
	root := t.TempDir()
	urls := pageURLs(2)
	e := newBatchEnv(t, 2, urls, func(s *jobs.Spec) {
		s.Options.MaxBodyBytes, s.Options.Timeout = 0, 0
		s.Bodies, s.BodiesPath = jobs.BodiesDir, "shop"
	})
	for _, u := range urls {
		e.pages.pages[u] = crawl.Page{URL: u, FinalURL: u, StatusCode: 200, ContentType: "text/html", Body: []byte("<p>" + u), Attempts: 1}
	}
	e.br.Limits = jobs.Limits{MaxBodyBytes: 4096, MaxTimeout: 3 * time.Second, BodiesRoot: root}
	out, err := e.run()
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	assert.Equal(t, 2, out.Ran)
	for _, c := range e.pages.snapshot() {
		assert.Equal(t, int64(4096), c.opts.MaxBodyBytes, "the default lowered to the cap")
		assert.Equal(t, 3*time.Second, c.opts.Timeout)
	}
	recs := e.results()
	require.Len(t, recs, 2)
	for _, p := range recs {
		require.Equal(t, jobs.BodyFile(e.spec.ID, p.URL), p.BodyRef, p.URL)
		data, err := os.ReadFile(filepath.Join(root, "shop", p.BodyRef))
		require.NoError(t, err, "written under the bodies root")
		body, err := jobs.DecompressBody(data, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, "<p>"+p.URL, string(body))
	}
}

// A link made under the bodies root after the job was checked cannot
// lead its writes out of the root: the page is recorded, its body not.
func TestRunBatchBodiesStayUnderTheRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	urls := pageURLs(1)
	e := newBatchEnv(t, 1, urls, func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, "late" })
	e.pages.pages[urls[0]] = crawl.Page{URL: urls[0], StatusCode: 200, Body: []byte("x"), Attempts: 1}
	e.br.Limits = jobs.Limits{BodiesRoot: root}
	e.pages.gate = make(chan struct{})
	ch := e.runAsync()
	require.Eventually(t, func() bool { _, n, _ := e.pages.count(); return n == 1 }, waitLimit, 5*time.Millisecond)
	// Checked and fetching: now the job's directory becomes a link out.
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "late")))
	close(e.pages.gate)
	out, err := e.wait(ch)
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	recs := e.results()
	require.Len(t, recs, 1)
	assert.Contains(t, recs[0].BodyRef, "not stored: ")
	left, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing written outside the root")
}
