package render

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// readTimeout bounds reading the DOM (and the screenshot) of a settled page.
const readTimeout = 10 * time.Second

var errCrashed = errors.New("tab crashed")

// pageRun is the state of one page in its tab, fed by the tab's events.
type pageRun struct {
	req       Request
	doc       *url.URL
	mainFrame cdp.FrameID

	mu         sync.Mutex
	inflight   map[network.RequestID]bool
	last       time.Time // the last request started or ended
	docResp    *network.Response
	docRefused error
	docDialErr error // the proxy's dial of the document's host:port failed
	loaded     chan struct{}
	loadedOnce sync.Once

	refused, blocked, dialRefused atomic.Int32
}

// renderIn renders req in t, then cleans t for the next page; dirty: t
// did not clean and must be discarded.
func (p *Pool) renderIn(ctx context.Context, t *tab, req Request) (res Result, dirty bool, err error) {
	start := time.Now()
	res.URL = req.URL
	doc, _ := url.Parse(req.URL)
	pr := &pageRun{req: req, doc: doc, mainFrame: t.frame, inflight: map[network.RequestID]bool{}, last: time.Now(), loaded: make(chan struct{})}
	// pctx is the page's: its end stops the page's listeners, after the
	// tab is clean (the page's requests paused meanwhile are judged).
	pctx, crash := context.WithCancelCause(t.ctx)
	defer crash(nil)
	t.setPage(pr)
	defer func() {
		if err == nil && !dirty {
			dirty = t.clean(doc) != nil
		} else {
			dirty = true // its scripts may still run: the tab goes
		}
		t.setPage(nil)
	}()
	defer context.AfterFunc(ctx, func() { crash(ctx.Err()) })()
	defer func() {
		res.Refused, res.Blocked = int(pr.refused.Load()+pr.dialRefused.Load()), int(pr.blocked.Load())
		res.Duration = time.Since(start)
		if err != nil && errors.Is(context.Cause(pctx), errCrashed) {
			err = &CrashError{Err: err}
		} else if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			err = &CrashError{Browser: true, Err: err}
		}
	}()
	if err := chromedp.Listen(pctx, pr.listener(crash)); err != nil {
		return res, true, &CrashError{Browser: true, Err: err}
	}
	if err := pr.setUp(pctx, t); err != nil {
		return res, true, fmt.Errorf("render: set up tab: %w", err)
	}

	dctx, dcancel := context.WithTimeout(pctx, req.Timeout)
	defer dcancel()
	nav, err := chromedp.Call(dctx, page.Navigate, page.NavigateParams{URL: req.URL})
	if err == nil && nav.ErrorText != "" {
		if r := pr.refusedDoc(); r != nil {
			return res, false, &RefusedError{URL: req.URL, Reason: r}
		}
		if r := pr.dialErr(); r != nil {
			return res, false, fmt.Errorf("render: %s: %s: %w", req.URL, nav.ErrorText, r)
		}
		return res, false, fmt.Errorf("render: %s: %s", req.URL, nav.ErrorText)
	}
	if err == nil {
		err = pr.wait(dctx)
	}
	if err == nil {
		if err = pr.act(pctx, &res); errors.Is(err, ErrAction) {
			return res, true, err
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, false, fmt.Errorf("render: %w", ctx.Err())
		}
		if errors.Is(dctx.Err(), context.DeadlineExceeded) && context.Cause(pctx) == nil {
			return res, false, fmt.Errorf("render: %w within %v (%s)", ErrNotSettled, req.Timeout, req.Wait)
		}
		return res, false, fmt.Errorf("render: %s: %w", req.URL, err)
	}
	res, err = p.read(pctx, pr, res)
	return res, false, err
}

// setUp judges the page's every request and sets its user agent and
// cookie.
func (pr *pageRun) setUp(ctx context.Context, t *tab) error {
	agent := t.agent
	if pr.req.UserAgent != "" {
		agent = pr.req.UserAgent
	}
	if agent != t.agentSet {
		// Slow (hundreds of ms): set only when it changes.
		if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: agent}); err != nil {
			return err
		}
		t.agentSet = agent
	}
	if cookies := cookieParams(pr.req.Cookie, pr.req.URL); len(cookies) > 0 {
		if _, err := chromedp.Call(ctx, network.SetCookies, network.SetCookiesParams{Cookies: cookies}); err != nil {
			return err
		}
	}
	return nil
}

// cookieParams splits a Cookie header into cookies of the URL.
func cookieParams(header, u string) []*network.CookieParam {
	var out []*network.CookieParam
	for _, part := range strings.Split(header, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && name != "" {
			out = append(out, &network.CookieParam{Name: name, Value: value, URL: u})
		}
	}
	return out
}

