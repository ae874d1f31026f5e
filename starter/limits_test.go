package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// The CLI refuses a job above the group's limits with exit code 2, naming
// its own flag, the value, the cap and the workers' flag; the defaults of
// --max-body-bytes and --timeout not given are lowered to the caps.
func TestCheckGroupLimits(t *testing.T) {
	l := jobs.Limits{MaxBodyBytes: 1 << 20, MaxTimeout: 5 * time.Second, MaxDelay: time.Second, BodiesRoot: "/srv/bodies"}
	check := func(args []string, mod func(*jobs.Spec)) (jobs.Spec, error) {
		cmd := crawlCmd(&globals{}, &temporalFlags{})
		require.NoError(t, cmd.Flags().Parse(args))
		spec := jobs.Spec{ID: "j", Group: "g", Seeds: []string{"http://example.com/"}, Options: crawl.DefaultOptions()}
		if mod != nil {
			mod(&spec)
		}
		err := checkGroupLimits(cmd, l, &spec)
		return spec, err
	}
	spec, err := check(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), spec.Options.MaxBodyBytes, "the 10 MiB default lowered to the cap")
	assert.Equal(t, 5*time.Second, spec.Options.Timeout)

	for _, c := range []struct {
		args []string
		mod  func(*jobs.Spec)
		msg  string
	}{
		{[]string{"--max-body-bytes", "5000000"}, func(s *jobs.Spec) { s.Options.MaxBodyBytes = 5000000 },
			"invalid crawl: --max-body-bytes: 5000000 is above this group's cap of 1048576 (the workers' --max-job-body-bytes)"},
		// --max-body, the deprecated name of --max-body-bytes, counts as given.
		{[]string{"--max-body", "5000000"}, func(s *jobs.Spec) { s.Options.MaxBodyBytes = 5000000 },
			"invalid crawl: --max-body-bytes: 5000000 is above this group's cap of 1048576 (the workers' --max-job-body-bytes)"},
		{[]string{"--timeout", "1m"}, func(s *jobs.Spec) { s.Options.Timeout = time.Minute },
			"invalid crawl: --timeout: 1m0s is above this group's cap of 5s (the workers' --max-job-timeout)"},
		{nil, func(s *jobs.Spec) { s.Options.Delay = time.Minute },
			"invalid crawl: --delay: 1m0s is above this group's cap of 1s (the workers' --max-job-delay)"},
		{nil, func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, "/etc/x" },
			`invalid crawl: --bodies-dir: "/etc/x" is not under this group's bodies root /srv/bodies (the workers' --bodies-root)`},
		{nil, func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, "a/../../x" },
			`invalid crawl: --bodies-dir: "a/../../x" leaves this group's bodies root /srv/bodies`},
	} {
		_, err := check(c.args, c.mod)
		require.Error(t, err, "%v", c.args)
		assert.Equal(t, exitcode.Usage, exitcode.Of(err))
		assert.Contains(t, err.Error(), c.msg)
	}
	_, err = check(nil, func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, "shop" })
	require.NoError(t, err, "a relative directory is the Runners' to resolve under their root")
}
