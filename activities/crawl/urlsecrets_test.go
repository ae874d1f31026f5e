package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestSplitURLSecretsRedactsUserinfoAndNamedParams(t *testing.T) {
	t.Parallel()
	got, secs, err := SplitURLSecrets("https://ann:pw%21@API.example.test:443/items?page=2&token=t0k%2Fen&sig=abc", []string{"token", "sig"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://REDACTED@API.example.test:443/items?page=2&token=REDACTED&sig=REDACTED"; got != want {
		t.Fatalf("redacted %q, want %q", got, want)
	}
	want := []URLSecret{{"https://api.example.test", "", "ann:pw%21"}, {"https://api.example.test", "token", "t0k/en"}, {"https://api.example.test", "sig", "abc"}}
	if fmt.Sprint(secs) != fmt.Sprint(want) {
		t.Fatalf("secrets %v, want %v", secs, want)
	}
	_, _, err = SplitURLSecrets("https://api.example.test/other?token=another", []string{"token"}, secs)
	if err == nil || strings.Contains(err.Error(), "another") || !strings.Contains(err.Error(), "token") {
		t.Fatalf("two tokens for one origin: %v", err)
	}
}

func TestURLSecretsGoOnTheWireToTheirOriginOnly(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{} // path -> raw query and user
	var other string
	otherSrv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["other"+r.URL.Path] = r.URL.RawQuery
		mu.Unlock()
	})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		user, pw, _ := r.BasicAuth()
		mu.Lock()
		seen[r.URL.Path] = r.URL.RawQuery + " " + user + ":" + pw
		mu.Unlock()
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/list?token=s3cret", http.StatusFound)
			return
		}
		fmt.Fprintf(w, `<html><a href="/list?page=2&token=s3cret">next</a><a href="/list?token=site-issued">own</a><a href="%s/x?token=s3cret">away</a></html>`, other)
	})
	other = otherSrv.URL
	secs := NewURLSecrets([]URLSecret{{Origin: "http://" + strings.TrimPrefix(srv.URL, "http://"), Param: "token", Value: "s3cret"},
		{Origin: "http://" + strings.TrimPrefix(srv.URL, "http://"), Value: "ann:pw"}})
	u, _ := url.Parse(srv.URL + "/start?token=REDACTED")
	u.User = url.User(Redacted)
	o := testOptions()
	o.Follow, o.MaxDepth = true, 2
	o.AllowedDomains = []string{"127.0.0.1"}
	p := NewEngine().Fetch(context.Background(), get(u.String()), Auth{URLSecrets: secs}, 0, o)
	if !p.OK() {
		t.Fatal(p.Error)
	}
	mu.Lock()
	if got := seen["/start"]; got != "token=s3cret ann:pw" {
		t.Fatalf("the seed's request carried %q, want its token and user:password", got)
	}
	mu.Unlock()
	for _, s := range append([]string{p.URL, p.FinalURL}, p.Links...) {
		if strings.Contains(s, "s3cret") || strings.Contains(s, "ann") {
			t.Fatalf("a recorded URL holds the secret: %q (page %+v)", s, p)
		}
	}
	if !strings.Contains(strings.Join(p.Links, " "), "token=site-issued") {
		t.Fatalf("a token the site issued is kept as it is: %v", p.Links)
	}
	// A discovered link of another origin is fetched with the placeholder.
	away := ""
	for _, l := range p.Links {
		if strings.HasPrefix(l, other) {
			away = l
		}
	}
	if away == "" {
		t.Fatalf("no link to the other origin in %v", p.Links)
	}
	if q := NewEngine().Fetch(context.Background(), get(away), Auth{URLSecrets: secs}, 1, o); !q.OK() {
		t.Fatal(q.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := seen["other/x"]; got != "token=REDACTED" {
		t.Fatalf("the other origin got %q, want the placeholder", got)
	}
}
