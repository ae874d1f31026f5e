package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Kinds of Action.
const (
	ActWait   = "wait"   // wait for an element matching Selector
	ActClick  = "click"  // click the first element matching Selector
	ActScroll = "scroll" // scroll to the bottom until the page stops growing
	ActEval   = "eval"   // evaluate Script; its JSON value is kept as Name
)

// DefaultActionTimeout is an action's budget when it sets none.
const DefaultActionTimeout = 5 * time.Second

// MaxScriptResultBytes bounds the JSON value of one evaluated script.
const MaxScriptResultBytes = 1 << 20

// scrollQuiet is how long the page's height must stay the same for a
// scroll to end before its budget.
const scrollQuiet = time.Second

// Action is a step run in the tab once the page has settled and before
// its DOM is read: wait for an element, click one, scroll, or evaluate a
// script. Each runs under its own budget (Timeout) inside the page's
// guard: the requests it makes the page send are judged and dialled as
// the page's own.
type Action struct {
	Kind     string        `json:"kind"`
	Selector string        `json:"selector,omitempty"`
	Script   string        `json:"script,omitempty"`
	Name     string        `json:"name,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
}

// ErrAction is wrapped by the error of a render whose action failed (no
// element to click, a script that threw, an action past its budget).
var ErrAction = errors.New("page action failed")

// String names the action in errors: `click "button.more"`.
func (a Action) String() string {
	switch a.Kind {
	case ActWait, ActClick:
		return fmt.Sprintf("%s %q", a.Kind, a.Selector)
	case ActEval:
		return fmt.Sprintf("eval %q", a.Name)
	}
	return a.Kind
}

// Validate checks an action.
func (a Action) Validate() error {
	switch a.Kind {
	case ActWait, ActClick:
		if strings.TrimSpace(a.Selector) == "" {
			return fmt.Errorf("action %s: the selector is empty", a.Kind)
		}
	case ActScroll:
	case ActEval:
		if strings.TrimSpace(a.Script) == "" {
			return fmt.Errorf("action eval %q: the script is empty", a.Name)
		}
	default:
		return fmt.Errorf("action %q: want wait, click, scroll or eval", a.Kind)
	}
	if a.Timeout < 0 {
		return fmt.Errorf("action %s: timeout %v is negative", a, a.Timeout)
	}
	return nil
}

// act runs the page's actions in order; the results of eval actions go
// to res.Scripts.
func (pr *pageRun) act(ctx context.Context, res *Result) error {
	for i, a := range pr.req.Actions {
		budget := a.Timeout
		if budget <= 0 {
			budget = DefaultActionTimeout
		}
		actx, cancel := context.WithTimeout(ctx, budget)
		err := pr.do(actx, a, res)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("not done within %v", budget)
			}
			return fmt.Errorf("render: %s: action %d (%s): %w: %w", pr.req.URL, i+1, a, ErrAction, err)
		}
	}
	return nil
}

func (pr *pageRun) do(ctx context.Context, a Action, res *Result) error {
	switch a.Kind {
	case ActWait:
		return pr.waitSelector(ctx, strings.TrimSpace(a.Selector))
	case ActClick:
		expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false;
			e.scrollIntoView({block: "center"}); e.click(); return true; })()`, jsString(strings.TrimSpace(a.Selector)))
		found, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			return err
		}
		if !found {
			return errors.New("no element matches")
		}
		return nil
	case ActScroll:
		return scroll(ctx)
	case ActEval:
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](a.Script, chromedp.EvalAwaitPromise))
		if err != nil {
			return err
		}
		if len(v) > MaxScriptResultBytes {
			return fmt.Errorf("result of %d bytes, at most %d", len(v), MaxScriptResultBytes)
		}
		if len(v) == 0 {
			v = []byte("null")
		}
		if res.Scripts == nil {
			res.Scripts = map[string]json.RawMessage{}
		}
		res.Scripts[a.Name] = json.RawMessage(v)
		return nil
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// scroll scrolls to the bottom of the page, again each time the page
// grows (an infinite list loading more), until its height stays the same
// for scrollQuiet or ctx ends (which ends the scroll, not in error).
func scroll(ctx context.Context) error {
	const expr = `(() => { const h = document.documentElement ? document.documentElement.scrollHeight : 0; window.scrollTo(0, h); return h; })()`
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, since := -1, time.Now()
	for {
		h, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if h != last {
			last, since = h, time.Now()
		} else if time.Since(since) >= scrollQuiet {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil
		}
	}
}
