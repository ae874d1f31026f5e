package render

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// Steps run in the tab before the DOM is read: a click that loads
// reviews, a wait for them, a script's value, and an infinite list
// scrolled to its end.
func TestActionsRunBeforeTheDOMIsRead(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	res, err := p.Render(context.Background(), Request{URL: base + "/js/more/5.html", Wait: WaitSelector + "button.reviews",
		Actions: []Action{
			{Kind: ActClick, Selector: "button.reviews"},
			{Kind: ActWait, Selector: "li.review"},
			{Kind: ActEval, Name: "reviews", Script: `document.querySelectorAll("li.review").length`},
			{Kind: ActEval, Name: "later", Script: `new Promise(r => setTimeout(() => r({ok: true}), 50))`},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.HTML, demosite.ItemReview(5, demosite.ReviewsPerItem-1)) {
		t.Errorf("the reviews the click loads are not in the DOM:\n%s", res.HTML)
	}
	if got := string(res.Scripts["reviews"]); got != "3" {
		t.Errorf("script reviews = %q, want 3", got)
	}
	if got := string(res.Scripts["later"]); got != `{"ok":true}` {
		t.Errorf("script later = %q (a promise is awaited)", got)
	}

	res, err = p.Render(context.Background(), Request{URL: base + "/js/feed.html", Wait: WaitLoad,
		Actions: []Action{{Kind: ActScroll, Timeout: 20 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(res.HTML, `<li class="entry">`); n != demosite.FeedEntries {
		t.Errorf("%d entries after scrolling, want all %d", n, demosite.FeedEntries)
	}
}

// A step that cannot be done fails the page with an error naming it,
// within its budget, and the pool renders the next page.
func TestFailedActionNamesTheStep(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	for _, c := range []struct {
		a    Action
		want string
	}{
		{Action{Kind: ActClick, Selector: "button.absent"}, `action 1 (click "button.absent"): page action failed: no element matches`},
		{Action{Kind: ActWait, Selector: "li.review", Timeout: 300 * time.Millisecond}, `action 1 (wait "li.review"): page action failed: not done within 300ms`},
		{Action{Kind: ActEval, Name: "boom", Script: `(() => { throw new Error("kaput") })()`}, "kaput"},
		{Action{Kind: ActEval, Name: "slow", Script: `new Promise(() => {})`, Timeout: 200 * time.Millisecond}, "not done within 200ms"},
	} {
		start := time.Now()
		// The page's budget is long: a failed action ends the render at
		// once, it does not wait for the budget to run out.
		const budget = time.Minute
		_, err := p.Render(context.Background(), Request{URL: base + "/js/more/1.html", Wait: WaitSelector + "button.reviews", Timeout: budget, Actions: []Action{c.a}})
		if err == nil || !errors.Is(err, ErrAction) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrAction with %q", c.a, err, c.want)
		}
		if d := time.Since(start); d > budget*3/4 {
			t.Errorf("%s: failed after %v, near the page's budget of %v", c.a, d, budget)
		}
	}
	if _, err := p.Render(context.Background(), Request{URL: base + "/js/item/2.html", Wait: WaitSelector + "span.price"}); err != nil {
		t.Errorf("the page after: %v", err)
	}
	_, err := p.Render(context.Background(), Request{URL: base + "/js/item/2.html", Actions: []Action{{Kind: "hover"}}})
	if err == nil || !strings.Contains(err.Error(), `action "hover": want wait, click, scroll or eval`) {
		t.Errorf("unknown action: %v", err)
	}
}

// Under networkidle, Until ends the wait once its elements are there: a
// page whose network is never idle renders, and one whose elements never
// come fails when its budget ends.
func TestUntilEndsTheNetworkIdleWait(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	res, err := p.Render(context.Background(), Request{URL: base + "/js/never.html", Timeout: 5 * time.Second, Until: []Want{{CSS: "title"}, {CSS: "#app", Attr: "id"}}})
	if err == nil && res.Title != "Never settles" {
		t.Errorf("title %q", res.Title)
	}
	if err != nil {
		t.Errorf("elements there, network busy: %v", err)
	}
	_, err = p.Render(context.Background(), Request{URL: base + "/js/never.html", Timeout: 2 * time.Second, Until: []Want{{CSS: "title"}, {CSS: "#app", Attr: "data-absent"}}})
	if !errors.Is(err, ErrNotSettled) {
		t.Errorf("an element never there: %v, want ErrNotSettled", err)
	}
}

// A selector the browser cannot parse fails the page at once, naming it,
// instead of waiting out the page's budget; a selector never matched
// waits it out.
func TestSelectorWaitBadAndNeverThere(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	_, err := p.Render(context.Background(), Request{URL: base + "/js/item/1.html", Wait: WaitSelector + "span[", Timeout: time.Minute})
	if err == nil || errors.Is(err, ErrNotSettled) || !strings.Contains(err.Error(), `selector "span["`) {
		t.Errorf("bad selector: %v, want an error naming it", err)
	}
	_, err = p.Render(context.Background(), Request{URL: base + "/js/item/1.html", Wait: WaitSelector + "span.absent", Timeout: 2 * time.Second})
	if !errors.Is(err, ErrNotSettled) {
		t.Errorf("a selector never matched: %v, want ErrNotSettled", err)
	}
}
