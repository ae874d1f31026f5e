package jobs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/archive/archivetest"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// recrawlSite is a site that changes between two runs: /etag answers 304
// to its ETag, /lm to its Last-Modified only, /changing changes its price
// (and ETag) with the version, /same has no validator and the same price
// under a new timestamp, /gone is linked and served in version 1 only,
// /new in version 2 only. /deep is linked from /etag alone: a 304 must
// still lead there.
type recrawlSite struct {
	srv     *httptest.Server
	version atomic.Int32
	mu      sync.Mutex
	full    map[string]int // 200 answers by path
	not     map[string]int // 304 answers by path
	ims     map[string]string
}

func newRecrawlSite(t *testing.T) *recrawlSite {
	s := &recrawlSite{full: map[string]int{}, not: map[string]int{}, ims: map[string]string{}}
	s.version.Store(1)
	const modified = "Fri, 27 Nov 2026 03:00:00 GMT"
	page := func(title, price, links string) string {
		return fmt.Sprintf(`<html><head><title>%s</title></head><body><p class="price">%s</p>%s<!-- %d --></body></html>`,
			title, price, links, time.Now().UnixNano())
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := s.version.Load()
		w.Header().Set("Content-Type", "text/html")
		etag, body := "", ""
		switch r.URL.Path {
		case "/robots.txt":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "User-agent: *\nAllow: /\n")
			return
		case "/":
			links := `<a href="/etag">e</a><a href="/lm">l</a><a href="/changing">c</a><a href="/same">s</a>`
			if v == 1 {
				links += `<a href="/gone">g</a>`
			} else {
				links += `<a href="/new">n</a>`
			}
			etag, body = fmt.Sprintf(`"home-%d"`, v), page("Home", "-", links)
		case "/etag":
			etag, body = `"etag-1"`, page("Etag", "10", `<a href="/deep">d</a>`)
		case "/deep":
			etag, body = `W/"deep-1"`, page("Deep", "11", "")
		case "/lm":
			w.Header().Set("Last-Modified", modified)
			s.mu.Lock()
			s.ims[r.URL.Path] = r.Header.Get("If-Modified-Since")
			s.mu.Unlock()
			if r.Header.Get("If-Modified-Since") == modified {
				s.count(r.URL.Path, http.StatusNotModified)
				w.WriteHeader(http.StatusNotModified)
				return
			}
			body = page("LM", "12", "")
		case "/changing":
			etag, body = fmt.Sprintf(`"changing-%d"`, v), page("Changing", fmt.Sprint(20+v), "")
		case "/same":
			body = page("Same", "30", "")
		case "/gone", "/new":
			if (r.URL.Path == "/gone") != (v == 1) {
				http.NotFound(w, r)
				return
			}
			body = page(r.URL.Path, "40", "")
		default:
			http.NotFound(w, r)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
			if r.Header.Get("If-None-Match") == etag {
				s.count(r.URL.Path, http.StatusNotModified)
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		s.count(r.URL.Path, http.StatusOK)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *recrawlSite) count(path string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == http.StatusNotModified {
		s.not[path]++
	} else {
		s.full[path]++
	}
}

// reset clears the counts and moves the site to version v.
func (s *recrawlSite) reset(v int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.full, s.not = map[string]int{}, map[string]int{}
	s.version.Store(v)
}

func (s *recrawlSite) counts() (full, not map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full, s.not
}

func (s *recrawlSite) spec(id, baseline string) jobs.Spec {
	opts := crawl.DefaultOptions()
	opts.Follow, opts.MaxDepth = true, 5
	opts.AllowedDomains = []string{strings.TrimPrefix(s.srv.URL, "http://")}
	opts.Selectors = map[string]string{"price": ".price"}
	return jobs.Spec{ID: id, Group: testGroup, Seeds: []string{s.srv.URL + "/"}, Options: opts, BatchSize: 20, Baseline: baseline}
}

func pagesOf(t *testing.T, st jobs.Store, job, prefix string) map[string]jobs.PageRecord {
	t.Helper()
	out := map[string]jobs.PageRecord{}
	require.NoError(t, st.Results(testCtx(t), job, func(p jobs.PageRecord) error {
		out[strings.TrimPrefix(p.URL, prefix)] = p
		return nil
	}))
	return out
}

// A run with a baseline sends the baseline's validators: the pages the
// server answers 304 are recorded unchanged with the baseline's title,
// fields and links (their links are crawled), none of them is downloaded
// again; a page with the same extracted content is unchanged, one with
// other content changed, a URL new to the run new, and the baseline's
// page not seen again is counted gone.
func TestRecrawlConditionalRequests(t *testing.T) {
	site := newRecrawlSite(t)
	st := openStore(t)
	crawlJob(t, st, site.spec("run-1", ""))
	first := pagesOf(t, st, "run-1", site.srv.URL)
	require.Len(t, first, 7, "%v", first)
	for path, p := range first {
		assert.Equal(t, jobs.ChangeNew, p.Change, "%s without a baseline", path)
	}

	site.reset(2)
	crawlJob(t, st, site.spec("run-2", "run-1"))
	full, not := site.counts()
	for _, path := range []string{"/etag", "/deep", "/lm"} {
		assert.Zero(t, full[path], "%s downloaded again in full", path)
		assert.Equal(t, 1, not[path], "%s answered 304", path)
	}
	assert.Equal(t, 1, full["/changing"])
	assert.Equal(t, 1, full["/new"])
	assert.Zero(t, full["/gone"]+not["/gone"], "/gone is no longer linked")

	second := pagesOf(t, st, "run-2", site.srv.URL)
	// "/": its links changed, not its title or price.
	want := map[string]string{"/": jobs.ChangeUnchanged, "/etag": jobs.ChangeUnchanged, "/deep": jobs.ChangeUnchanged,
		"/lm": jobs.ChangeUnchanged, "/changing": jobs.ChangeChanged, "/same": jobs.ChangeUnchanged, "/new": jobs.ChangeNew}
	got := map[string]string{}
	for path, p := range second {
		got[path] = p.Change
	}
	assert.Equal(t, want, got)
	for _, path := range []string{"/etag", "/deep", "/lm"} {
		p, was := second[path], first[path]
		assert.Equal(t, http.StatusNotModified, p.StatusCode, path)
		assert.Equal(t, was.Title, p.Title, "%s: the baseline's title", path)
		assert.Equal(t, was.Fields, p.Fields, "%s: the baseline's fields", path)
		assert.Equal(t, was.Links, p.Links, "%s: the baseline's links", path)
		assert.Empty(t, p.Error, path)
	}
	assert.Equal(t, []string{"21"}, first["/changing"].Fields["price"])
	assert.Equal(t, []string{"22"}, second["/changing"].Fields["price"])

	ch, err := st.Changes(testCtx(t), "run-2", "run-1")
	require.NoError(t, err)
	assert.Equal(t, jobs.ChangeStats{New: 1, Changed: 1, Unchanged: 5, Gone: 1,
		SavedBytes: first["/etag"].Bytes + first["/deep"].Bytes + first["/lm"].Bytes}, ch)
	rep, err := jobs.BuildReport(testCtx(t), st, "run-2")
	require.NoError(t, err)
	require.NotNil(t, rep.Changes)
	assert.Equal(t, ch, *rep.Changes)
	var out strings.Builder
	require.NoError(t, rep.Write(&out))
	assert.Contains(t, out.String(), "1 new, 1 changed, 5 unchanged, 1 gone against run-1")

	// A third run against the second: a page the second got as a 304
	// keeps the first's validators, so it is a 304 again.
	site.reset(2)
	crawlJob(t, st, site.spec("run-3", "run-2"))
	full, not = site.counts()
	for _, path := range []string{"/etag", "/deep", "/lm", "/changing"} {
		assert.Zero(t, full[path], "%s downloaded again in full", path)
		assert.Equal(t, 1, not[path], "%s answered 304", path)
	}
}

// A user crawler's page answered 304 reaches no handler: the baseline's
// links are queued and its items carried over with their IDs.
func TestRecrawlUserCrawlerCarriesItemsOver(t *testing.T) {
	site := newRecrawlSite(t)
	var handled atomic.Int32
	c := crawler.New("recrawl", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		handled.Add(1)
		p.Find("a").Each(func(_ int, s *crawler.Selection) {
			href, _ := s.Attr("href")
			p.Enqueue(href, "", nil)
		})
		return p.Push(map[string]any{"title": p.Text("title"), "price": p.Text(".price")})
	})
	st := openStore(t)
	run := func(id, baseline string) {
		spec := site.spec(id, baseline)
		spec.Crawler, spec.CrawlerVersion = "recrawl", "1"
		spec.Options.Selectors = nil
		crawlJobWith(t, st, spec, map[string]*crawler.Crawler{"recrawl": c})
	}
	run("c-1", "")
	site.reset(2)
	handled.Store(0)
	run("c-2", "c-1")
	full, not := site.counts()
	assert.Zero(t, full["/etag"]+full["/deep"], "a 304 page downloaded again")
	assert.Equal(t, 1, not["/deep"], "/deep reached through the carried-over links of /etag")
	assert.Equal(t, int32(full["/"]+full["/changing"]+full["/same"]+full["/new"]), handled.Load(), "the handler runs on the pages downloaded only")

	ids := func(job string) map[string]string {
		out := map[string]string{}
		its, err := st.Items(testCtx(t), job, 0, 100)
		require.NoError(t, err)
		for _, it := range its {
			out[strings.TrimPrefix(it.URL, site.srv.URL)] = it.ID + " " + string(it.Value)
		}
		return out
	}
	was, now := ids("c-1"), ids("c-2")
	for _, path := range []string{"/etag", "/deep", "/lm"} {
		assert.NotEmpty(t, now[path], path)
		assert.Equal(t, was[path], now[path], "%s: the baseline's item, with its ID", path)
	}
	assert.NotEqual(t, was["/changing"], now["/changing"])
	second := pagesOf(t, st, "c-2", site.srv.URL)
	assert.Equal(t, 1, second["/etag"].Items)
	assert.Equal(t, jobs.ChangeUnchanged, second["/etag"].Change)
	assert.Equal(t, jobs.ChangeUnchanged, second["/same"].Change, "same items, same links")
	assert.Equal(t, jobs.ChangeChanged, second["/changing"].Change)
}

// With --warc, a recrawl archives a page answered 304 as a revisit record
// of the baseline's response record; a third run's revisits point at the
// first run's response records, never at the second's revisits; the
// files pass warcio.js's check.
func TestRecrawlWARCRevisits(t *testing.T) {
	site := newRecrawlSite(t)
	st := openStore(t)
	root := t.TempDir()
	run := func(id, baseline string) []archivetest.Record {
		spec := site.spec(id, baseline)
		spec.WARCPath = filepath.Join(root, id)
		crawlJob(t, st, spec)
		return archivetest.Read(t, archivetest.Files(t, spec.WARCPath)...)
	}
	first := run("w-1", "")
	site.reset(2)
	second := run("w-2", "w-1")
	site.reset(2)
	third := run("w-3", "w-2")

	responses := map[string]archivetest.Record{} // of the first run, by record ID
	firstOf := map[string]string{}               // response record ID by URI
	for _, r := range first {
		assert.NotEqual(t, "revisit", r.Type, "a run without a baseline writes no revisit")
		if r.Type == "response" {
			responses[r.ID], firstOf[r.URI] = r, r.ID
		}
	}
	revisits := func(recs []archivetest.Record) map[string]archivetest.Record {
		out := map[string]archivetest.Record{}
		for _, r := range recs {
			if r.Type == "revisit" {
				out[strings.TrimPrefix(r.URI, site.srv.URL)] = r
			}
		}
		return out
	}
	for i, recs := range [][]archivetest.Record{second, third} {
		rv := revisits(recs)
		for _, path := range []string{"/etag", "/deep", "/lm"} {
			r, ok := rv[path]
			require.True(t, ok, "run %d: no revisit record of %s", i+2, path)
			assert.Equal(t, "http://netpreserve.org/warc/1.1/revisit/server-not-modified", r.Profile)
			orig, ok := responses[r.RefersTo]
			require.True(t, ok, "run %d: the revisit of %s refers to %s, not to a response record of the first run", i+2, path, r.RefersTo)
			assert.Equal(t, firstOf[site.srv.URL+path], r.RefersTo)
			assert.Equal(t, orig.URI, r.RefersToURI)
			assert.NotEmpty(t, r.RefersToDate)
		}
	}
	// /changing changed in the second run (a response record), and is a
	// revisit of that record in the third.
	assert.NotContains(t, revisits(second), "/changing", "a changed page is a response record")
	var changed string
	for _, r := range second {
		if r.Type == "response" && r.URI == site.srv.URL+"/changing" {
			changed = r.ID
		}
	}
	require.NotEmpty(t, changed)
	assert.Equal(t, changed, revisits(third)["/changing"].RefersTo)
	t.Run("warcio", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(root, "*", "*.warc.gz"))
		archivetest.CheckValid(t, files...)
	})
}

