// Command jscrawler is a worker binary for tests: its crawler "jsshop"
// crawls the demo site's JavaScript shop (demosite.NewJS) with labels
// that are rendered in headless Chromium: the index, whose links are
// written by script, and the item pages, whose reviews load on a click.
package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/worker"
)

// Review is what an item page pushes.
type Review struct {
	URL      string   `json:"url"`
	Title    string   `json:"title"`
	Price    string   `json:"price"`
	Reviews  []string `json:"reviews"`
	Counted  int      `json:"counted"`
	Rendered bool     `json:"rendered"`
}

func main() {
	c := crawler.New("jsshop", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		var err error
		p.Find("#app a").Each(func(_ int, s *crawler.Selection) {
			href, _ := s.Attr("href")
			if _, e := p.Enqueue(strings.Replace(href, "/js/item/", "/js/more/", 1), "detail", nil); e != nil && err == nil {
				err = e
			}
		})
		return err
	}, crawler.Rendered(crawler.WaitFor("#app a")))
	c.HandleFunc("detail", func(ctx context.Context, p *crawler.Page) error {
		r := Review{URL: p.Request.URL, Title: p.Text("h1.title"), Price: p.Text("span.price"), Rendered: p.Rendered()}
		p.Find("li.review").Each(func(_ int, s *crawler.Selection) { r.Reviews = append(r.Reviews, s.Text()) })
		if err := p.DecodeScript("count", &r.Counted); err != nil {
			return err
		}
		return p.Push(r)
	}, crawler.Rendered(
		crawler.WaitFor("button.reviews"),
		crawler.Click("button.reviews"),
		crawler.WaitFor("li.review").Within(10*time.Second),
		crawler.Evaluate("count", `document.querySelectorAll("li.review").length`, time.Second),
	))
	os.Exit(worker.Main(c))
}
