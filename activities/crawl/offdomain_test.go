package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// A followed link may not redirect out of the allowed domains (links found
// in pages are filtered by domain; without this a redirect would fetch any
// site). A seed may: the user named it. Redirects within the domains are
// followed.
func TestFollowedRedirectStaysInAllowedDomains(t *testing.T) {
	t.Parallel()
	var outside atomic.Int32
	other := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" {
			outside.Add(1)
		}
		fmt.Fprint(w, "<title>elsewhere</title>")
	})
	var srvURL string
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/out":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/in":
			http.Redirect(w, r, srvURL+"/landed", http.StatusMovedPermanently)
		case "/landed":
			fmt.Fprint(w, "<title>landed</title>")
		default:
			http.NotFound(w, r)
		}
	})
	srvURL = srv.URL
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine()
	o := testOptions()
	o.AllowedDomains = []string{u.Host} // host:port: this server only
	ctx := context.Background()

	p := e.Fetch(ctx, get(srv.URL+"/out"), Auth{}, 1, o)
	if want := "redirect to " + other.URL + "/x leaves the allowed domains"; !strings.HasPrefix(p.Error, want) || p.Attempts != 1 {
		t.Errorf("followed link redirected off-domain: %+v", p)
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("the other site was fetched %d times", n)
	}
	if p := e.Fetch(ctx, get(srv.URL+"/in"), Auth{}, 1, o); !p.OK() || p.Title != "landed" {
		t.Errorf("redirect within the allowed domains: %+v", p)
	}
	if p := e.Fetch(ctx, get(srv.URL+"/out"), Auth{}, 0, o); !p.OK() || p.FinalURL != other.URL+"/x" {
		t.Errorf("a seed may redirect anywhere: %+v", p)
	}
	o.AllowedDomains = nil
	if p := e.Fetch(ctx, get(srv.URL+"/out"), Auth{}, 1, o); !p.OK() {
		t.Errorf("no allowed domains, no restriction: %+v", p)
	}
}