// listener follows the tab's requests in flight, its document's response,
// its load event and its crash; it runs in the tab's reading loop.
func (pr *pageRun) listener(crash context.CancelCauseFunc) func(any) {
	return func(ev any) {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			pr.inflight[ev.RequestID] = true
			pr.last = time.Now()
		case *network.EventLoadingFinished:
			delete(pr.inflight, ev.RequestID)
			pr.last = time.Now()
		case *network.EventLoadingFailed:
			delete(pr.inflight, ev.RequestID)
			pr.last = time.Now()
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeDocument && ev.FrameID == pr.mainFrame {
				pr.docResp = ev.Response
			}
		case *page.EventLoadEventFired:
			pr.loadedOnce.Do(func() { close(pr.loaded) })
		case *inspector.EventTargetCrashed:
			crash(errCrashed)
		}
	}
}

func (pr *pageRun) dialErr() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.docDialErr
}

func (pr *pageRun) refusedDoc() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.docRefused
}

// wait waits for the page's wait condition.
func (pr *pageRun) wait(ctx context.Context) error {
	w := pr.req.Wait
	if sel, ok := strings.CutPrefix(w, WaitSelector); ok {
		return pr.waitSelector(ctx, strings.TrimSpace(sel))
	}
	select {
	case <-pr.loaded:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w != WaitNetworkIdle {
		return nil
	}
	until := untilExpr(pr.req.Until)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pr.mu.Lock()
		idle := len(pr.inflight) == 0 && time.Since(pr.last) >= IdleTime
		pr.mu.Unlock()
		if idle {
			return nil
		}
		if until != "" {
			if there, err := chromedp.Run(ctx, chromedp.Evaluate[bool](until)); err == nil && there {
				return nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// untilExpr is a script true when every element of until is there.
func untilExpr(until []Want) string {
	if len(until) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("(() => { const has = (s, a) => { try { const e = document.querySelector(s); " +
		"return !!e && (a ? e.hasAttribute(a) : e.textContent.trim() !== \"\"); } catch (_) { return false; } }; return true")
	for _, w := range until {
		fmt.Fprintf(&b, " && has(%s, %s)", jsString(w.CSS), jsString(w.Attr))
	}
	b.WriteString("; })()")
	return b.String()
}

// selectorRetry is the pause before waitSelector asks again, when the
// page's document changed under its script.
const selectorRetry = 10 * time.Millisecond

// waitSelectorExpr is a script whose promise resolves once an element
// matches the selector %s: it looks again at every change of the DOM
// (and every 100 ms, for changes no mutation reports), inside the page.
const waitSelectorExpr = `new Promise((resolve) => {
	const sel = %s;
	const has = () => document.querySelector(sel) !== null;
	if (has()) { resolve(true); return; }
	let obs, iv;
	const look = () => { if (has()) { obs.disconnect(); clearInterval(iv); resolve(true); } };
	obs = new MutationObserver(look);
	obs.observe(document, {subtree: true, childList: true, attributes: true});
	iv = setInterval(look, 100);
})`

// waitSelector waits for an element matching sel with one script that
// resolves when it is there, so that waiting costs no round trip to the
// page per look; when the page's document is replaced meanwhile (a
// redirect by script), it asks the new one.
func (pr *pageRun) waitSelector(ctx context.Context, sel string) error {
	expr := fmt.Sprintf(waitSelectorExpr, jsString(sel))
	for {
		found, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr, chromedp.EvalAwaitPromise))
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && strings.Contains(err.Error(), "SyntaxError") {
			return fmt.Errorf("selector %q: %w", sel, err)
		}
		if found {
			return nil
		}
		select {
		case <-time.After(selectorRetry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// domRead is what read asks of a settled page.
type domRead struct {
	HTML  string `json:"html"`
	Title string `json:"title"`
	URL   string `json:"url"`
	Size  int    `json:"size"`
}

// read reads the settled page's DOM, title, URL and document response.
func (p *Pool) read(ctx context.Context, pr *pageRun, res Result) (Result, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	expr := fmt.Sprintf(`(() => { const h = document.documentElement ? document.documentElement.outerHTML : "";
		return h.length > %d ? {size: h.length} : {html: h, title: document.title, url: location.href, size: h.length}; })()`, p.cfg.MaxHTMLBytes)
	d, err := chromedp.Run(rctx, chromedp.Evaluate[domRead](expr))
	if err != nil {
		return res, fmt.Errorf("render: read the DOM: %w", err)
	}
	if d.Size > p.cfg.MaxHTMLBytes {
		return res, fmt.Errorf("render: rendered HTML exceeds %d bytes", p.cfg.MaxHTMLBytes)
	}
	res.HTML, res.Title, res.FinalURL = d.HTML, d.Title, d.URL
	pr.mu.Lock()
	if r := pr.docResp; r != nil {
		res.Status = int(r.Status)
		res.Header = http.Header{}
		for k, v := range r.Headers {
			for _, line := range strings.Split(fmt.Sprint(v), "\n") {
				res.Header.Add(k, line)
			}
		}
	}
	pr.mu.Unlock()
	if pr.req.Screenshot {
		if res.Screenshot, err = chromedp.Run(rctx, chromedp.CaptureScreenshot()); err != nil {
			return res, fmt.Errorf("render: screenshot: %w", err)
		}
	}
	return res, nil
}
