package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// nestedDivs is a page of n nested <div>s of 1 KiB of text each: the
// text of the outer one holds all the others'.
func nestedDivs(n int) string {
	var b strings.Builder
	b.WriteString("<html><body>")
	text := strings.Repeat("x", 1<<10)
	for range n {
		b.WriteString("<div>" + text)
	}
	for range n {
		b.WriteString("</div>")
	}
	b.WriteString("</body></html>")
	return b.String()
}

// A handler that pushes the text of every <div> of a page of nested
// <div>s (a half-MiB page that would make about 125 MB of items) fails
// the page at the worker's cap on a page's items, whatever the handler
// returns; nothing of its items is written; the batch goes on.
func TestNestedDivPageStopsAtItemCap(t *testing.T) {
	const base = "http://127.0.0.1:1"
	e := newBatchEnv(t, 2, []string{base + "/nested", base + "/fine"}, func(s *jobs.Spec) {
		s.Crawler, s.BatchSize = "divs", 0
		s.Options = crawl.DefaultOptions()
	})
	e.pages.pages[base+"/nested"] = htmlPage(base+"/nested", nestedDivs(500))
	e.pages.pages[base+"/fine"] = htmlPage(base+"/fine", nestedDivs(3))
	c := crawler.New("divs", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		p.Find("div").Each(func(_ int, s *crawler.Selection) {
			_ = p.Push(s.Text()) // a careless handler: errors ignored
		})
		return nil
	})
	e.br.Crawlers = map[string]*crawler.Crawler{"divs": c}
	e.br.Limits.MaxPageItemBytes = 4 << 20
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 2, out.Ran)
	recs := map[string]jobs.PageRecord{}
	require.NoError(t, e.store.Results(e.ctx, e.spec.ID, func(p jobs.PageRecord) error {
		recs[p.URL] = p
		return nil
	}))
	nested := recs[base+"/nested"]
	assert.Contains(t, nested.Error, "page items too large")
	assert.Contains(t, nested.Error, "above the cap of 4194304 (--max-page-item-bytes)")
	assert.Zero(t, nested.Items)
	assert.Empty(t, recs[base+"/fine"].Error)
	assert.Equal(t, 3, recs[base+"/fine"].Items)
	items, err := e.store.Items(e.ctx, e.spec.ID, 0, 100)
	require.NoError(t, err)
	var total int
	for _, it := range items {
		total += len(it.Value)
		assert.Equal(t, base+"/fine", it.URL)
	}
	assert.Less(t, total, 16<<10, "only the fine page's items are written")
}

// At the worker's cap of abandoned handlers (handlers past their budget
// that still run), the Runner takes no more pages of user crawlers: the
// batch stops saying why, the pages it did not handle left unfinished.
func TestAbandonedHandlersCapStopsTakingPages(t *testing.T) {
	const base = "http://127.0.0.1:1"
	e := newBatchEnv(t, 1, []string{base + "/stuck", base + "/next"}, func(s *jobs.Spec) {
		s.Crawler, s.BatchSize = "stuck", 0
		s.Options = crawl.DefaultOptions()
	})
	e.pages.pages[base+"/stuck"] = htmlPage(base+"/stuck", "<p>a</p>")
	e.pages.pages[base+"/next"] = htmlPage(base+"/next", "<p>b</p>")
	release := make(chan struct{})
	defer close(release)
	c := crawler.New("stuck", "1")
	c.Budget = 20 * time.Millisecond
	c.HandleFunc("", func(context.Context, *crawler.Page) error {
		<-release // ignores its context
		return nil
	})
	e.br.Crawlers = map[string]*crawler.Crawler{"stuck": c}
	e.br.Limits.MaxAbandonedHandlers = int(crawler.Abandoned()) + 1
	_, err := e.run()
	require.ErrorContains(t, err, "ran past their budget and still run on this worker")
	require.ErrorContains(t, err, "--max-abandoned-handlers")
	assert.Len(t, e.pages.snapshot(), 1, "a page was taken past the cap")
}

// commitSizes is a store that records the item bytes of each commit.
type commitSizes struct {
	jobs.Store
	mu    sync.Mutex
	sizes []int
}

func (c *commitSizes) RecordTake(ctx context.Context, rs []jobs.Record, take int) ([]jobs.Recorded, []jobs.Entry, error) {
	n := 0
	for _, r := range rs {
		for _, it := range r.Items {
			n += len(it.Value)
		}
	}
	c.mu.Lock()
	c.sizes = append(c.sizes, n)
	c.mu.Unlock()
	return c.Store.RecordTake(ctx, rs, take)
}

// A group commit stays within the worker's cap on a commit's items
// (--max-commit-bytes): a larger group is written in several
// transactions, every page and item once.
func TestCommitStaysWithinItsCap(t *testing.T) {
	const base = "http://127.0.0.1:1"
	var urls []string
	for i := range 12 {
		urls = append(urls, fmt.Sprintf("%s/p%d", base, i))
	}
	e := newBatchEnv(t, 4, urls, func(s *jobs.Spec) {
		s.Crawler, s.BatchSize = "big", 0
		s.Options = crawl.DefaultOptions()
	})
	for _, u := range urls {
		e.pages.pages[u] = htmlPage(u, "<p>x</p>")
	}
	c := crawler.New("big", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		return p.Push(strings.Repeat("i", 100<<10)) // 100 KiB
	})
	e.br.Crawlers = map[string]*crawler.Crawler{"big": c}
	e.br.Limits.MaxCommitBytes = 250 << 10
	cs := &commitSizes{Store: e.store}
	e.br.Store = cs
	out, err := e.run()
	require.NoError(t, err)
	assert.Equal(t, 12, out.Ran)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	total := 0
	for _, n := range cs.sizes {
		assert.LessOrEqual(t, n, 250<<10, "a commit past the cap: %v", cs.sizes)
		total += n
	}
	assert.Equal(t, 12*(100<<10+2), total, "every item once")
	items, err := e.store.Items(e.ctx, e.spec.ID, 0, 100)
	require.NoError(t, err)
	assert.Len(t, items, 12)
}
