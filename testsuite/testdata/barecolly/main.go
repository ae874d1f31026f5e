// Command barecolly is what a user would write instead of Baton for one
// machine: Colly, asynchronous, following every link of the seed's host,
// obeying robots.txt, with -parallelism requests at once, each URL
// fetched once. The benchmarks
// run it as a process of its own, against the same server as Baton, so
// its CPU is measured as Baton's is (the process's user and system time).
// It prints one JSON line: the responses it had and how long it took.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

func main() {
	seed := flag.String("url", "", "the seed URL")
	parallelism := flag.Int("parallelism", 24, "requests at once")
	flag.Parse()
	u, err := url.Parse(*seed)
	if err != nil || u.Hostname() == "" {
		fmt.Fprintf(os.Stderr, "barecolly: -url %q: want an absolute URL\n", *seed)
		os.Exit(2)
	}
	cc := colly.NewCollector(colly.Async(true), colly.AllowedDomains(u.Hostname()), colly.MaxDepth(101))
	cc.IgnoreRobotsTxt = false
	_ = cc.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: *parallelism})
	var responses, failures atomic.Int64
	// Colly's own visited check races under Async (two goroutines may both
	// find a URL unvisited and fetch it twice); a user at full strength
	// claims each absolute URL, its fragment removed, once before visiting it.
	var claimed sync.Map
	cc.OnHTML("a[href]", func(e *colly.HTMLElement) {
		u, err := url.Parse(e.Request.AbsoluteURL(e.Attr("href")))
		if err != nil || u.Host == "" {
			return
		}
		u.Fragment, u.RawFragment = "", ""
		if _, dup := claimed.LoadOrStore(u.String(), true); !dup {
			_ = e.Request.Visit(u.String())
		}
	})
	cc.OnHTML("title", func(*colly.HTMLElement) {})
	cc.OnResponse(func(*colly.Response) { responses.Add(1) })
	cc.OnError(func(*colly.Response, error) { failures.Add(1) })
	start := time.Now()
	_ = cc.Visit(*seed)
	cc.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
		"responses": responses.Load(),
		"failures":  failures.Load(),
		"wall_ms":   time.Since(start).Milliseconds(),
	})
}
