package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// User crawlers: labels and user data of frontier entries, items recorded
// with their pages (once), sink cursors and leases (ItemStore).

// labelled is an entry with a label and user data (data "" is none).
func labelled(depth int, url, label, data string) jobs.Entry {
	e := jobs.Entry{URL: url, Depth: depth, Label: label}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

// requireEntries asserts got holds want (any order), labels and data
// (as JSON) included.
func requireEntries(t *testing.T, want, got []jobs.Entry, what string) {
	t.Helper()
	require.Len(t, got, len(want), "%s: %v", what, got)
	by := map[string]jobs.Entry{}
	for _, e := range got {
		by[e.URL] = e
	}
	for _, w := range want {
		g, ok := by[w.URL]
		require.True(t, ok, "%s: %s missing in %v", what, w.URL, got)
		assert.Equal(t, w.Depth, g.Depth, "%s: depth of %s", what, w.URL)
		assert.Equal(t, w.Label, g.Label, "%s: label of %s", what, w.URL)
		if len(w.Data) == 0 {
			assert.Empty(t, g.Data, "%s: data of %s", what, w.URL)
		} else {
			assert.JSONEq(t, string(w.Data), string(g.Data), "%s: data of %s", what, w.URL)
		}
	}
}

func batchEntries(es []jobs.BatchEntry) []jobs.Entry {
	out := make([]jobs.Entry, len(es))
	for i, e := range es {
		out[i] = e.Entry
	}
	return out
}

// testEntryLabels: an entry's label and user data go into the frontier
// with its URL (CreateJob's seeds, AddSeeds, a page's links) and come back
// with it from every read of the frontier (TakeBatch's Entries, Extend,
// Unfinished).
func testEntryLabels(t *testing.T, f *fixture) {
	id := JobID(t, "j")
	seeds := []jobs.Entry{
		labelled(0, URL("list"), "LIST", `{"page":1,"tags":["a","ü"]}`),
		labelled(0, URL("plain"), "", ""),
		labelled(0, URL("detail"), "DETAIL", `"just a string"`),
	}
	_, err := f.s.CreateJob(f.ctx, Spec(id, 0, URL("list"), URL("plain"), URL("detail")), seeds)
	require.NoError(t, err)
	more := []jobs.Entry{labelled(0, URL("more"), "MORE", `[1,2,3]`), labelled(0, URL("nodata"), "NODATA", "")}
	n, err := f.s.AddSeeds(f.ctx, id, more)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	f.take(id, "b1", 2)
	requireEntries(t, seeds[:2], batchEntries(f.entries(id, "b1")), "TakeBatch")
	f.claim(id, "b1", "r1", 1)
	got, err := f.s.Extend(f.ctx, id, "b1", 1, 2)
	require.NoError(t, err)
	requireEntries(t, []jobs.Entry{seeds[2], more[0]}, got, "Extend")
	requireEntries(t, append(seeds[:3:3], more[0]), batchEntries(f.entries(id, "b1")), "Entries after Extend")

	// A page's links with labels and data.
	links := []jobs.Entry{labelled(1, URL("l1"), "DETAIL", `{"sku":"X-1","price":9.5}`), labelled(1, URL("l2"), "", `null`),
		labelled(1, URL("l3"), "LIST", "")}
	p := Page(id, "b1", "r1", 1, URL("list"), 0, "")
	p.Label = "LIST"
	r, err := f.s.Record(f.ctx, jobs.Record{Job: id, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("list"), Page: p, Links: links})
	require.NoError(t, err)
	assert.Equal(t, 3, r.Added)
	un, err := f.s.Unfinished(f.ctx, id, "b1")
	require.NoError(t, err)
	requireEntries(t, []jobs.Entry{seeds[1], seeds[2], more[0]}, un, "Unfinished")
	res := f.results(id)
	require.Len(t, res, 1)
	assert.Equal(t, "LIST", res[0].Label, "the page's label in the results")

	f.take(id, "b2", 2)
	requireEntries(t, []jobs.Entry{more[1], links[0]}, batchEntries(f.entries(id, "b2")), "TakeBatch of links")
	f.claim(id, "b2", "r2", 1)
	got, err = f.s.Extend(f.ctx, id, "b2", 1, 10)
	require.NoError(t, err)
	requireEntries(t, links[1:], got, "Extend of links")
}

// testFirstLabelWins: the frontier holds a URL once; the label and data it
// keeps are those it was queued with first, whoever queues it again.
func testFirstLabelWins(t *testing.T, f *fixture) {
	id := JobID(t, "j")
	_, err := f.s.CreateJob(f.ctx, Spec(id, 0, URL("a")), []jobs.Entry{
		labelled(0, URL("a"), "FIRST", `{"n":1}`), labelled(0, URL("a"), "SECOND", `{"n":2}`), labelled(0, URL("b"), "B", ""),
	})
	require.NoError(t, err)
	assert.Equal(t, 2, f.stats(id).Seen)
	n, err := f.s.AddSeeds(f.ctx, id, []jobs.Entry{labelled(0, URL("b"), "OTHER", `{"n":3}`), labelled(0, URL("c"), "C", `1`)})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	f.take(id, "b1", 3)
	requireEntries(t, []jobs.Entry{labelled(0, URL("a"), "FIRST", `{"n":1}`), labelled(0, URL("b"), "B", ""), labelled(0, URL("c"), "C", `1`)},
		batchEntries(f.entries(id, "b1")), "seeds")
	f.claim(id, "b1", "r1", 1)

	// Two pages of one group commit link to x: the first page's label wins;
	// a link to a seed changes nothing.
	rec := func(url string, links ...jobs.Entry) jobs.Record {
		return jobs.Record{Job: id, Batch: "b1", Runner: "r1", Epoch: 1, URL: url, Page: Page(id, "b1", "r1", 1, url, 0, ""), Links: links}
	}
	_, err = f.s.RecordAll(f.ctx, []jobs.Record{
		rec(URL("b"), labelled(1, URL("x"), "FROM-B", `{"from":"b"}`), labelled(1, URL("a"), "LINKED", `{}`)),
		rec(URL("a"), labelled(1, URL("x"), "FROM-A", `{"from":"a"}`), labelled(1, URL("y"), "Y", "")),
	})
	require.NoError(t, err)
	_, err = f.s.Record(f.ctx, rec(URL("c"), labelled(1, URL("y"), "LATER", `{"later":true}`)))
	require.NoError(t, err)
	f.take(id, "b2", 10)
	requireEntries(t, []jobs.Entry{labelled(1, URL("x"), "FROM-B", `{"from":"b"}`), labelled(1, URL("y"), "Y", "")},
		batchEntries(f.entries(id, "b2")), "links")
	es := f.entries(id, "b1")
	for _, e := range es {
		if e.URL == URL("a") {
			assert.Equal(t, "FIRST", e.Label, "a link to a seed relabelled it")
		}
	}
}

// pushed makes n items of a page, each a JSON object naming the page.
func pushed(url, label string, n int) []crawler.Pushed {
	out := make([]crawler.Pushed, n)
	for i := range out {
		v, _ := json.Marshal(map[string]any{"url": url, "i": i, "name": "ïtem"})
		out[i] = crawler.Pushed{Label: label, Index: i, Value: v}
	}
	return out
}

func (f *fixture) items(job string, after int64, limit int) []jobs.ItemRecord {
	f.t.Helper()
	its, err := f.s.Items(f.ctx, job, after, limit)
	require.NoError(f.t, err, "Items %s after %d", job, after)
	return its
}

// allItems reads every item of job, limit at a time, and checks the
// order and the IDs.
func (f *fixture) allItems(job string, limit int) []jobs.ItemRecord {
	f.t.Helper()
	var out []jobs.ItemRecord
	after := int64(0)
	for {
		its := f.items(job, after, limit)
		require.LessOrEqual(f.t, len(its), limit, "Items returned more than limit")
		for _, it := range its {
			require.Greater(f.t, it.Seq, after, "Items not in Seq order")
			after = it.Seq
			assert.Equal(f.t, job, it.Job)
			assert.Equal(f.t, crawler.ItemID(job, it.URL, it.Index), it.ID, "ID of item %d of %s", it.Index, it.URL)
		}
		out = append(out, its...)
		if len(its) < limit {
			return out
		}
	}
}

// testItemsWithPage: a page's items are recorded with it, returned in
// order with their stable IDs, and counted; a page recorded again (a
// retried write) adds none.
func testItemsWithPage(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "robots")
	f.take(job, "b1", 4)
	f.claim(job, "b1", "r1", 1)
	its := f.items(job, 0, 100)
	assert.Empty(t, its)

	pa := Page(job, "b1", "r1", 1, URL("a"), 0, "")
	pa.Label, pa.Items = "DETAIL", 3
	ra := jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"), Page: pa, Items: pushed(URL("a"), "DETAIL", 3)}
	pb := Page(job, "b1", "r1", 1, URL("b"), 0, "")
	pb.Label, pb.Skipped = "LIST", "not a product page"
	rb := jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("b"), Page: pb}
	out, err := f.s.RecordAll(f.ctx, []jobs.Record{ra, rb})
	require.NoError(t, err)
	assert.True(t, out[0].Wrote)
	rc := jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("c"), Page: Page(job, "b1", "r1", 1, URL("c"), 0, ""),
		Items: []crawler.Pushed{{Index: 0, Value: json.RawMessage(`"c0"`)}, {Label: "OTHER", Index: 1, Value: json.RawMessage(`[1,{"x":null}]`)}}}
	_, err = f.s.Record(f.ctx, rc)
	require.NoError(t, err)
	// No page (robots.txt), no items, whatever the record carries.
	_, err = f.s.Record(f.ctx, jobs.Record{Job: job, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("robots"), Items: pushed(URL("robots"), "", 2)})
	require.NoError(t, err)

	all := f.allItems(job, 100)
	require.Len(t, all, 5)
	assert.Equal(t, 5, f.stats(job).Items, "Stats.Items")
	for i, it := range all[:3] {
		assert.Equal(t, URL("a"), it.URL)
		assert.Equal(t, i, it.Index)
		assert.Equal(t, "DETAIL", it.Label)
		assert.JSONEq(t, string(ra.Items[i].Value), string(it.Value))
	}
	assert.Equal(t, URL("c"), all[3].URL)
	assert.Equal(t, 0, all[3].Index)
	assert.Equal(t, "", all[3].Label)
	assert.JSONEq(t, `"c0"`, string(all[3].Value))
	assert.Equal(t, "OTHER", all[4].Label)
	assert.JSONEq(t, `[1,{"x":null}]`, string(all[4].Value))

	// Paging: after and limit.
	assert.Equal(t, all[:2], f.items(job, 0, 2))
	assert.Equal(t, all[2:4], f.items(job, all[1].Seq, 2))
	assert.Equal(t, all[4:], f.items(job, all[3].Seq, 2))
	assert.Empty(t, f.items(job, all[4].Seq, 2))
	_, err = f.s.Items(f.ctx, JobID(t, "nope"), 0, 10)
	assert.ErrorIs(t, err, jobs.ErrNoJob)

	// A retried group commit writes no item again.
	out, err = f.s.RecordAll(f.ctx, []jobs.Record{ra, rb})
	require.NoError(t, err)
	assert.False(t, out[0].Wrote)
	assert.Equal(t, all, f.allItems(job, 3), "the items after a retried RecordAll")
	assert.Equal(t, 5, f.stats(job).Items)

	// The page records keep their label, item count and skip reason.
	labels := map[string]jobs.PageRecord{}
	for _, p := range f.results(job) {
		labels[p.URL] = p
	}
	assert.Equal(t, "DETAIL", labels[URL("a")].Label)
	assert.Equal(t, 3, labels[URL("a")].Items)
	assert.Equal(t, "LIST", labels[URL("b")].Label)
	assert.Equal(t, "not a product page", labels[URL("b")].Skipped)

	// Another job's items are its own, with their own IDs.
	other := f.newJob("k", 0, "a")
	f.take(other, "b1", 1)
	f.claim(other, "b1", "r1", 1)
	_, err = f.s.Record(f.ctx, jobs.Record{Job: other, Batch: "b1", Runner: "r1", Epoch: 1, URL: URL("a"),
		Page: Page(other, "b1", "r1", 1, URL("a"), 0, ""), Items: pushed(URL("a"), "DETAIL", 1)})
	require.NoError(t, err)
	oi := f.allItems(other, 10)
	require.Len(t, oi, 1)
	assert.NotEqual(t, all[0].ID, oi[0].ID, "the same page's item in two jobs has one ID")
	assert.Len(t, f.allItems(job, 10), 5)
	assert.Equal(t, 1, f.stats(other).Items)
}

