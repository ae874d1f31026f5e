package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Compiled options fetch what the same options fetch uncompiled, and
// Compile names a bad field as Validate does.
func TestCompile(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, extractHTMLPage)
	})
	o := testOptions()
	o.IgnoreRobots = true
	o.Selectors = map[string]string{"title": "h1.title", "x_hrefs": "xpath://a[@class='img']/@href"}
	co, err := o.Compile()
	require.NoError(t, err)
	require.NotNil(t, co.compiled)
	assert.Len(t, co.compiled.sels, 2)
	e := NewEngine()
	raw := e.Fetch(context.Background(), get(srv.URL+"/item/7"), Auth{}, 0, o)
	comp := e.Fetch(context.Background(), get(srv.URL+"/item/7"), Auth{}, 0, co)
	require.True(t, comp.OK(), comp.Error)
	assert.Equal(t, raw.Fields, comp.Fields)
	assert.NotEmpty(t, comp.Fields["title"])

	o.Selectors["bad"] = "xpath://["
	_, err = o.Compile()
	assert.ErrorContains(t, err, `selectors["bad"]: invalid XPath`)
}

// A request hook sees and may change the request of a page's fetch
// before its first hop, and not robots.txt's: a redirect within the host
// carries what it set, without running it again; its error fails the
// page.
func TestRequestHook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("X-Signature")
		mu.Unlock()
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusFound)
			return
		}
		fmt.Fprint(w, "<html><title>t</title></html>")
	})
	o := testOptions()
	o.RequestHook = func(r *http.Request) error {
		if r.URL.Path == "/refused" {
			return errors.New("no key for this path")
		}
		r.Header.Set("X-Signature", "sig:"+r.URL.Path)
		return nil
	}
	e := NewEngine()
	p := e.Fetch(context.Background(), get(srv.URL+"/from"), Auth{}, 0, o)
	require.True(t, p.OK(), p.Error)
	mu.Lock()
	assert.Equal(t, "sig:/from", seen["/from"])
	assert.Equal(t, "sig:/from", seen["/to"], "the redirect hop within the host carries the first hop's header")
	sig, asked := seen["/robots.txt"]
	assert.True(t, asked, "robots.txt was fetched")
	assert.Empty(t, sig, "robots.txt is not the crawler's request")
	mu.Unlock()
	p = e.Fetch(context.Background(), get(srv.URL+"/refused"), Auth{}, 0, o)
	assert.Contains(t, p.Error, "no key for this path")
}
