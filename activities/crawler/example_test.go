package crawler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/batoncrawl/baton/activities/crawler"
)

// fakePage is a page as the Runner would hand it to a handler.
func fakePage(url, label, html string) *crawler.Page {
	return crawler.NewPage(context.Background(), crawler.Request{URL: url, Label: label},
		crawler.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte(html)}, nil)
}

// Handlers keyed by label: a listing queues its products and its next
// page; a product pushes an item.
func Example() {
	c := crawler.New("shop", "1.0.0")
	c.HandleFunc("listing", func(ctx context.Context, p *crawler.Page) error {
		if _, err := p.EnqueueLinks("a.product", "detail", nil); err != nil {
			return err
		}
		_, err := p.EnqueueLinks("a.next", "listing", nil)
		return err
	})
	c.HandleFunc("detail", func(ctx context.Context, p *crawler.Page) error {
		return p.Push(map[string]string{"name": p.Text("h1")})
	})
	out, _ := c.Run(context.Background(), fakePage("http://shop.test/c/?page=1", "listing",
		`<a class="product" href="/p/1">1</a><a class="next" href="?page=2">next</a>`), slog.Default())
	for _, l := range out.Links {
		fmt.Println(l.Label, l.URL)
	}
	out, _ = c.Run(context.Background(), fakePage("http://shop.test/p/1", "detail", `<h1>Teapot</h1>`), slog.Default())
	fmt.Println(string(out.Items[0].Value))
	// Output:
	// detail http://shop.test/p/1
	// listing http://shop.test/c/?page=2
	// {"name":"Teapot"}
}

// Pipelines clean and drop items before they are recorded.
func ExampleCrawler_Pipe() {
	c := crawler.New("prices", "1")
	c.Pipe(func(_ context.Context, it *crawler.Item) error {
		price := it.Value.(string)
		if price == "" {
			return crawler.ErrDrop
		}
		it.Value = strings.ReplaceAll(price, " ", "")
		return nil
	})
	c.HandleFunc("", func(_ context.Context, p *crawler.Page) error {
		for _, s := range []string{"1 234", "", "56"} {
			if err := p.Push(s); err != nil {
				return err
			}
		}
		return nil
	})
	out, _ := c.Run(context.Background(), fakePage("http://shop.test/", "", ""), nil)
	for _, it := range out.Items {
		fmt.Println(it.Index, string(it.Value))
	}
	fmt.Println("dropped", out.Dropped)
	// Output:
	// 0 "1234"
	// 1 "56"
	// dropped 1
}

// Typed options, set per job with `baton crawl --set key=value`.
func ExampleCrawler_Options() {
	type Options struct {
		MaxPages int  `json:"max_pages"`
		Images   bool `json:"images"`
	}
	c := crawler.New("shop", "1")
	c.Options(&Options{MaxPages: 10})
	for _, o := range c.OptionSpecs() {
		fmt.Println(o.Key, o.Kind, o.Default)
	}
	v, err := c.DecodeOptions(map[string]string{"images": "true"})
	fmt.Printf("%+v %v\n", *v.(*Options), err)
	_, err = c.DecodeOptions(map[string]string{"max_pages": "many"})
	fmt.Println(err)
	// Output:
	// images bool false
	// max_pages int 10
	// {MaxPages:10 Images:true} <nil>
	// option max_pages="many": not a int
}

// A handler error marked Retry fetches the page again; others fail it.
func ExampleRetry() {
	err := crawler.Retry(errors.New("HTTP 200 but an empty price list"))
	fmt.Println(crawler.IsRetry(err), crawler.IsRetry(errors.New("no price")))
	// Output: true false
}

// A webhook's receiver checks the signature of each delivery.
func ExampleVerifySignature() {
	secret := []byte("s3cret")
	body := []byte(`[{"id":"…"}]`)
	sink := crawler.Webhook("hook", "http://127.0.0.1:9/items", secret, nil)
	fmt.Println(sink.Name, crawler.VerifySignature(secret, body, "sha256=0000"))
	// Output: hook false
}

// A crawler that archives its jobs: every response its pages get, as
// received, in WARC files under <bodies root>/warc/JOB on each Runner,
// rotated at 100 MB; a recrawl writes revisit records for the pages that
// did not change. `baton crawl --warc DIR` on a job puts its files in DIR.
func ExampleCrawler_Archive() {
	c := crawler.New("shop", "1")
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		return p.Push(map[string]string{"title": p.Text("title")})
	})
	c.Archive(crawler.WARC{Dir: "warc", MaxFileBytes: 100 << 20})
	w, ok := c.Archiving()
	fmt.Println(ok, c.Validate(), w.JobDir("/var/lib/baton/bodies", "shop-20261128"), w.FileBytes())

	c.Archive(crawler.WARC{Dir: "../elsewhere"})
	fmt.Println(c.Validate())
	// Output:
	// true <nil> /var/lib/baton/bodies/warc/shop-20261128 104857600
	// crawler shop: Archive: Dir "../elsewhere": a relative directory must stay under the bodies root (no ..)
}
