package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

func ExampleEngine_Fetch() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
		case "/product/1":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><head><title>Blue Widget</title></head><body>
<h1 class="title">Blue Widget</h1><span class="price"> $9.99 </span>
<a href="/product/2#reviews">next</a> <a href="/product/2">next again</a>
<a href="https://elsewhere.example/">elsewhere</a></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()

	engine := crawl.NewEngine() // one per worker process
	opts := crawl.DefaultOptions()
	opts.Selectors = map[string]string{"price": "span.price"}
	opts.Follow, opts.MaxDepth = true, 2
	opts.AllowedDomains = []string{"127.0.0.1"}

	req := roles.Request{TaskID: 1, URL: site.URL + "/product/1", Method: "GET"}
	page := engine.Fetch(context.Background(), req, crawl.Auth{}, 0, opts)
	fmt.Println(page.StatusCode, page.Title, page.Fields["price"], page.Error == "")
	for _, l := range page.Links {
		fmt.Println("link:", l[len(site.URL):])
	}

	page = engine.Fetch(context.Background(), roles.Request{TaskID: 2, URL: site.URL + "/private/x"}, crawl.Auth{}, 1, opts)
	fmt.Println(page.Error)
	// Output:
	// 200 Blue Widget [$9.99] true
	// link: /product/2
	// disallowed by robots.txt
}
