package render

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// paused judges one request the tab paused (Fetch.requestPaused): a
// blocked resource type or a request the policy refuses fails before it
// leaves the browser; the others go on, with the job's headers when they
// go to the document's own origin.
func (pr *pageRun) paused(ctx context.Context, ev *fetch.EventRequestPaused) {
	rt := string(ev.ResourceType)
	isDoc := ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == pr.mainFrame
	fail := func(reason network.ErrorReason) {
		_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: reason})
	}
	if !isDoc && pr.req.blocks(rt) {
		pr.blocked.Add(1)
		fail(network.ErrorReasonBlockedByClient)
		return
	}
	u, err := url.Parse(ev.Request.URL)
	if err == nil && pr.req.Policy != nil {
		if u.Scheme != "http" && u.Scheme != "https" {
			err = fmt.Errorf("scheme %q is not http(s)", u.Scheme)
		} else {
			err = pr.req.Policy(ctx, u, rt)
		}
	}
	if err != nil {
		if isDoc {
			pr.mu.Lock()
			pr.docRefused = err
			pr.mu.Unlock()
		} else {
			pr.refused.Add(1)
		}
		fail(network.ErrorReasonAccessDenied)
		return
	}
	params := fetch.ContinueRequestParams{RequestID: ev.RequestID}
	if len(pr.req.Headers) > 0 && sameOrigin(u, pr.doc) {
		params.Headers = withHeaders(ev.Request.Headers, pr.req.Headers)
	}
	_, _ = chromedp.Call(ctx, fetch.ContinueRequest, params)
}

// withHeaders returns the request's headers with extra set where the
// request has none of the same name.
func withHeaders(h network.Headers, extra map[string]string) []*fetch.HeaderEntry {
	out := make([]*fetch.HeaderEntry, 0, len(h)+len(extra))
	have := map[string]bool{}
	for k, v := range h {
		out = append(out, &fetch.HeaderEntry{Name: k, Value: fmt.Sprint(v)})
		have[strings.ToLower(k)] = true
	}
	for k, v := range extra {
		if !have[strings.ToLower(k)] {
			out = append(out, &fetch.HeaderEntry{Name: k, Value: v})
		}
	}
	return out
}

// sameOrigin reports whether a and b have one scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return a != nil && b != nil && strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}