// testItemsOnceAfterHandOver: after a hand-over the new holder records
// pages the old one had recorded (it re-fetched them) and a re-run
// records a failed page again: no item is added twice, and Stats.Items
// counts what Items returns.
func testItemsOnceAfterHandOver(t *testing.T, f *fixture) {
	job := f.newJob("j", 0, "a", "b", "c", "d")
	f.take(job, "b1", 4)
	f.claim(job, "b1", "r1", 1)
	rec := func(runner string, epoch int64, url, errMsg string, n int) jobs.Record {
		return jobs.Record{Job: job, Batch: "b1", Runner: runner, Epoch: epoch, URL: url,
			Page: Page(job, "b1", runner, epoch, url, 0, errMsg), Items: pushed(url+"#"+runner, "", n)}
	}
	_, err := f.s.RecordAll(f.ctx, []jobs.Record{rec("r1", 1, URL("a"), "", 2), rec("r1", 1, URL("d"), "HTTP 500", 1)})
	require.NoError(t, err)
	before := f.allItems(job, 10)
	require.Len(t, before, 3)

	// The backup takes the batch over at a higher epoch and re-fetches
	// a, which was in flight when the old holder went silent.
	f.claim(job, "b1", "r2", 2)
	_, err = f.s.Record(f.ctx, rec("r1", 1, URL("b"), "", 4))
	requireStale(t, err, "the old holder's Record after the hand-over")
	out, err := f.s.RecordAll(f.ctx, []jobs.Record{rec("r2", 2, URL("a"), "", 3), rec("r2", 2, URL("b"), "", 2), rec("r2", 2, URL("c"), "", 0)})
	require.NoError(t, err)
	assert.False(t, out[0].Wrote, "a is in the results already")
	assert.True(t, out[1].Wrote)
	all := f.allItems(job, 10)
	assert.Equal(t, before, all[:3], "the items of a stay as the first holder recorded them")
	require.Len(t, all, 5, "a's items again, or b's missing")
	for _, it := range all[3:] {
		assert.Equal(t, URL("b"), it.URL)
	}
	assert.Equal(t, 5, f.stats(job).Items)
	_, err = f.s.FinishBatch(f.ctx, job, "b1", 2)
	require.NoError(t, err)

	// A re-run of the failed page d: recorded again, its item not.
	n, err := f.s.RequeueFailed(f.ctx, job)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	f.take(job, "b2", 10)
	f.claim(job, "b2", "r3", 1)
	r := rec("r3", 1, URL("d"), "", 2)
	r.Batch = "b2"
	got, err := f.s.Record(f.ctx, r)
	require.NoError(t, err)
	assert.True(t, got.Wrote)
	all = f.allItems(job, 10)
	st := f.stats(job)
	assert.Equal(t, len(all), st.Items, "Stats.Items and the items stored")
	seen := map[string]bool{}
	for _, it := range all {
		assert.False(t, seen[it.ID], "item %s (%s #%d) twice", it.ID, it.URL, it.Index)
		seen[it.ID] = true
	}
	assert.Len(t, all, 6, "d's second item is new, its first was recorded with the failed page")
}

