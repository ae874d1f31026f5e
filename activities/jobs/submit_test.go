package jobs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// seedSink is a jobs.SeedWriter that keeps what it is given.
type seedSink struct {
	spec    jobs.Spec
	entries []jobs.Entry
}

func (s *seedSink) CreateJob(_ context.Context, spec jobs.Spec, seeds []jobs.Entry) (jobs.Stats, error) {
	s.spec, s.entries = spec, append(s.entries, seeds...)
	return jobs.Stats{Seen: len(seeds)}, nil
}

func (s *seedSink) AddSeeds(_ context.Context, _ string, seeds []jobs.Entry) (int, error) {
	s.entries = append(s.entries, seeds...)
	return len(seeds), nil
}

// Every seed — inline, from a seed file, a sitemap, a robots.txt sitemap —
// goes through the job's one normaliser: --keep-tracking-params holds for
// all of them, and without it tracking parameters go from all of them.
func TestSubmissionOneNormaliser(t *testing.T) {
	file := filepath.Join(t.TempDir(), "seeds.txt")
	require.NoError(t, os.WriteFile(file, []byte("http://127.0.0.1:1/file?utm_source=a&id=1\n"), 0o600))
	for _, keep := range []bool{true, false} {
		sf, err := jobs.ScanSeedFile(file, nil)
		require.NoError(t, err)
		opts := crawl.DefaultOptions()
		opts.KeepTrackingParams = keep
		plan, err := jobs.Submission{ID: "j", Group: "g", Options: opts, File: sf,
			Seeds:    []string{"http://127.0.0.1:1/inline?utm_medium=b"},
			Sitemaps: []string{"http://127.0.0.1:1/map.xml?utm_campaign=c", jobs.RobotsSitemaps}}.Build()
		require.NoError(t, err)
		sink := &seedSink{}
		n, err := plan.Queue(context.Background(), sink)
		require.NoError(t, err)
		sf.Close()
		assert.Equal(t, 4, n, "the robots.txt of the inline seeds and of the file, once")
		var urls []string
		for _, e := range sink.entries {
			urls = append(urls, e.URL)
		}
		if keep {
			assert.ElementsMatch(t, []string{"http://127.0.0.1:1/inline?utm_medium=b", "http://127.0.0.1:1/map.xml?utm_campaign=c",
				"http://127.0.0.1:1/robots.txt", "http://127.0.0.1:1/file?id=1&utm_source=a"}, urls)
		} else {
			assert.ElementsMatch(t, []string{"http://127.0.0.1:1/inline", "http://127.0.0.1:1/map.xml",
				"http://127.0.0.1:1/robots.txt", "http://127.0.0.1:1/file?id=1"}, urls)
		}
		assert.Equal(t, []string{"127.0.0.1"}, sink.spec.Options.AllowedDomains, "domains default to the seeds' hosts")
	}
}

func TestSubmissionErrors(t *testing.T) {
	_, err := jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions()}.Build()
	assert.ErrorIs(t, err, jobs.ErrBadSubmission)
	assert.ErrorContains(t, err, "no seeds")

	_, err = jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), Seeds: []string{"http://127.0.0.1/"},
		StoreBodies: true, BodiesDir: "/tmp/x"}.Build()
	assert.ErrorIs(t, err, jobs.ErrBadSubmission)

	_, err = jobs.Submission{ID: "bad id!", Group: "g", Options: crawl.DefaultOptions(), Seeds: []string{"http://127.0.0.1/"}}.Build()
	assert.ErrorIs(t, err, jobs.ErrBadSpec)
	assert.ErrorContains(t, err, "id:")

	p, err := jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), Seeds: []string{"http://127.0.0.1/"},
		Cookie: map[string]string{"session": "s3cret"}}.Build()
	require.NoError(t, err)
	assert.Empty(t, p.Spec.Cookie, "secrets never travel in the spec")
	assert.False(t, p.Secrets.Empty())
}

// A seed file of any content is accepted or refused with a clear error;
// what it accepts, it reads back the same.
func FuzzScanSeedFile(f *testing.F) {
	f.Add([]byte("http://127.0.0.1:1/a\n# c\n\n  http://127.0.0.1:1/b  \n"))
	f.Add([]byte("ftp://x/\nnot a url\n"))
	f.Add([]byte("http://a.test/" + strings.Repeat("x", 3000) + "\n"))
	f.Add([]byte("\xff\xfe\x00h\x00t\x00t\x00p"))
	f.Add([]byte("http://a.test/\r\nhttp://b.test/\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := filepath.Join(t.TempDir(), "seeds.txt")
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sf, err := jobs.ScanSeedFile(name, nil)
		if err != nil {
			if !errors.Is(err, jobs.ErrBadSubmission) {
				t.Fatalf("error not a bad submission: %v", err)
			}
			return
		}
		defer sf.Close()
		n := 0
		if err := sf.Each(func(string) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != sf.Count() {
			t.Fatalf("scanned %d, read back %d", sf.Count(), n)
		}
	})
}
