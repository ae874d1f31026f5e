package revisit

import "net/http"

// Verdict is what a refetch says of a page against its baseline.
type Verdict int

const (
	// Changed: the page's content differs from the baseline's (or nothing
	// proves it is the same).
	Changed Verdict = iota
	// Unchanged: a 304 answer to a conditional request, or a 200 whose
	// extracted content hashes as the baseline's.
	Unchanged
)

func (v Verdict) String() string {
	if v == Unchanged {
		return "unchanged"
	}
	return "changed"
}

// Classify judges an answer of status with a page whose extracted content
// hashes to contentHash (empty for a 304, which has no body) against b.
// A 304 counts as unchanged only when b had a validator to send: a 304 to
// an unconditional request proves nothing.
func Classify(status int, contentHash string, b Baseline) Verdict {
	switch {
	case status == http.StatusNotModified && b.HasValidator():
		return Unchanged
	case status == http.StatusOK && contentHash != "" && contentHash == b.ContentHash:
		return Unchanged
	}
	return Changed
}
