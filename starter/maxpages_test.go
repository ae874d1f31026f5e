package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/workflows"
)

// A job that stopped at --max-pages says so in crawl --wait's summary and
// in status; one below its cap says nothing of it.
func TestSummaryAndStatusSayWhenMaxPagesStoppedTheJob(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	capped := workflows.JobProgress{ID: "j", MaxPages: 1000, MaxPagesReached: true,
		JobState: workflows.JobState{State: workflows.JobCompleted, Stats: jobs.Stats{Seen: 1000, Recorded: 1000},
			StartedAt: at, FinishedAt: at.Add(time.Second)}}
	var out bytes.Buffer
	printSummary(&out, capped)
	assert.Contains(t, out.String(), "job j completed: 1000 pages (0 failed; stopped at --max-pages 1000)")
	out.Reset()
	require.NoError(t, printProgress(&out, capped))
	assert.Contains(t, out.String(), "1000 seen; stopped at --max-pages 1000")

	running := capped
	running.State = workflows.JobRunning
	out.Reset()
	require.NoError(t, printProgress(&out, running))
	assert.Contains(t, out.String(), "--max-pages 1000 reached: no more URLs taken")

	below := capped
	below.MaxPagesReached, below.Stats = false, jobs.Stats{Seen: 12, Recorded: 12}
	out.Reset()
	printSummary(&out, below)
	require.NoError(t, printProgress(&out, below))
	assert.NotContains(t, out.String(), "max-pages")
}
