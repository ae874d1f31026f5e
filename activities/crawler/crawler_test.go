package crawler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
)

const listing = `<html><head><base href="/shop/c/a/"></head><body>
<div class="product"><a class="product-link" href="/shop/p/1-x.html">X</a></div>
<div class="product"><a class="product-link" href="../../p/2-y.html">Y</a></div>
<a class="next" href="?page=2">Next</a><a href="https://other.example/">off</a>
<script type="application/ld+json">{"offers":{"price":"1 234,50"}}</script></body></html>`

func page(label, body string, filter crawler.LinkFilter) *crawler.Page {
	return crawler.NewPage(context.Background(), crawler.Request{URL: "http://127.0.0.1:1/shop/c/a/", Label: label},
		crawler.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte(body)}, filter)
}

func TestRouterAndActions(t *testing.T) {
	c := crawler.New("shop", "1")
	c.HandleFunc("listing", func(ctx context.Context, p *crawler.Page) error {
		n, err := p.EnqueueLinks("a.product-link", "detail", map[string]int{"from": 1})
		if err != nil || n != 2 {
			return fmt.Errorf("enqueued %d: %v", n, err)
		}
		if ok, err := p.Enqueue(p.Attr("a.next", "href"), "listing", nil); !ok || err != nil {
			return fmt.Errorf("next: %v %v", ok, err)
		}
		ok, err := p.Enqueue("https://other.example/", "x", nil)
		assert.False(t, ok, "refused by the job's rules")
		assert.NoError(t, err)
		raw := p.Text(`script[type="application/ld+json"]`)
		assert.Contains(t, raw, "1 234,50")
		return p.Push(map[string]string{"k": "v"})
	})
	require.NoError(t, c.Validate())
	filter := func(abs string, depth int) (string, error) {
		if !strings.HasPrefix(abs, "http://127.0.0.1:1/") {
			return "", errors.New("off domain")
		}
		return abs, nil
	}
	p := page("listing", listing, filter)
	out, err := c.Run(context.Background(), p, nil)
	require.NoError(t, err)
	require.Len(t, out.Links, 3)
	assert.Equal(t, "http://127.0.0.1:1/shop/p/1-x.html", out.Links[0].URL)
	assert.Equal(t, "http://127.0.0.1:1/shop/p/2-y.html", out.Links[1].URL, "resolved against <base href>")
	assert.Equal(t, `{"from":1}`, string(out.Links[0].Data))
	assert.Equal(t, "http://127.0.0.1:1/shop/c/a/?page=2", out.Links[2].URL)
	assert.Equal(t, 1, p.Refused())
	require.Len(t, out.Items, 1)
	assert.Equal(t, `{"k":"v"}`, string(out.Items[0].Value))

	_, err = c.Run(context.Background(), page("nope", listing, nil), nil)
	assert.ErrorContains(t, err, `no handler for label "nope"`)
}

func TestPanicAndBudget(t *testing.T) {
	c := crawler.New("bad", "1")
	c.Budget = 100 * time.Millisecond
	c.HandleFunc("panic", func(ctx context.Context, p *crawler.Page) error { panic("boom") })
	hung := make(chan struct{})
	c.HandleFunc("hang", func(ctx context.Context, p *crawler.Page) error {
		<-hung // ignores ctx: abandoned, never waited for
		return p.Push(1)
	})
	_, err := c.Run(context.Background(), page("panic", "", nil), nil)
	var pe *crawler.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, string(pe.Stack), "crawler_test.go")

	p := page("hang", "", nil)
	_, err = c.Run(context.Background(), p, nil)
	assert.ErrorIs(t, err, crawler.ErrBudget)
	close(hung)
	assert.Eventually(t, func() bool { return p.Push(2) == crawler.ErrPageClosed }, time.Second, 10*time.Millisecond)
}

func TestPipelines(t *testing.T) {
	c := crawler.New("p", "1")
	c.Pipe(func(_ context.Context, it *crawler.Item) error {
		if it.Value.(int)%2 == 1 {
			return crawler.ErrDrop
		}
		it.Value = it.Value.(int) * 10
		return nil
	})
	c.HandleFunc("", func(_ context.Context, p *crawler.Page) error {
		for i := range 5 {
			if err := p.Push(i); err != nil {
				return err
			}
		}
		return nil
	})
	out, err := c.Run(context.Background(), page("", "", nil), nil)
	require.NoError(t, err)
	var got []string
	for _, it := range out.Items {
		got = append(got, fmt.Sprintf("%d:%s", it.Index, it.Value))
	}
	assert.Equal(t, []string{"0:0", "1:20", "2:40"}, got, "recorded items are numbered without gaps")
	assert.Equal(t, 2, out.Dropped)
}

type shopOptions struct {
	MaxPages int           `json:"max_pages"`
	Currency string        `json:"currency"`
	Wait     time.Duration `json:"wait"`
	Tags     []string      `json:"tags"`
}

