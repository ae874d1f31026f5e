package testsuite_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
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

// armRuns collects the runs of each case by arm. Safe for concurrent use.
type armRuns struct {
	mu    sync.Mutex
	runs  map[string]int // case → runs so far
	cases []string
	// case → arm (0: A, 1: B) → samples
	first500, lag, rate map[string]*[2][]float64
}

func newArmRuns() *armRuns {
	return &armRuns{runs: map[string]int{}, first500: map[string]*[2][]float64{}, lag: map[string]*[2][]float64{}, rate: map[string]*[2][]float64{}}
}

// next returns the arm of name's next run: A (0) first, then B (1), and so
// on; always A without a second arm.
func (a *armRuns) next(name string, twoArms bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.runs[name]
	a.runs[name] = n + 1
	if n == 0 {
		a.cases = append(a.cases, name)
	}
	if !twoArms {
		return 0
	}
	return n % 2
}

// add records one run of name in arm.
func (a *armRuns) add(name string, arm int, first500, lag, rate float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range []struct {
		to map[string]*[2][]float64
		v  float64
	}{{a.first500, first500}, {a.lag, lag}, {a.rate, rate}} {
		if m.to[name] == nil {
			m.to[name] = &[2][]float64{}
		}
		m.to[name][arm] = append(m.to[name][arm], m.v)
	}
}

// summary is one line per case that ran both arms.
func (a *armRuns) summary(argsB []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.cases {
		f, l, r := a.first500[c], a.lag[c], a.rate[c]
		if f == nil || len(f[0]) == 0 || len(f[1]) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s, medians of %d runs (A: as given) and %d (B: with %s): first 500 pages %.1f ms against %.1f; Baton − bare Colly just before %+.1f ms against %+.1f; %.1f pages/s against %.1f",
			c, len(f[0]), len(f[1]), strings.Join(argsB, " "), median(f[0]), median(f[1]), median(l[0]), median(l[1]), median(r[0]), median(r[1])))
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
