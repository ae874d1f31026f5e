package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// The spec's validation errors, as `baton crawl` shows them: the flag or
// argument the user typed, never the JSON field.
func TestSpecErrorsNameTheFlag(t *testing.T) {
	valid := func() jobs.Spec {
		return jobs.Spec{ID: "j", Group: "g", Seeds: []string{"http://127.0.0.1:1/"}, Options: crawl.DefaultOptions(),
			MaxPages: 10, BatchSize: 10, Timers: roles.DefaultTimers()}
	}
	require.NoError(t, valid().Validate())
	for _, tc := range []struct {
		mutate func(*jobs.Spec)
		want   string
	}{
		{func(s *jobs.Spec) { s.Options.MaxDepth = -1 }, "--depth: is -1, must be >= 0"},
		{func(s *jobs.Spec) { s.MaxPages = -2 }, "--max-pages: -2 is negative"},
		{func(s *jobs.Spec) { s.BatchSize = -1 }, "--batch-size: -1 is negative"},
		{func(s *jobs.Spec) { s.Options.Retries = 101 }, "--retries: is 101, must be <= 100"},
		{func(s *jobs.Spec) { s.Options.Parallelism = -1 }, "--parallelism: "},
		{func(s *jobs.Spec) { s.Options.MaxBodyBytes = -1 }, "--max-body-bytes: "},
		{func(s *jobs.Spec) { s.Options.Timeout = -1 }, "--timeout: "},
		{func(s *jobs.Spec) { s.Options.Delay = -1 }, "--delay: "},
		{func(s *jobs.Spec) { s.Options.Selectors = map[string]string{"p": "a["} }, "--select p: invalid CSS selector"},
		{func(s *jobs.Spec) { s.Options.AllowedDomains = []string{"bad domain"} }, "--allow-domain: "},
		{func(s *jobs.Spec) { s.Seeds = append(s.Seeds, "ftp://x/y") }, "SEED_URL 2: "},
		{func(s *jobs.Spec) { s.ID = "../x" }, "--id: "},
	} {
		s := valid()
		tc.mutate(&s)
		err := s.Validate()
		require.Error(t, err, tc.want)
		got := specFlagError(err).Error()
		assert.Contains(t, got, tc.want, "from %q", err)
		for _, field := range []string{"max_depth", "max_pages", "batch_size", "max_body_bytes", "selectors[", "seeds[", "allowed_domains"} {
			assert.NotContains(t, got, field, "from %q", err)
		}
	}
	assert.Equal(t, "something: else", specFlagError(errString("something: else")).Error(), "unknown fields pass through")
}

type errString string

func (e errString) Error() string { return string(e) }