func (o *shopOptions) Validate() error {
	if o.MaxPages < 0 {
		return errors.New("max_pages: negative")
	}
	return nil
}

func TestOptions(t *testing.T) {
	c := crawler.New("shop", "1")
	c.Options(&shopOptions{MaxPages: 5, Currency: "EUR"})
	specs := c.OptionSpecs()
	require.Len(t, specs, 4)
	assert.Equal(t, crawler.OptionSpec{Key: "currency", Kind: "string", Default: "EUR"}, specs[0])
	v, err := c.DecodeOptions(map[string]string{"max_pages": "9", "wait": "2s", "tags": "a, b"})
	require.NoError(t, err)
	o := v.(*shopOptions)
	assert.Equal(t, shopOptions{MaxPages: 9, Currency: "EUR", Wait: 2 * time.Second, Tags: []string{"a", "b"}}, *o)
	_, err = c.DecodeOptions(map[string]string{"max_pages": "-1"})
	assert.ErrorContains(t, err, "max_pages: negative")
	_, err = c.DecodeOptions(map[string]string{"colour": "red"})
	assert.ErrorContains(t, err, `option "colour": crawler shop has currency (string), max_pages (int)`)
	assert.ErrorContains(t, crawler.CheckSets("shop", specs, map[string]string{"max_pages": "many"}), "max_pages=\"many\": not a int")
	assert.NoError(t, crawler.CheckSets("shop", specs, map[string]string{"max_pages": "3"}))

	p := page("", "", nil).WithOptions(v)
	assert.Equal(t, 9, crawler.OptionsOf[shopOptions](p).MaxPages)
}

// Whatever a hostile page makes a handler enqueue or push, the page's
// actions return an error or a bounded outcome, never panic.
func FuzzPageActions(f *testing.F) {
	f.Add("http://a.test/dir/page", "../x?y=1#z", "label", `{"k":1}`)
	f.Add("http://a.test/", "javascript:alert(1)", "", `null`)
	f.Add("http://a.test/", "//other.test/p", strings.Repeat("l", 200), `"x"`)
	f.Add("::bad", "%zz", "\x00", `{`)
	f.Fuzz(func(t *testing.T, pageURL, ref, label, data string) {
		p := crawler.NewPage(context.Background(), crawler.Request{URL: pageURL}, crawler.Response{StatusCode: 200, Body: []byte(data)}, nil)
		var d any
		_ = json.Unmarshal([]byte(data), &d)
		_, _ = p.Enqueue(ref, label, d)
		_ = p.Push(d)
		_ = p.JSON(ref).String()
		_ = p.Text(ref)
		_, _ = p.XPath(ref)
	})
}

// --set values of any text decode into the typed options or error.
func FuzzDecodeOptions(f *testing.F) {
	f.Add("max_pages", "12")
	f.Add("wait", "1h2m")
	f.Add("tags", ",a,,b ,")
	f.Add("currency", "\x00")
	f.Add("max_pages", "99999999999999999999")
	c := crawler.New("shop", "1")
	c.Options(&shopOptions{})
	f.Fuzz(func(t *testing.T, key, value string) {
		_, _ = c.DecodeOptions(map[string]string{key: value})
		_ = crawler.CheckSets("shop", c.OptionSpecs(), map[string]string{key: value})
	})
}

func TestRenderedLabelIsChecked(t *testing.T) {
	for _, c := range []struct {
		opts []crawler.RenderOption
		want string
	}{
		{[]crawler.RenderOption{crawler.WaitUntil("domready")}, `wait "domready"`},
		{[]crawler.RenderOption{crawler.Click("")}, "action click: the selector is empty"},
		{[]crawler.RenderOption{crawler.Evaluate("a", "1", 0), crawler.Evaluate("a", "2", 0)}, `two Evaluate steps named "a"`},
		{[]crawler.RenderOption{crawler.AllowResources("video")}, `resource type "video"`},
	} {
		cr := crawler.New("js", "1")
		cr.HandleFunc("detail", func(context.Context, *crawler.Page) error { return nil }, crawler.Rendered(c.opts...))
		err := cr.Validate()
		if err == nil || !strings.Contains(err.Error(), `label "detail": Rendered: `) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate: %v, want %q", err, c.want)
		}
	}
	cr := crawler.New("js", "1")
	cr.HandleFunc("plain", func(context.Context, *crawler.Page) error { return nil })
	cr.HandleFunc("detail", func(context.Context, *crawler.Page) error { return nil },
		crawler.Rendered(crawler.WaitUntil("load"), crawler.WaitFor("li"), crawler.RenderTimeout(time.Second)))
	if err := cr.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, ok := cr.Rendering("plain"); ok {
		t.Error("a label without Rendered is rendered")
	}
	spec, ok := cr.Rendering("detail")
	if !ok || spec.Wait != "load" || len(spec.Actions) != 1 || spec.Timeout != time.Second {
		t.Errorf("spec %+v: a WaitFor after an explicit WaitUntil is a step", spec)
	}
}
