package testsuite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/testsuite"
)

// TestSeedsFileKeepsTrackingParams: a seed file's URLs are normalised with
// the job's options, as typed seeds are, so --keep-tracking-params keeps
// utm_source in both (the CLI's seed-file path once used the default
// normaliser and dropped it).
func TestSeedsFileKeepsTrackingParams(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0)
	js := c.OpenStore()
	seeds := filepath.Join(t.TempDir(), "seeds.txt")
	require.NoError(t, os.WriteFile(seeds, []byte("http://127.0.0.1:1/from-file?utm_source=news&id=1\n"), 0o600))
	for _, tc := range []struct {
		id, want, wantMap string
		keep              bool
	}{{"keep", "http://127.0.0.1:1/from-file?id=1&utm_source=news", "http://127.0.0.1:1/map.xml?utm_source=m", true},
		{"drop", "http://127.0.0.1:1/from-file?id=1", "http://127.0.0.1:1/map.xml", false}} {
		// --politeness job: the first job's batch keeps its hold on the
		// host, which under the group's budget the second would wait for.
		args := append(c.StarterArgs(), "crawl", "--id", tc.id, "--politeness", "job", "--seeds-file", seeds,
			"http://127.0.0.1:1/typed?utm_source=x", "--sitemap", "http://127.0.0.1:1/map.xml?utm_source=m")
		if tc.keep {
			args = append(args, "--keep-tracking-params")
		}
		r := runCLI(t, c.Starter, nil, args...)
		require.Equal(t, 0, r.code, r.stderr)
		b, err := js.TakeBatch(context.Background(), tc.id, "look", 10)
		require.NoError(t, err)
		require.Equal(t, 3, b.Size)
		es, err := js.Entries(context.Background(), tc.id, "look")
		require.NoError(t, err)
		var urls []string
		for _, e := range es {
			urls = append(urls, e.URL)
		}
		assert.Contains(t, urls, tc.want, "--keep-tracking-params %v", tc.keep)
		assert.Contains(t, urls, tc.wantMap, "--keep-tracking-params %v holds for --sitemap", tc.keep)
	}
}
