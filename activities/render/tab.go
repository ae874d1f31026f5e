package render

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// clearedStorage are the storage types of a page's origin cleared after
// it (the HTTP cache is kept).
const clearedStorage = "local_storage,indexeddb,websql,cache_storage,service_workers,file_systems,shared_storage,storage_buckets"

// cleanTimeout bounds the cleaning of a tab between two pages.
const cleanTimeout = 5 * time.Second

// tab is a tab of a browser, in a browser context of its own (cookies,
// cache and storage apart from the other tabs), reused page after page:
// cleaned between pages, discarded when it crashed or did not clean.
type tab struct {
	b      *browser
	ctx    context.Context
	cancel func()
	frame  cdp.FrameID // its main frame
	agent  string      // the browser's own User-Agent
	// agentSet is the User-Agent the tab sends (set by the last page).
	agentSet string

	proxy *tabProxy // dials the tab's connections

	mu  sync.Mutex
	cur *pageRun // the page whose requests the tab judges; nil: none
}

// openTab opens a tab in b with every request paused for judging.
func openTab(b *browser) (*tab, error) {
	px, err := newTabProxy()
	if err != nil {
		return nil, fmt.Errorf("render: tab proxy: %w", err)
	}
	tctx, tcancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext(func(p *target.CreateBrowserContextParams) {
		p.ProxyServer, p.ProxyBypassList = px.url(), "<-loopback>"
	}))
	cancel := func() { tcancel(); px.close() }
	t := &tab{b: b, ctx: tctx, cancel: cancel, proxy: px}
	opened := make(chan error, 1)
	go func() { opened <- t.setUp() }()
	select {
	case err := <-opened:
		if err != nil {
			cancel()
			return nil, &CrashError{Browser: true, Err: err}
		}
	case <-time.After(startTimeout):
		cancel()
		return nil, &CrashError{Browser: true, Err: fmt.Errorf("no tab within %v", startTimeout)}
	}
	return t, nil
}

func (t *tab) setUp() error {
	if err := chromedp.Do(t.ctx); err != nil {
		return err
	}
	t.frame = cdp.FrameID(chromedp.FromContext(t.ctx).Target.TargetID)
	v, err := chromedp.CallBrowser(t.ctx, cdpbrowser.GetVersion, cdp.Empty{})
	if err != nil {
		return err
	}
	t.agent = v.UserAgent
	paused := chromedp.Events(t.ctx, fetch.RequestPaused)
	go t.judge(paused)
	if _, err := chromedp.Call(t.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		return err
	}
	// A service worker's requests would not be paused: bypass them.
	_, err = chromedp.Call(t.ctx, network.SetBypassServiceWorker, network.SetBypassServiceWorkerParams{Bypass: true})
	return err
}

// clean forgets the last page's cookies and its origin's storage, so that
// nothing of a page reaches the next one. (A tab whose page failed, or
// did not settle, is discarded instead: its scripts may still run.)
func (t *tab) clean(doc *url.URL) error {
	ctx, cancel := context.WithTimeout(t.ctx, cleanTimeout)
	defer cancel()
	_, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{})
	if err == nil && doc != nil {
		origin := doc.Scheme + "://" + doc.Host
		_, err = chromedp.Call(ctx, storage.ClearDataForOrigin, storage.ClearDataForOriginParams{Origin: origin, StorageTypes: clearedStorage})
	}
	return err
}

// judge hands each request the tab pauses to the current page; one that
// comes between pages fails.
func (t *tab) judge(paused iter.Seq2[fetch.EventRequestPaused, error]) {
	for ev, err := range paused {
		if err != nil {
			return
		}
		t.mu.Lock()
		pr := t.cur
		t.mu.Unlock()
		if pr == nil {
			go func() {
				_, _ = chromedp.Call(t.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonAborted})
			}()
			continue
		}
		go pr.paused(t.ctx, &ev)
	}
}

// setPage makes pr the page whose requests the tab judges.
func (t *tab) setPage(pr *pageRun) {
	t.mu.Lock()
	t.cur = pr
	t.mu.Unlock()
	t.proxy.setPage(pr)
}
