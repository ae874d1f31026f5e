package testsuite_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file is BenchmarkPostgresCrawl's second arm: with
// BATON_BENCH_WORKER_ARGS_B set (worker flags, space-separated, e.g.
// "--gc-percent 100"), every second run of each case (-count=2N runs each
// case 2N times in a row) starts its workers with those flags too, so the
// two settings alternate in one process, run after run, instead of being
// measured minutes apart (the start of a crawl drifts by tens of
// milliseconds from one minute to the next on the 2-core machine). Each
// run's line says which arm it was; at the end the benchmark logs, per case
// and arm, the medians of the first 500 pages, of Baton's lead or lag on
// bare Colly's start just before it, and of pages/s.

// workerArgsB returns the second arm's worker flags (nil: one arm).
func workerArgsB() []string { return strings.Fields(os.Getenv("BATON_BENCH_WORKER_ARGS_B")) }

// armSample is one run's figures.
type armSample struct{ first500, lag, rate float64 }

// armRuns collects the runs of each case by arm. The cases run one at a
// time: not for concurrent use.
type armRuns struct {
	runs    map[string]int             // case → runs so far
	cases   []string                   // in the order they first ran
	samples map[string]*[2][]armSample // case → arm (0: A, 1: B) → runs
}

func newArmRuns() *armRuns {
	return &armRuns{runs: map[string]int{}, samples: map[string]*[2][]armSample{}}
}

// next returns the arm of name's next run: A (0) first, then B (1), and so
// on; always A without a second arm.
func (a *armRuns) next(name string, twoArms bool) int {
	n := a.runs[name]
	a.runs[name] = n + 1
	if n == 0 {
		a.cases = append(a.cases, name)
		a.samples[name] = &[2][]armSample{}
	}
	if !twoArms {
		return 0
	}
	return n % 2
}

// add records one run of name (next was called for it) in arm.
func (a *armRuns) add(name string, arm int, first500, lag, rate float64) {
	a.samples[name][arm] = append(a.samples[name][arm], armSample{first500, lag, rate})
}

// summary is one line per case that ran both arms.
func (a *armRuns) summary(argsB []string) []string {
	var out []string
	for _, c := range a.cases {
		s := a.samples[c]
		if len(s[0]) == 0 || len(s[1]) == 0 {
			continue
		}
		m := func(arm int, f func(armSample) float64) float64 {
			v := make([]float64, len(s[arm]))
			for i, x := range s[arm] {
				v[i] = f(x)
			}
			return median(v)
		}
		first500 := func(x armSample) float64 { return x.first500 }
		lag := func(x armSample) float64 { return x.lag }
		rate := func(x armSample) float64 { return x.rate }
		out = append(out, fmt.Sprintf("%s, medians of %d runs (A: as given) and %d (B: with %s): first 500 pages %.1f ms against %.1f; Baton − bare Colly just before %+.1f ms against %+.1f; %.1f pages/s against %.1f",
			c, len(s[0]), len(s[1]), strings.Join(argsB, " "), m(0, first500), m(1, first500), m(0, lag), m(1, lag), m(0, rate), m(1, rate)))
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// logArms logs the summary when the benchmark ends.
func logArms(b *testing.B, a *armRuns) {
	argsB := workerArgsB()
	if len(argsB) == 0 {
		return
	}
	b.Cleanup(func() {
		for _, l := range a.summary(argsB) {
			b.Log(l)
		}
	})
}

// The second arm alternates run after run per case, and the summary gives
// each arm's medians; with one arm every run is A and nothing is summed up.
func TestArmRunsAlternateAndSummarise(t *testing.T) {
	a := newArmRuns()
	var got []int
	for i := 0; i < 4; i++ {
		arm := a.next("3000pages/3x8", true)
		got = append(got, arm)
		a.add("3000pages/3x8", arm, float64(500+10*i), float64(i), 1000)
	}
	assert.Equal(t, []int{0, 1, 0, 1}, got)
	assert.Equal(t, 0, a.next("3000pages/1x24", false))
	assert.Equal(t, 0, a.next("3000pages/1x24", false))
	lines := a.summary([]string{"--gc-percent", "100"})
	require.Len(t, lines, 1, "only the case that ran both arms")
	assert.True(t, strings.HasPrefix(lines[0], "3000pages/3x8, medians of 2 runs (A: as given) and 2 (B: with --gc-percent 100): first 500 pages 510.0 ms against 520.0; Baton − bare Colly just before +1.0 ms against +2.0"), lines[0])
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
}
