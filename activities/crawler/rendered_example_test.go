package crawler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/batoncrawl/baton/activities/crawler"
)

// A label whose pages need JavaScript: its pages are rendered in headless
// Chromium, a button clicked and the reviews it loads waited for, and a
// script's value kept, before the handler reads the DOM with the same
// Page API as a plain page's. (Here the page is made by hand, as the
// Runner would hand it over once rendered.)
func ExampleRendered() {
	c := crawler.New("reviews", "1.0.0")
	c.HandleFunc("detail", func(ctx context.Context, p *crawler.Page) error {
		var count int
		if err := p.DecodeScript("count", &count); err != nil {
			return err
		}
		return p.Push(map[string]any{
			"title": p.Text("h1.title"), "first_review": p.Text("li.review"), "reviews": count, "rendered": p.Rendered(),
		})
	}, crawler.Rendered(
		crawler.WaitFor("span.price"), // the page counts as loaded once the script wrote the price
		crawler.Click("button.reviews"),
		crawler.WaitFor("li.review").Within(10*time.Second),
		crawler.Evaluate("count", `document.querySelectorAll("li.review").length`, time.Second),
	))
	if err := c.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	spec, _ := c.Rendering("detail")
	fmt.Println("wait:", spec.Wait)
	for _, a := range spec.Actions {
		fmt.Println("step:", a)
	}

	page := crawler.NewPage(context.Background(), crawler.Request{URL: "http://shop.test/item/1", Label: "detail"},
		crawler.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Rendered: true,
			Body:    []byte(`<h1 class="title">Teapot</h1><span class="price">$3</span><ul><li class="review">Fine tea</li><li class="review">Hot</li></ul>`),
			Scripts: map[string]json.RawMessage{"count": json.RawMessage("2")}}, nil)
	out, err := c.Run(context.Background(), page, slog.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out.Items[0].Value))
	// Output:
	// wait: selector:span.price
	// step: click "button.reviews"
	// step: wait "li.review"
	// step: eval "count"
	// {"first_review":"Fine tea","rendered":true,"reviews":2,"title":"Teapot"}
}
