package jobs_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// A handler that panics fails its page with an error that says so once,
// and the log line names the instance and the job's crawler each once.
func TestRunBatchHandlerPanicIsSaidOnce(t *testing.T) {
	const base = "http://127.0.0.1:1"
	e := newBatchEnv(t, 1, []string{base + "/boom"}, func(s *jobs.Spec) {
		s.Crawler, s.CrawlerVersion = "shop", "2"
		s.Options = crawl.DefaultOptions()
		s.Options.AllowedDomains = []string{"127.0.0.1"}
	})
	e.pages.pages[base+"/boom"] = htmlPage(base+"/boom", `<h1>boom</h1>`)
	c := crawler.New("shop", "2")
	c.HandleFunc("", func(context.Context, *crawler.Page) error { panic("out of range") })
	e.br.Crawlers = map[string]*crawler.Crawler{"shop": c}
	var logs bytes.Buffer
	// As a Runner's activities log: the instance is its "crawler".
	log := slog.New(slog.NewTextHandler(&logs, nil)).With("crawler", e.runner)
	out, err := e.br.RunBatch(e.ctx, jobs.BatchRun{Job: e.spec.ID, Batch: e.batch, Runner: e.runner, Epoch: e.epoch, Log: log})
	require.NoError(t, err)
	assert.Equal(t, 1, out.Ran)
	res := e.results()
	require.Len(t, res, 1)
	assert.Equal(t, "handler panicked: out of range", res[0].Error)
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "handler panicked") {
			line = l
		}
	}
	require.NotEmpty(t, line, "the panic is logged: %s", logs.String())
	assert.Equal(t, 1, strings.Count(line, " crawler="), line)
	assert.Contains(t, line, "job_crawler=shop")
}