// With --adaptive, a page not due is carried over from the baseline
// without a request (its links still crawled); a page due is fetched, and
// its interval grows by half when unchanged and moves to the floor when
// changed.
func TestRecrawlAdaptive(t *testing.T) {
	site := newRecrawlSite(t)
	st := openStore(t)
	adaptive := func(id, baseline string, a jobs.Adaptive) {
		spec := site.spec(id, baseline)
		spec.Adaptive = &a
		crawlJob(t, st, spec)
	}
	hour := jobs.Adaptive{Floor: time.Hour, Cap: 24 * time.Hour}
	adaptive("a-1", "", hour)
	first := pagesOf(t, st, "a-1", site.srv.URL)
	b, ok, err := st.BaselinePage(testCtx(t), "a-1", site.srv.URL+"/etag")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, time.Hour, b.Revisit.Interval, "a page's first interval is the floor")
	assert.WithinDuration(t, time.Now().Add(time.Hour), b.Revisit.NextFetch, time.Minute)

	site.reset(2)
	adaptive("a-2", "a-1", hour)
	full, not := site.counts()
	assert.Empty(t, full, "no page is due: none requested")
	assert.Empty(t, not)
	second := pagesOf(t, st, "a-2", site.srv.URL)
	require.Len(t, second, len(first), "every page carried over, those reached through carried pages too")
	for path, p := range second {
		assert.True(t, p.Carried, path)
		assert.Equal(t, jobs.ChangeUnchanged, p.Change, path)
		assert.Equal(t, first[path].Fields, p.Fields, path)
	}

	fast := jobs.Adaptive{Floor: 20 * time.Millisecond, Cap: time.Hour} // the store keeps milliseconds
	site.reset(1)
	adaptive("f-1", "", fast)
	// Every page of f-1 is due 20 ms after it was fetched: the next run
	// starts once they are (on a fast machine it could start sooner).
	var due time.Time
	for path := range pagesOf(t, st, "f-1", site.srv.URL) {
		b, ok, err := st.BaselinePage(testCtx(t), "f-1", site.srv.URL+path)
		require.NoError(t, err)
		if ok && b.Revisit.NextFetch.After(due) {
			due = b.Revisit.NextFetch
		}
	}
	require.False(t, due.IsZero(), "f-1's pages have a next fetch time")
	require.Eventually(t, func() bool { return time.Now().After(due) }, 5*time.Second, time.Millisecond)
	site.reset(2)
	adaptive("f-2", "f-1", fast)
	full, not = site.counts()
	assert.Equal(t, 1, not["/etag"], "due: fetched, conditionally")
	assert.Equal(t, 1, full["/changing"])
	interval := func(path string) time.Duration {
		b, ok, err := st.BaselinePage(testCtx(t), "f-2", site.srv.URL+path)
		require.NoError(t, err)
		require.True(t, ok, path)
		return b.Revisit.Interval
	}
	assert.Equal(t, 30*time.Millisecond, interval("/etag"), "unchanged: grows by half")
	assert.Equal(t, 20*time.Millisecond, interval("/changing"), "changed: back to the floor")
	assert.Equal(t, 20*time.Millisecond, interval("/new"), "new: the floor")
}
