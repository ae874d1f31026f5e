package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// testRenderStats: the job's counters count the pages recorded rendered,
// by reason, and their renders' crashes and time-outs; a page recorded
// again counts once.
func testRenderStats(t *testing.T, f *fixture) {
	urls := []string{"plain", "always", "fields", "links", "sample", "label", "slow"}
	job := f.newJob("render", 0, urls...)
	f.take(job, "b1", len(urls))
	f.claim(job, "b1", "r1", 1)
	reasons := map[string]string{"always": crawl.ReasonAlways, "fields": crawl.ReasonEmptyFields, "links": crawl.ReasonNoLinks,
		"sample": crawl.ReasonSample, "label": crawl.ReasonLabel, "slow": crawl.ReasonAlways}
	for _, u := range urls {
		errMsg := ""
		if u == "slow" {
			errMsg = "render: page did not settle within 1s (networkidle)"
		}
		p := Page(job, "b1", "r1", 1, URL(u), 0, errMsg)
		p.RenderReason, p.Rendered = reasons[u], reasons[u] != ""
		p.RenderTimedOut = u == "slow"
		if u == "label" {
			p.RenderCrashes = 1
		}
		for range 2 { // a retried write
			_, err := f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL(u), Page: p})
			require.NoError(t, err)
		}
	}
	want := jobs.RenderStats{Rendered: 6, Always: 2, AutoEmptyFields: 1, AutoNoLinks: 1, AutoSample: 1, Label: 1, Crashes: 1, TimedOut: 1}
	st := f.stats(job)
	assert.Equal(t, want, st.Render)
	assert.Equal(t, 7, st.Recorded)
	assert.Equal(t, "6 (always 2, auto: empty fields 1, auto: no links 1, auto: sample 1, label 1), 1 tab crashes, 1 timed out", st.Render.Summary())
	other := f.newJob("plain", 0, "a")
	f.take(other, "b1", 1)
	f.claim(other, "b1", "r1", 1)
	f.record(other, "b1", "r1", 1, URL("a"))
	assert.Equal(t, jobs.RenderStats{}, f.stats(other).Render, "a job that rendered nothing")
}
