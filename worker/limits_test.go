package worker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/cmdline/flagenv"
	"github.com/batoncrawl/baton/activities/jobs"
)

func parseConfig(t *testing.T, args ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	flagenv.Document(fs, "BATON")
	require.NoError(t, fs.Parse(args))
	require.NoError(t, flagenv.Bind(fs))
	return cfg
}

// The operator limits: no caps by default (today's behaviour), the bodies
// root under the data directory; flags and BATON_ variables set them.
func TestLimitsFlags(t *testing.T) {
	for _, v := range []string{"BATON_MAX_JOB_BODY_BYTES", "BATON_MAX_JOB_TIMEOUT", "BATON_MAX_JOB_DELAY", "BATON_BODIES_ROOT", "BATON_DATA_DIR"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	cfg := parseConfig(t, "--data-dir", "/var/lib/baton")
	l, err := cfg.Limits()
	require.NoError(t, err)
	assert.Equal(t, jobs.Limits{BodiesRoot: "/var/lib/baton/bodies"}, l, "no caps; bodies under the data directory")

	cfg = parseConfig(t, "--data-dir", "rel-data")
	l, err = cfg.Limits()
	require.NoError(t, err)
	wd, _ := os.Getwd()
	assert.Equal(t, filepath.Join(wd, "rel-data", "bodies"), l.BodiesRoot, "made absolute")

	cfg = parseConfig(t, "--max-job-body-bytes", "1048576", "--max-job-timeout", "30s", "--max-job-delay", "2s", "--bodies-root", "/srv/bodies")
	l, err = cfg.Limits()
	require.NoError(t, err)
	assert.Equal(t, jobs.Limits{MaxBodyBytes: 1 << 20, MaxTimeout: 30 * time.Second, MaxDelay: 2 * time.Second, BodiesRoot: "/srv/bodies"}, l)

	t.Setenv("BATON_MAX_JOB_BODY_BYTES", "4096")
	t.Setenv("BATON_MAX_JOB_TIMEOUT", "5s")
	t.Setenv("BATON_MAX_JOB_DELAY", "1m")
	t.Setenv("BATON_BODIES_ROOT", "/")
	cfg = parseConfig(t)
	l, err = cfg.Limits()
	require.NoError(t, err)
	assert.Equal(t, jobs.Limits{MaxBodyBytes: 4096, MaxTimeout: 5 * time.Second, MaxDelay: time.Minute, BodiesRoot: "/"}, l)
	cfg = parseConfig(t, "--max-job-timeout", "10s")
	assert.Equal(t, 10*time.Second, cfg.MaxJobTimeout, "the flag over the environment")
}

func TestLimitsFlagsBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--max-job-body-bytes", "-1"}, "--max-job-body-bytes: is -1, must be >= 0 (0: no cap)"},
		{[]string{"--max-job-timeout", "-1s"}, "--max-job-timeout: is -1s, must be >= 0"},
		{[]string{"--max-job-delay", "-1s"}, "--max-job-delay: is -1s, must be >= 0"},
		{[]string{"--max-job-body-bytes", "big"}, `invalid argument "big" for "--max-job-body-bytes" flag`},
	} {
		_, errw, code := runWorker(t, append([]string{"--name", "sc-crawler_1"}, tc.args...)...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", tc.args, errw)
		assert.Contains(t, errw, tc.msg, "%v", tc.args)
	}
}
