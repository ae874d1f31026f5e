package jobs_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// page is a fake HTML page with a body for the handler.
func htmlPage(url, body string) crawl.Page {
	return crawl.Page{URL: url, FinalURL: url, StatusCode: 200, ContentType: "text/html", Attempts: 1,
		Body: []byte(body), Header: http.Header{"Content-Type": {"text/html"}}}
}

// A user crawler's batch: the handler of each URL's label runs on its
// page; its links (with label and data) and items are recorded with the
// page; a Retry error re-fetches the page; the Start hook's cookies go
// with every fetch; the engine is asked for bodies and no links.
func TestRunBatchUserCrawler(t *testing.T) {
	const base = "http://127.0.0.1:1"
	e := newBatchEnv(t, 4, []string{base + "/list"}, func(s *jobs.Spec) {
		s.Crawler, s.CrawlerVersion, s.CrawlerOptions, s.BatchSize = "shop", "2", map[string]string{"limit": "2"}, 0
		s.Options = crawl.DefaultOptions()
		s.Options.AllowedDomains = []string{"127.0.0.1"}
	})
	// The seed is queued without a label: the default handler lists.
	e.pages.pages[base+"/list"] = htmlPage(base+"/list", `<a class="p" href="/p/1">1</a><a class="p" href="p/2">2</a><a class="p" href="/p/3">3</a><a href="https://elsewhere.invalid/">x</a>`)
	for _, p := range []string{"/p/1", "/p/2"} {
		e.pages.pages[base+p] = htmlPage(base+p, `<h1>`+p+`</h1>`)
	}
	var tries atomic.Int32
	c := crawler.New("shop", "2")
	type opts struct {
		Limit int `json:"limit"`
	}
	c.Options(&opts{})
	c.Start = func(ctx context.Context, job crawler.JobInfo) ([]*http.Cookie, error) {
		return []*http.Cookie{{Name: "session", Value: "from-login"}}, nil
	}
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		limit := crawler.OptionsOf[opts](p).Limit
		n := 0
		p.Find("a.p").Each(func(_ int, s *crawler.Selection) {
			if n < limit {
				href, _ := s.Attr("href")
				p.Enqueue(href, "detail", map[string]int{"n": n})
				n++
			}
		})
		p.Enqueue("https://elsewhere.invalid/", "detail", nil) // outside the allowed domains
		return nil
	})
	c.HandleFunc("detail", func(ctx context.Context, p *crawler.Page) error {
		if p.Request.URL == base+"/p/2" && tries.Add(1) == 1 {
			return crawler.Retry(errors.New("flaky"))
		}
		var d struct{ N int }
		if err := p.UserData(&d); err != nil {
			return err
		}
		if err := p.Push(map[string]any{"h1": p.Text("h1"), "n": d.N}); err != nil {
			return err
		}
		return p.Push(map[string]any{"second": true})
	})
	e.br.Crawlers = map[string]*crawler.Crawler{"shop": c}
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 3, out.Ran, "the list and the two details it chose")

	calls := e.pages.perURL()
	assert.Equal(t, 1, calls[base+"/p/1"])
	assert.Equal(t, 2, calls[base+"/p/2"], "a Retry fetches the page again")
	assert.Zero(t, calls[base+"/p/3"], "the handler chose two links")
	for _, call := range e.pages.snapshot() {
		assert.Equal(t, "from-login", call.auth.Cookie["session"], "the Start hook's cookie goes with %s", call.req.URL)
		assert.True(t, call.opts.KeepBody)
		assert.False(t, call.opts.Follow, "links are the handler's")
	}
	items, err := e.store.Items(e.ctx, e.spec.ID, 0, 100)
	require.NoError(t, err)
	require.Len(t, items, 4)
	got := map[string]string{}
	for _, it := range items {
		got[it.URL+"#"+string(rune('0'+it.Index))] = string(it.Value)
		assert.Equal(t, "detail", it.Label)
	}
	assert.JSONEq(t, `{"h1":"/p/1","n":0}`, got[base+"/p/1#0"])
	assert.JSONEq(t, `{"h1":"/p/2","n":1}`, got[base+"/p/2#0"])
	assert.JSONEq(t, `{"second":true}`, got[base+"/p/2#1"])
	st, err := e.store.Stats(e.ctx, e.spec.ID)
	require.NoError(t, err)
	assert.Equal(t, 4, st.Items)
	var labels []string
	require.NoError(t, e.store.Results(e.ctx, e.spec.ID, func(p jobs.PageRecord) error {
		labels = append(labels, p.URL+"="+p.Label)
		if p.URL == base+"/p/2" {
			assert.Equal(t, 2, p.Items)
		}
		return nil
	}))
	assert.ElementsMatch(t, []string{base + "/list=", base + "/p/1=detail", base + "/p/2=detail"}, labels)
}

// A worker that does not carry the job's crawler at its version gives
// the batch back to the frontier, fetching nothing.
func TestRunBatchCrawlerNotCarried(t *testing.T) {
	for name, carried := range map[string]map[string]*crawler.Crawler{
		"none":          nil,
		"other version": {"shop": mustCrawler("shop", "1")},
	} {
		t.Run(name, func(t *testing.T) {
			e := newBatchEnv(t, 2, []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b"}, func(s *jobs.Spec) {
				s.Crawler, s.CrawlerVersion = "shop", "2"
			})
			e.br.Crawlers = carried
			out, err := e.run()
			require.NoError(t, err)
			assert.Zero(t, out.Ran)
			calls, _, _ := e.pages.count()
			assert.Zero(t, calls, "nothing fetched")
			st, err := e.store.Stats(e.ctx, e.spec.ID)
			require.NoError(t, err)
			assert.Equal(t, 2, st.Queued, "both URLs back in the frontier")
		})
	}
}

func mustCrawler(name, version string) *crawler.Crawler {
	c := crawler.New(name, version)
	c.HandleFunc("", func(context.Context, *crawler.Page) error { return nil })
	return c
}
