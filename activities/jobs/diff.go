package jobs

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
)

// Kinds of a URL in the diff of two jobs (Diff).
const (
	DiffNew       = "new"       // in the second job only
	DiffGone      = "gone"      // in the first job only
	DiffChanged   = "changed"   // in both, with another title or fields
	DiffUnchanged = "unchanged" // in both, with the same title and fields
)

// DiffEntry is one URL of the diff of two jobs.
type DiffEntry struct {
	URL  string `json:"url"`
	Kind string `json:"change"`
	// Title: the page's title differs (changed pages).
	Title bool `json:"title_changed,omitempty"`
	// Fields names the extracted fields whose values differ, sorted: a
	// field present in one page only counts as changed.
	Fields []string `json:"fields_changed,omitempty"`
}

// DiffCounts counts the URLs of a diff by kind.
type DiffCounts struct {
	New       int `json:"new"`
	Gone      int `json:"gone"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
}

func (c *DiffCounts) add(kind string) {
	switch kind {
	case DiffNew:
		c.New++
	case DiffGone:
		c.Gone++
	case DiffChanged:
		c.Changed++
	case DiffUnchanged:
		c.Unchanged++
	}
}

// Diff compares the results of jobs a and b URL by URL and calls fn for
// each URL of either, in byte order of the URLs. It merges the two jobs'
// results as the store streams them in that order (ResultsByURL), so it
// holds one page of each job whatever their size. A page's content is
// its title and its extracted fields; the rest of the record (timing,
// runner, batch) is not compared.
func Diff(ctx context.Context, rs ReaderStore, a, b string, fn func(DiffEntry) error) (DiffCounts, error) {
	return DiffPages(ctx, rs, a, b, func(e DiffEntry, _ *PageRecord) error { return fn(e) })
}

// DiffPages is Diff, handing fn also the page of job b (nil for a URL
// gone): `baton results --changed-only` writes the new and changed ones.
func DiffPages(ctx context.Context, rs ReaderStore, a, b string, fn func(DiffEntry, *PageRecord) error) (DiffCounts, error) {
	var counts DiffCounts
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nextA, stopA := iter.Pull2(byURL(ctx, rs, a))
	defer stopA()
	nextB, stopB := iter.Pull2(byURL(ctx, rs, b))
	defer stopB()
	pa, errA, okA := nextA()
	pb, errB, okB := nextB()
	for okA || okB {
		if errA != nil {
			return counts, fmt.Errorf("diff %s %s: %w", a, b, errA)
		}
		if errB != nil {
			return counts, fmt.Errorf("diff %s %s: %w", a, b, errB)
		}
		var e DiffEntry
		var page *PageRecord
		switch {
		case okA && (!okB || pa.URL < pb.URL):
			e = DiffEntry{URL: pa.URL, Kind: DiffGone}
			pa, errA, okA = nextA()
		case okB && (!okA || pb.URL < pa.URL):
			p := pb // pb moves on below
			e, page = DiffEntry{URL: pb.URL, Kind: DiffNew}, &p
			pb, errB, okB = nextB()
		default:
			p := pb
			e, page = ComparePages(pa, pb), &p
			pa, errA, okA = nextA()
			pb, errB, okB = nextB()
		}
		counts.add(e.Kind)
		if err := fn(e, page); err != nil {
			return counts, err
		}
	}
	return counts, nil
}

// byURL is ReaderStore.ResultsByURL as an iterator; its error, if any,
// comes last, with a zero page.
func byURL(ctx context.Context, rs ReaderStore, job string) iter.Seq2[PageRecord, error] {
	return func(yield func(PageRecord, error) bool) {
		stopped := false
		err := rs.ResultsByURL(ctx, job, func(p PageRecord) error {
			if !yield(p, nil) {
				stopped = true
				return errStopped
			}
			return nil
		})
		if err != nil && !stopped {
			yield(PageRecord{}, err)
		}
	}
}

var errStopped = errors.New("diff stopped")

// ComparePages compares two records of one URL: changed when their titles
// or any extracted field differ, naming the fields.
func ComparePages(a, b PageRecord) DiffEntry {
	e := DiffEntry{URL: b.URL, Kind: DiffUnchanged, Title: a.Title != b.Title}
	for name, va := range a.Fields {
		if vb, ok := b.Fields[name]; !ok || !slices.Equal(va, vb) {
			e.Fields = append(e.Fields, name)
		}
	}
	for name := range b.Fields {
		if _, ok := a.Fields[name]; !ok {
			e.Fields = append(e.Fields, name)
		}
	}
	slices.Sort(e.Fields)
	if e.Title || len(e.Fields) > 0 {
		e.Kind = DiffChanged
	}
	return e
}
