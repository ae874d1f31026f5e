package crawl

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// keySeen is a site that records, per path, the X-Api-Key it received.
type keySeen struct {
	url  string
	mu   sync.Mutex
	keys map[string][]string
}

func keySite(t *testing.T, addr string, redirects func(path string) string) *keySeen {
	k := &keySeen{keys: map[string][]string{}}
	k.url = serveOn(t, addr, func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.keys[r.URL.Path] = append(k.keys[r.URL.Path], r.Header.Get("X-Api-Key"))
		k.mu.Unlock()
		if to := redirects(r.URL.Path); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
		}
	}).URL
	return k
}

func (k *keySeen) got(path string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[path]
}

// A request hook (a crawler's BeforeRequest) runs once per request,
// before its first hop; what it adds stays on the request's host: sent
// on a redirect within the host, never to another host (127.0.0.2 here),
// nor back to the first host once the chain left it.
func TestRequestHookOncePerRequest(t *testing.T) {
	t.Parallel()
	var home, other *keySeen
	home = keySite(t, "127.0.0.1:0", func(path string) string {
		return map[string]string{"/same": "/there", "/away": other.url + "/land", "/out": other.url + "/bounce"}[path]
	})
	other = keySite(t, "127.0.0.2:0", func(path string) string {
		return map[string]string{"/bounce": home.url + "/back"}[path]
	})

	var calls atomic.Int32
	o := testOptions()
	o.IgnoreRobots = true
	o.RequestHook = func(r *http.Request) error {
		calls.Add(1)
		r.Header.Set("X-Api-Key", "s3cret")
		return nil
	}
	e := NewEngine()
	ctx := context.Background()

	p := e.Fetch(ctx, get(home.url+"/same"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	require.Equal(t, int32(1), calls.Load(), "the hook ran on a redirect hop")
	require.Equal(t, []string{"s3cret"}, home.got("/same"))
	require.Equal(t, []string{"s3cret"}, home.got("/there"), "a redirect within the host keeps the hook's header")

	p = e.Fetch(ctx, get(home.url+"/away"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	require.Equal(t, int32(2), calls.Load(), "the hook ran on a redirect hop")
	require.Equal(t, []string{""}, other.got("/land"), "the hook's header reached another host")

	p = e.Fetch(ctx, get(home.url+"/out"), Auth{}, 0, o)
	require.True(t, p.OK(), "%+v", p)
	require.Equal(t, int32(3), calls.Load(), "the hook ran on a redirect hop")
	require.Equal(t, []string{""}, other.got("/bounce"), "the hook's header reached another host")
	require.Equal(t, []string{""}, home.got("/back"), "the hook's header came back once the chain left the host")
}
