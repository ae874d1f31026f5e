package crawler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
)

// receiver is a webhook receiver that records the paths it was asked.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func newReceiver(t *testing.T, h http.HandlerFunc) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.mu.Unlock()
		h(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

var oneItem = []crawler.StoredItem{{ID: "1", Job: "j", URL: "http://x/", Value: []byte(`{}`)}}

// The built-in Webhook sink delivers with the worker's client
// (crawler.Client): aimed at a private address under --deny-private it
// is refused, and its error names the host, never the URL's path or
// query (tokens).
func TestWebhookUnderWorkerPolicy(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {})
	sink := crawler.Webhook("hook", rcv.URL+"/hooks/s3cretpath?token=t0k3n", []byte("k"), nil)
	engine := crawl.NewEngine()
	engine.Policy.DenyPrivate = true
	ctx := crawler.WithClient(context.Background(), engine.Client(false))
	err := sink.Deliver(ctx, "j", oneItem)
	require.ErrorContains(t, err, "webhook hook: POST "+rcv.URL+": ")
	require.ErrorContains(t, err, "refused private address 127.0.0.1 (deny_private)")
	require.NotContains(t, err.Error(), "s3cret")
	require.NotContains(t, err.Error(), "t0k3n")
	require.Empty(t, rcv.asked())

	// Without the policy it delivers.
	ctx = crawler.WithClient(context.Background(), crawl.NewEngine().Client(false))
	require.NoError(t, sink.Deliver(ctx, "j", oneItem))
	require.Equal(t, []string{"/hooks/s3cretpath"}, rcv.asked())
}

// A webhook follows no redirect: a 307 or 308 would send the body and
// its signature elsewhere; it is a failed delivery, naming no path.
func TestWebhookFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hook" {
			http.Redirect(w, r, "/elsewhere?token=x", http.StatusTemporaryRedirect)
		}
	})
	for _, client := range []*http.Client{nil, {}} {
		sink := crawler.Webhook("hook", rcv.URL+"/hook?token=t0k3n", []byte("k"), client)
		err := sink.Deliver(context.Background(), "j", oneItem)
		require.EqualError(t, err, "webhook hook: POST "+rcv.URL+": HTTP 307")
	}
	require.Equal(t, []string{"/hook", "/hook"}, rcv.asked())
}
