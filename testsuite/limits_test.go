package testsuite_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/testsuite"
)

// The operator's limits: workers started with --max-job-body-bytes and
// --bodies-root record them for the group; `baton crawl` refuses a job
// above them (exit 2, naming the cap) before submitting anything, an
// allowed one runs (its bodies under the root, its default body size
// lowered to the cap), and a job the CLI could not check (a group whose
// znode is gone, as an older CLI would not check) is refused by the
// Runner: its batch fails with the reason, nothing fetched.
func TestOperatorLimits(t *testing.T) {
	root := t.TempDir()
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers,
		testsuite.WithWorkerArgs("--max-job-body-bytes", "1048576", "--bodies-root", root))
	site := demosite.New(demosite.Config{Pages: 3, Seed: 5})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)
	ctx := context.Background()
	gl, err := jobs.ReadLimits(ctx, c.Meta.Store, c.Root, c.Group)
	require.NoError(t, err, "the worker records the group's limits at start")
	assert.Equal(t, jobs.Limits{MaxBodyBytes: 1 << 20, BodiesRoot: root}, gl.Limits)
	js := c.OpenStore()

	out, code := baton(c, "crawl", "--id", "too-big", "--max-body-bytes", "5000000", srv.URL+"/")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "--max-body-bytes: 5000000 is above this group's cap of 1048576 (the workers' --max-job-body-bytes)")
	out, code = baton(c, "crawl", "--id", "etc", "--bodies-dir", "/etc/x", srv.URL+"/")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, `--bodies-dir: "/etc/x" is not under this group's bodies root `+root+" (the workers' --bodies-root)")
	for _, id := range []string{"too-big", "etc"} {
		_, err := js.Spec(ctx, id)
		assert.ErrorIs(t, err, jobs.ErrNoJob, "%s: nothing submitted", id)
	}

	out, code = baton(c, "crawl", "--id", "allowed", "--bodies-dir", "shop", "--follow", "--depth", "1", srv.URL+"/", "--wait")
	require.Equal(t, 0, code, out)
	spec, err := js.Spec(ctx, "allowed")
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), spec.Options.MaxBodyBytes, "the 10 MiB default lowered to the cap")
	recs := readResults(t, js, "allowed")
	require.NotEmpty(t, recs)
	for _, p := range recs {
		require.Equal(t, jobs.BodyFile("allowed", p.URL), p.BodyRef, "%+v", p)
		_, err := os.Stat(filepath.Join(root, "shop", p.BodyRef))
		assert.NoError(t, err, "the body is under the bodies root")
	}

	// The Runner's own check: without the znode the CLI submits as given.
	require.NoError(t, c.Meta.Store.Delete(ctx, jobs.LimitsPath(c.Root, c.Group), metadata.AnyVersion))
	out, code = baton(c, "crawl", "--id", "unchecked", "--max-body-bytes", "5000000", srv.URL+"/", "--wait")
	assert.Contains(t, out, "batches failed; the last because: job unchecked: refused by the operator limits of sc-crawler_1: "+
		"options.max_body_bytes: 5000000 is above this group's cap of 1048576 (--max-job-body-bytes)", "exit %d", code)
	assert.Empty(t, readResults(t, js, "unchecked"), "nothing fetched")
	_, err = jobs.ReadLimits(ctx, c.Meta.Store, c.Root, c.Group)
	assert.True(t, errors.Is(err, jobs.ErrNoLimits))
}
