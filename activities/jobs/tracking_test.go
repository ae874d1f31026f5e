package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// Seeds lose their tracking parameters unless the job keeps them, so that
// a seed and the same page linked with ?utm_source=... are one URL.
func TestJobStartStripsTrackingParams(t *testing.T) {
	f := newFixture(t, 1, 0)
	seeds := []string{"http://example.test/a?utm_source=news&id=1", "http://example.test/a?id=1&fbclid=x", "http://example.test/a?id=1"}
	for _, tt := range []struct {
		id   string
		keep bool
		want []string
	}{
		{"job-strip", false, []string{"http://example.test/a?id=1"}},
		{"job-keep", true, []string{"http://example.test/a?id=1&utm_source=news", "http://example.test/a?fbclid=x&id=1", "http://example.test/a?id=1"}},
	} {
		spec := f.spec(tt.id, 10, seeds...)
		spec.Options.KeepTrackingParams = tt.keep
		st := f.start(spec)
		assert.Equal(t, jobs.Stats{Seen: len(tt.want), Queued: len(tt.want)}, st, tt.id)
		_, err := f.store.TakeBatch(f.ctx, spec.ID, "take-all", 10)
		require.NoError(t, err)
		assert.ElementsMatch(t, tt.want, urlsOf(f.entries(spec.ID, "take-all")), tt.id)
		got, err := f.store.Spec(f.ctx, spec.ID)
		require.NoError(t, err)
		assert.Equal(t, tt.keep, got.Options.KeepTrackingParams, "the option is stored with the job")
	}
}
