package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

// defaultCatchupWindow is --catchup-window's default: a firing missed
// while Temporal was down runs if Temporal is back within it.
const defaultCatchupWindow = time.Hour

// minCatchupWindow is the least catch-up window Temporal accepts.
const minCatchupWindow = 10 * time.Second

// overlapPolicies maps --overlap's values to Temporal's policies.
var overlapPolicies = map[string]enumspb.ScheduleOverlapPolicy{
	"skip":         enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer-one":   enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer-all":   enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel-other": enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"allow-all":    enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

// overlapNames lists --overlap's values in the order of the help.
var overlapNames = []string{"skip", "buffer-one", "buffer-all", "cancel-other", "allow-all"}

// overlapName is --overlap's word for a Temporal policy.
func overlapName(p enumspb.ScheduleOverlapPolicy) string {
	for n, v := range overlapPolicies {
		if v == p {
			return n
		}
	}
	if p == enumspb.SCHEDULE_OVERLAP_POLICY_UNSPECIFIED {
		return "skip"
	}
	return strings.ToLower(strings.TrimPrefix(p.String(), "SCHEDULE_OVERLAP_POLICY_"))
}

// scheduleTiming is when a schedule fires and what it does when firings
// meet: --every or --cron, --overlap, --catchup-window.
type scheduleTiming struct {
	every    time.Duration
	cron     string
	overlap  string
	catchup  time.Duration
	everySet bool
}

// check validates the timing flags and returns Temporal's spec and policy.
func (st scheduleTiming) check() (client.ScheduleSpec, enumspb.ScheduleOverlapPolicy, error) {
	var spec client.ScheduleSpec
	switch {
	case st.everySet && st.cron != "":
		return spec, 0, usage("--every and --cron exclude each other: give one")
	case st.everySet:
		if st.every < time.Second {
			return spec, 0, usage("--every %v: at least 1s", st.every)
		}
		spec.Intervals = []client.ScheduleIntervalSpec{{Every: st.every}}
	case st.cron != "":
		if err := checkCron(st.cron); err != nil {
			return spec, 0, usage("--cron %q: %v", st.cron, err)
		}
		spec.CronExpressions = []string{st.cron}
	default:
		return spec, 0, usage("when does it fire? give --every DURATION (24h) or --cron 'MIN HOUR DOM MONTH DOW' (UTC)")
	}
	policy, ok := overlapPolicies[st.overlap]
	if !ok {
		return spec, 0, usage("--overlap %q: want one of %s", st.overlap, strings.Join(overlapNames, ", "))
	}
	if st.catchup < minCatchupWindow {
		return spec, 0, usage("--catchup-window %v: at least %v (Temporal's least)", st.catchup, minCatchupWindow)
	}
	return spec, policy, nil
}

// cronField is one field of a five-field cron expression.
type cronField struct {
	name     string
	min, max int
	names    []string // names for min, min+1, …
}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: strings.Fields("jan feb mar apr may jun jul aug sep oct nov dec")},
	{name: "day of week", min: 0, max: 7, names: strings.Fields("sun mon tue wed thu fri sat")},
}

var cronMacros = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// checkCron validates a cron expression of five fields (minute hour
// day-of-month month day-of-week: '*', numbers, names, ranges a-b, lists
// and steps /n) or a macro (@daily…); an error names the bad field.
func checkCron(expr string) error {
	if strings.HasPrefix(expr, "@") {
		for _, m := range cronMacros {
			if expr == m {
				return nil
			}
		}
		return fmt.Errorf("unknown macro: want one of %s, or five fields", strings.Join(cronMacros, ", "))
	}
	fields := strings.Fields(expr)
	if len(fields) != len(cronFields) {
		return fmt.Errorf("%d fields, want 5: minute hour day-of-month month day-of-week", len(fields))
	}
	for i, f := range fields {
		if err := cronFields[i].check(f); err != nil {
			return fmt.Errorf("field %d (%s): %w", i+1, cronFields[i].name, err)
		}
	}
	return nil
}

func (cf cronField) check(s string) error {
	for _, part := range strings.Split(s, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			if n, err := strconv.Atoi(step); err != nil || n < 1 {
				return fmt.Errorf("step %q: want a whole number >= 1", step)
			}
		}
		if rng == "*" {
			continue
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		a, err := cf.value(lo)
		if err != nil {
			return err
		}
		if isRange {
			b, err := cf.value(hi)
			if err != nil {
				return err
			}
			if b < a {
				return fmt.Errorf("range %s: its end is before its start", rng)
			}
		}
	}
	return nil
}

func (cf cronField) value(s string) (int, error) {
	for i, n := range cf.names {
		if strings.EqualFold(s, n) {
			return cf.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < cf.min || v > cf.max {
		return 0, fmt.Errorf("%q is not %d-%d%s", s, cf.min, cf.max, cf.namesHint())
	}
	return v, nil
}

func (cf cronField) namesHint() string {
	if len(cf.names) == 0 {
		return ""
	}
	return " or " + cf.names[0] + "-" + cf.names[len(cf.names)-1]
}

// scheduleNameTimeLen is the length of the "-<UTC time>" a schedule's job
// names end with.
var scheduleNameTimeLen = len("-" + workflows.ScheduleJobTimeFormat)

// checkScheduleName refuses a name whose jobs' IDs would be invalid.
func checkScheduleName(name string) error {
	if err := jobs.ValidID(name + "-" + strings.Repeat("0", 8) + "T000000Z"); err != nil || strings.ContainsAny(name, "/") {
		return usage("schedule name %q: use 1-%d letters, digits, '.', '_' or '-' (its jobs are named NAME-<UTC time>)", name, 128-scheduleNameTimeLen)
	}
	return nil
}
