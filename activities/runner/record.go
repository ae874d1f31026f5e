package runner

import (
	"fmt"
	"unicode/utf8"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
)

// ZooKeeper refuses a znode larger than 1 MiB (jute.maxbuffer): the write
// fails as a lost connection, and the activity would retry it for ever. A
// Runner therefore keeps the Task znodes it writes within a cap below it.
const (
	// DefaultMaxTaskBytes bounds an encoded Task written by a Runner.
	DefaultMaxTaskBytes = 768 << 10
	// Bounds on one result detail's strings: the response (a page's
	// title), the error, and the URL (whole in running_content).
	MaxDetailResponse = 1 << 10
	MaxDetailError    = 2 << 10
	MaxDetailURL      = 2 << 10
)

func (a *Activities) maxTaskBytes() int {
	if a.MaxTaskBytes > 0 {
		return a.MaxTaskBytes
	}
	return DefaultMaxTaskBytes
}

// recordFitted records d in t (roles.Task.Record) so that the encoded Task
// stays within limit bytes: d's strings are bounded (boundDetail); when
// the Task would still be larger, its oldest details are dropped first, as
// --max-result-detail drops them (running_result still counts them), and
// dropped says how many; a result that does not fit even alone is recorded
// as a failure that says so, without its response. Either way the result
// is recorded once, in the write that advances next_index: never an
// error, never retried. ok is Record's.
func recordFitted(t roles.Task, d roles.ResultDetail, maxDetails, limit int) (next roles.Task, ok bool, dropped int) {
	d = boundDetail(d)
	next, ok = t.Record(d, maxDetails)
	if !ok {
		return next, false, 0
	}
	size := len(metadata.Encode(next))
	for size > limit && len(next.ResultDetail) > 1 {
		// Drop about as many of the oldest as the excess takes, then weigh
		// again.
		n, freed := 0, 0
		for n < len(next.ResultDetail)-1 && freed < size-limit {
			freed += len(metadata.Encode(next.ResultDetail[n])) + 1
			n++
		}
		next.ResultDetail = next.ResultDetail[n:]
		dropped += n
		size = len(metadata.Encode(next))
	}
	if size <= limit {
		return next, true, dropped
	}
	fail := d
	fail.State, fail.Response = roles.TaskError, ""
	fail.ErrorMsg = fmt.Sprintf("result not recorded: the Task znode would be %d bytes, more than the %d a Runner writes (ZooKeeper refuses a znode over 1 MiB)", size, limit)
	next, ok = t.Record(fail, maxDetails)
	dropped += len(next.ResultDetail) - 1
	next.ResultDetail = next.ResultDetail[len(next.ResultDetail)-1:]
	return next, ok, dropped
}

// boundDetail cuts a result detail's strings to their bounds (a page's
// title is bounded by the engine already, crawl.MaxTitleBytes; another
// Fetcher's, an error or a long URL is bounded here).
func boundDetail(d roles.ResultDetail) roles.ResultDetail {
	d.Response = cutUTF8(d.Response, MaxDetailResponse)
	d.ErrorMsg = cutUTF8(d.ErrorMsg, MaxDetailError)
	d.URL = cutUTF8(d.URL, MaxDetailURL)
	return d
}

// cutUTF8 cuts s to at most n bytes on a character boundary, marking the
// cut with "…".
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
