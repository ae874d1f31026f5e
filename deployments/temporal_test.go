package deployments_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The Temporal servers Baton starts or ships settings for (the local
// stack's dev server, Compose's Temporal and the tests' dev server) are
// tuned alike: eager activities on, and the transfer queue read more often
// than the server's default 20 times a second per history shard (README,
// "Temporal's transfer queue read at once"). A server that lost either
// setting would make every job step 25–50 ms slower there, and the tests
// would no longer measure what a user runs.
const (
	temporalDCPath      = "compose/temporal-dynamicconfig.yaml"
	temporalHarnessPath = "../testsuite/temporal.go"
	transferPollKey     = "history.transferProcessorMaxPollRPS"
	eagerKey            = "system.enableActivityEagerExecution"
	defaultTransferPoll = 20
)

func TestTemporalTunedAlike(t *testing.T) {
	report(t, "Temporal's settings", checkTemporalTuning(readText(t, stackPath), readText(t, temporalDCPath), readText(t, temporalHarnessPath)))
}

func TestTemporalTuningCheckCatchesDrift(t *testing.T) {
	stack, dc, harness := readText(t, stackPath), readText(t, temporalDCPath), readText(t, temporalHarnessPath)
	if p := checkTemporalTuning(stack, dc, harness); len(p) > 0 {
		t.Fatalf("the real files must pass first: %v", p)
	}
	cases := map[string][3]string{
		"stack without the transfer rate": {strings.ReplaceAll(stack, transferPollKey, "history.other"), dc, harness},
		"stack at another rate":           {regexp.MustCompile(transferPollKey+`=\d+`).ReplaceAllString(stack, transferPollKey+"=500"), dc, harness},
		"stack without eager activities":  {strings.ReplaceAll(stack, eagerKey+"=true", eagerKey+"=false"), dc, harness},
		"compose without the rate":        {stack, strings.ReplaceAll(dc, transferPollKey, "history.other"), harness},
		"compose at the default":          {stack, regexp.MustCompile(`value: 1000`).ReplaceAllString(dc, "value: 20"), harness},
		"tests at another rate":           {stack, dc, regexp.MustCompile(`TransferPollRPS = \d+`).ReplaceAllString(harness, "TransferPollRPS = 200")},
		"tests without eager activities":  {stack, dc, strings.ReplaceAll(harness, eagerKey+"=true", eagerKey+"=false")},
	}
	for name, c := range cases {
		expectProblems(t, "Temporal's settings, "+name, checkTemporalTuning(c[0], c[1], c[2]))
	}
}

// checkTemporalTuning returns what differs between the three places
// Temporal's dynamic config is set, or is missing from one of them.
func checkTemporalTuning(stack, dc, harness string) []string {
	var problems []string
	rates := map[string]int{}
	// The local stack: --dynamic-config-value flags of start-dev.
	if m := regexp.MustCompile(`--dynamic-config-value\s+` + regexp.QuoteMeta(transferPollKey) + `=(\d+)`).FindStringSubmatch(stack); m != nil {
		rates[stackPath], _ = strconv.Atoi(m[1])
	} else {
		problems = append(problems, stackPath+": no --dynamic-config-value "+transferPollKey+"=N")
	}
	if !regexp.MustCompile(`--dynamic-config-value\s+` + regexp.QuoteMeta(eagerKey) + `=true`).MatchString(stack) {
		problems = append(problems, stackPath+": eager activities not on ("+eagerKey+"=true)")
	}
	// Compose: the dynamic config file the temporal service mounts.
	var doc map[string][]map[string]any
	if err := yaml.Unmarshal([]byte(dc), &doc); err != nil {
		problems = append(problems, fmt.Sprintf("%s: %v", temporalDCPath, err))
	}
	if v := doc[transferPollKey]; len(v) == 1 {
		if n, ok := v[0]["value"].(int); ok {
			rates[temporalDCPath] = n
		} else {
			problems = append(problems, fmt.Sprintf("%s: %s is %v, want a number", temporalDCPath, transferPollKey, v[0]["value"]))
		}
	} else {
		problems = append(problems, temporalDCPath+": no single value for "+transferPollKey)
	}
	if v := doc[eagerKey]; len(v) != 1 || v[0]["value"] != true {
		problems = append(problems, temporalDCPath+": eager activities not on ("+eagerKey+")")
	}
	// The tests' dev server: testsuite.TransferPollRPS, passed as a flag.
	if m := regexp.MustCompile(`(?m)^const TransferPollRPS = (\d+)$`).FindStringSubmatch(harness); m != nil {
		rates[temporalHarnessPath], _ = strconv.Atoi(m[1])
	} else {
		problems = append(problems, temporalHarnessPath+": no const TransferPollRPS = N")
	}
	if !strings.Contains(harness, `"`+transferPollKey+`="+strconv.Itoa(TransferPollRPS)`) {
		problems = append(problems, temporalHarnessPath+": the dev server is not given TransferPollRPS")
	}
	if !strings.Contains(harness, `"`+eagerKey+`=true"`) {
		problems = append(problems, temporalHarnessPath+": eager activities not on ("+eagerKey+"=true)")
	}
	want := rates[stackPath]
	for _, p := range []string{stackPath, temporalDCPath, temporalHarnessPath} {
		n, ok := rates[p]
		switch {
		case !ok:
		case n <= defaultTransferPoll:
			problems = append(problems, fmt.Sprintf("%s: %s=%d, no more than Temporal's default %d", p, transferPollKey, n, defaultTransferPoll))
		case n != want:
			problems = append(problems, fmt.Sprintf("%s: %s=%d, but %s sets %d", p, transferPollKey, n, stackPath, want))
		}
	}
	return problems
}
