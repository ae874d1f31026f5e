// Package revisit holds the pure rules of refetching a page Baton has seen
// before: the conditional request built from the previous run's record of
// the URL (Condition), whether the answer means the page changed
// (Classify, over Hash of the page's extracted content), and how long to
// wait before the next fetch (NextInterval).
package revisit
