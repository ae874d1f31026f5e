package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/testsuite"
)

// A bad cron expression is refused naming its field and the value at
// fault; good ones, macros included, pass.
func TestCheckCronNamesTheField(t *testing.T) {
	for expr, want := range map[string]string{
		"61 3 * * *":  `field 1 (minute): "61" is not 0-59`,
		"0 24 * * *":  `field 2 (hour): "24" is not 0-23`,
		"0 3 0 * *":   `field 3 (day of month): "0" is not 1-31`,
		"0 3 * foo *": `field 4 (month): "foo" is not 1-12 or jan-dec`,
		"0 3 * * 8":   `field 5 (day of week): "8" is not 0-7 or sun-sat`,
		"*/0 * * * *": `field 1 (minute): step "0"`,
		"0 5-2 * * *": `field 2 (hour): range 5-2: its end is before its start`,
		"0 3 * *":     "4 fields, want 5",
		"@sometimes":  "unknown macro",
	} {
		err := checkCron(expr)
		if assert.Error(t, err, expr) {
			assert.Contains(t, err.Error(), want, expr)
		}
	}
	for _, expr := range []string{"0 3 * * *", "*/15 0-6,22-23 1,15 jan-mar mon-fri", "0 0 * * SUN", "@daily", "30 2 */2 * 7"} {
		assert.NoError(t, checkCron(expr), expr)
	}
}

// The timing flags: one of --every and --cron, a known --overlap, a
// catch-up window Temporal accepts; the policy is Temporal's.
func TestScheduleTimingCheck(t *testing.T) {
	ok := scheduleTiming{every: 24 * time.Hour, everySet: true, overlap: "buffer-one", catchup: time.Hour}
	spec, policy, err := ok.check()
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, spec.Intervals[0].Every)
	assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE, policy)
	cron := scheduleTiming{cron: "0 3 * * *", overlap: "skip", catchup: time.Hour}
	spec, _, err = cron.check()
	require.NoError(t, err)
	assert.Equal(t, []string{"0 3 * * *"}, spec.CronExpressions)
	for name, c := range map[string]struct {
		st   scheduleTiming
		want string
	}{
		"neither":      {scheduleTiming{overlap: "skip", catchup: time.Hour}, "give --every DURATION"},
		"both":         {scheduleTiming{every: time.Hour, everySet: true, cron: "0 3 * * *", overlap: "skip", catchup: time.Hour}, "exclude each other"},
		"every zero":   {scheduleTiming{everySet: true, overlap: "skip", catchup: time.Hour}, "--every 0s: at least 1s"},
		"bad cron":     {scheduleTiming{cron: "0 25 * * *", overlap: "skip", catchup: time.Hour}, `--cron "0 25 * * *": field 2 (hour)`},
		"bad overlap":  {scheduleTiming{every: time.Hour, everySet: true, overlap: "terminate", catchup: time.Hour}, `--overlap "terminate": want one of skip, buffer-one`},
		"tiny catchup": {scheduleTiming{every: time.Hour, everySet: true, overlap: "skip", catchup: time.Second}, "--catchup-window 1s: at least 10s"},
	} {
		_, _, err := c.st.check()
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.want, name)
			assert.Equal(t, exitcode.Usage, exitcode.Of(err), name)
		}
	}
}

// `baton schedule create` refuses bad input with exit code 2 before it
// reaches any server (the addresses are closed ports: a dial would be exit
// code 5): a credential on the command line, a seeds file, a bad name, a
// bad timing.
func TestScheduleCreateBadUsage(t *testing.T) {
	zk, temporal := testsuite.ClosedPort(t), testsuite.ClosedPort(t)
	base := []string{"--zk-hosts", zk, "--temporal-address", temporal, "schedule", "create"}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"n", "--every", "1h", "--cookie", "s=1", "http://127.0.0.1:1/"}, "--cookie: a schedule does not take it"},
		{[]string{"n", "--every", "1h", "--authorization", "Bearer=x", "http://127.0.0.1:1/"}, "--authorization: a schedule does not take it"},
		{[]string{"n", "--every", "1h", "--header", "X-Key: 1", "http://127.0.0.1:1/"}, "--header: a schedule does not take it"},
		{[]string{"n", "--every", "1h", "--seeds-file", "urls.txt"}, "--seeds-file: a schedule does not take it"},
		{[]string{"n", "--every", "1h"}, "no seeds"},
		{[]string{"bad/name", "--every", "1h", "http://127.0.0.1:1/"}, `schedule name "bad/name"`},
		{[]string{"n", "--cron", "0 3 * * mon-foo", "http://127.0.0.1:1/"}, "field 5 (day of week)"},
		{[]string{"n", "http://127.0.0.1:1/"}, "when does it fire?"},
		{[]string{"n", "--every", "1h", "--depth", "x", "http://127.0.0.1:1/"}, "--depth"},
	} {
		_, errw, code := run(t, append(base, c.args...)...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", c.args, errw)
		assert.Contains(t, errw, c.msg, c.args)
	}
	for _, args := range [][]string{{"backfill", "n", "--from", "yesterday", "--to", "2026-01-01T00:00:00Z"}, {"show"}, {"pause", "a", "b"}} {
		_, errw, code := run(t, append([]string{"--zk-hosts", zk, "--temporal-address", temporal, "schedule"}, args...)...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", args, errw)
	}
}
