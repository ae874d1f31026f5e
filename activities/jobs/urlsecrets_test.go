package jobs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// A seed's user:password and the values of --secret-params leave the
// spec (inline seeds, sitemaps, the seed file as it is queued) for the
// sealed secrets, and come back only in a Runner's memory.
func TestSubmissionSealsURLSecrets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "seeds.txt")
	require.NoError(t, os.WriteFile(file, []byte("http://127.0.0.1:1/file?token=file-tok-1&page=3\n"), 0o600))
	sf, err := jobs.ScanSeedFile(file, nil)
	require.NoError(t, err)
	defer sf.Close()
	plan, err := jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), File: sf, SecretParams: []string{"token", "sig"},
		Seeds:    []string{"http://ann:pw-sec-2@127.0.0.1:2/a?token=tok-sec-3&q=1"},
		Sitemaps: []string{"http://127.0.0.1:2/map.xml?sig=sig-sec-4"}}.Build()
	require.NoError(t, err)
	sink := &seedSink{}
	_, err = plan.Queue(context.Background(), sink)
	require.NoError(t, err)
	enc, err := json.Marshal(sink.spec)
	require.NoError(t, err)
	entries, err := json.Marshal(sink.entries)
	require.NoError(t, err)
	for _, v := range []string{"file-tok-1", "pw-sec-2", "tok-sec-3", "sig-sec-4"} {
		assert.NotContains(t, string(enc), v, "a secret in the spec")
		assert.NotContains(t, string(entries), v, "a secret in the frontier")
		assert.Contains(t, plan.Secrets.Values(), v)
	}
	assert.Equal(t, []string{"http://REDACTED@127.0.0.1:2/a?token=REDACTED&q=1"}, sink.spec.Seeds)
	var urls []string
	for _, e := range sink.entries {
		urls = append(urls, e.URL)
	}
	assert.Contains(t, urls, "http://127.0.0.1:1/file?page=3&token=REDACTED")
	assert.Equal(t, []string{"user:password of http://127.0.0.1:2", "parameter token of http://127.0.0.1:2",
		"parameter sig of http://127.0.0.1:2", "parameter token of http://127.0.0.1:1"}, sink.spec.Secrets)
	back := plan.Secrets.Apply(plan.Spec)
	require.NotNil(t, back.URLSecrets)
	assert.Equal(t, "http://127.0.0.1:1/x?token=REDACTED", back.URLSecrets.Redact("http://127.0.0.1:1/x?token=file-tok-1"))

	// One value per origin and parameter.
	_, err = jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), SecretParams: []string{"token"},
		Seeds: []string{"http://127.0.0.1:2/a?token=val-a", "http://127.0.0.1:2/b?token=val-b"}}.Build()
	require.ErrorIs(t, err, jobs.ErrBadSubmission)
	assert.Contains(t, err.Error(), "seed 2")
	assert.NotContains(t, err.Error(), "val-")
}

// The --set values of the keys a crawler declares secret are sealed; the
// others stay in the spec. A Runner gets them all back.
func TestSubmissionSealsSecretSettings(t *testing.T) {
	plan, err := jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), Seeds: []string{"http://127.0.0.1:1/"},
		Crawler: "login", CrawlerOptions: map[string]string{"user": "ann", "password": "pw-sec-9"}, SecretSettings: []string{"password"}}.Build()
	require.NoError(t, err)
	enc, err := json.Marshal(plan.Spec)
	require.NoError(t, err)
	assert.NotContains(t, string(enc), "pw-sec-9")
	assert.Equal(t, map[string]string{"user": "ann"}, plan.Spec.CrawlerOptions)
	assert.Equal(t, []string{"setting password"}, plan.Spec.Secrets)
	assert.Equal(t, map[string]string{"user": "ann", "password": "pw-sec-9"}, plan.Secrets.Apply(plan.Spec).CrawlerOptions)
}