// testConcurrentItems: goroutines record cross-linked pages with items in
// concurrent group commits (each group twice, a retry racing the first
// attempt), while a sink-like reader follows the items with a cursor:
// every item is stored once, Items returns them all in Seq order with
// stable IDs, and the reader, which only ever asks for items past the
// last Seq it saw, misses none (a job's items become visible in Seq
// order).
func testConcurrentItems(t *testing.T, f *fixture) {
	const batches, size, workers = 4, 30, 8
	job := f.newJob("j", 0, seq("s", batches*size)...)
	type group struct{ recs []jobs.Record }
	want := map[string]bool{} // item IDs
	var groups []group
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range batches {
		id := fmt.Sprintf("b%d", i)
		_, got := f.take(job, id, size)
		runner := fmt.Sprintf("r%d", i)
		f.claim(job, id, runner, 1)
		for len(got) > 0 {
			k := min(len(got), 1+rng.IntN(5))
			var g group
			for _, u := range got[:k] {
				n := rng.IntN(6)
				links := Entries(1, URL(fmt.Sprintf("l%02d", rng.IntN(40))), URL(fmt.Sprintf("l%02d", rng.IntN(40))), got[rng.IntN(len(got))])
				for j := range links {
					links[j].Label = fmt.Sprintf("L%d", j)
				}
				g.recs = append(g.recs, jobs.Record{Job: job, Batch: id, Runner: runner, Epoch: 1, URL: u,
					Page: Page(job, id, runner, 1, u, 0, ""), Links: links, Items: pushed(u, "ITEM", n)})
				for x := range n {
					want[crawler.ItemID(job, u, x)] = true
				}
			}
			groups = append(groups, g, g)
			got = got[k:]
		}
	}
	rng.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })

	// The reader: a sink's loop, without the sink.
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	var delivered []jobs.ItemRecord
	var readErr error
	go func() {
		defer close(readerDone)
		cursor := int64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			its, err := f.s.Items(f.ctx, job, cursor, 13)
			if err != nil {
				readErr = err
				return
			}
			for _, it := range its {
				if it.Seq <= cursor {
					readErr = fmt.Errorf("item %d after cursor %d", it.Seq, cursor)
					return
				}
				cursor = it.Seq
			}
			delivered = append(delivered, its...)
			if len(its) == 0 {
				time.Sleep(time.Millisecond) // a sink's polling pace
			}
		}
	}()

	ch := make(chan group)
	go func() {
		defer close(ch)
		for _, g := range groups {
			ch <- g
		}
	}()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range ch {
				if _, err := f.s.RecordAll(f.ctx, g.recs); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-readerDone
	require.Empty(t, errs, "concurrent RecordAll failed")
	require.NoError(t, readErr, "the reader")

	all := f.allItems(job, 17)
	got := map[string]bool{}
	for _, it := range all {
		assert.False(t, got[it.ID], "item %s (%s #%d) stored twice", it.ID, it.URL, it.Index)
		got[it.ID] = true
		assert.True(t, want[it.ID], "item %s (%s #%d) was never pushed", it.ID, it.URL, it.Index)
	}
	assert.Len(t, all, len(want), "items stored")
	assert.Equal(t, len(want), f.stats(job).Items, "Stats.Items")
	assert.Equal(t, all, f.allItems(job, 1000), "Items again: the same Seqs and IDs")

	// What the reader saw while the writers ran, followed to the end from
	// its cursor, is every item once: it skipped none.
	cursor := int64(0)
	if len(delivered) > 0 {
		cursor = delivered[len(delivered)-1].Seq
	}
	t.Logf("%d items, %d seen by the reader while recording", len(all), len(delivered))
	for {
		its := f.items(job, cursor, 50)
		if len(its) == 0 {
			break
		}
		delivered = append(delivered, its...)
		cursor = its[len(its)-1].Seq
	}
	assert.Equal(t, all, delivered, "a reader following the cursor skipped or repeated items")
}
