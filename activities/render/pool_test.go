package render

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// testPool returns a Pool of a browser binary that must be installed
// (the tests fail, not skip, without it) with its user-data-dirs in a
// directory of the test.
func testPool(t *testing.T, mod func(*Config)) *Pool {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Tabs, cfg.TabsPerBrowser = 2, 2
	cfg.TempDir = t.TempDir()
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v (install it: make deps)", err)
	}
	t.Cleanup(p.Close)
	return p
}

func jsSite(t *testing.T) (*demosite.JSSite, string) {
	t.Helper()
	site := demosite.NewJS(demosite.DefaultJSConfig())
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	return site, srv.URL
}

func TestRenderWritesScriptContent(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	res, err := p.Render(context.Background(), Request{URL: base + "/js/item/3.html"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || res.Title != "Item 3" || res.FinalURL != base+"/js/item/3.html" {
		t.Errorf("status %d title %q final %q", res.Status, res.Title, res.FinalURL)
	}
	if !strings.Contains(res.HTML, `<span class="price">`+demosite.ItemPrice(3)+`</span>`) {
		t.Errorf("rendered HTML lacks the price written by script:\n%s", res.HTML)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("document Content-Type %q", ct)
	}
	for _, wait := range []string{WaitLoad, WaitSelector + "span.price"} {
		res, err := p.Render(context.Background(), Request{URL: base + "/js/item/4.html", Wait: wait, Screenshot: wait == WaitLoad})
		if err != nil {
			t.Fatalf("%s: %v", wait, err)
		}
		if wait != WaitLoad && !strings.Contains(res.HTML, demosite.ItemPrice(4)) {
			t.Errorf("%s: no price in %s", wait, res.HTML)
		}
		if wait == WaitLoad && !strings.HasPrefix(string(res.Screenshot), "\x89PNG") {
			t.Errorf("screenshot is no PNG (%d bytes)", len(res.Screenshot))
		}
	}
}

func TestNeverSettlingPageTimesOut(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	if _, err := p.Render(context.Background(), Request{URL: base + "/js/item/0.html"}); err != nil {
		t.Fatal(err) // the browser is up: what follows times the page alone
	}
	start := time.Now()
	_, err := p.Render(context.Background(), Request{URL: base + "/js/never.html", Timeout: 2 * time.Second})
	if err == nil || !errors.Is(err, ErrNotSettled) || err.Error() != "render: page did not settle within 2s (networkidle)" {
		t.Fatalf("err = %v, want render: page did not settle within 2s (networkidle)", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("took %v for a 2s timeout", d)
	}
	// The pool goes on.
	if _, err := p.Render(context.Background(), Request{URL: base + "/js/item/1.html"}); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
}

func TestCrashedTabRetriedAndCounted(t *testing.T) {
	p := testPool(t, func(c *Config) { c.JSHeapMB = 32 })
	_, base := jsSite(t)
	res, err := p.Render(context.Background(), Request{URL: base + "/js/crash.html", Timeout: 20 * time.Second})
	var crash *CrashError
	if !errors.As(err, &crash) || !strings.Contains(err.Error(), "tab crashed 2 times") {
		t.Fatalf("err = %v, want a crash twice", err)
	}
	if res.Crashes != 2 || p.Stats().Crashes != 2 {
		t.Errorf("crashes: result %d, stats %d; want 2", res.Crashes, p.Stats().Crashes)
	}
	res, err = p.Render(context.Background(), Request{URL: base + "/js/item/2.html"})
	if err != nil || res.Title != "Item 2" || res.Crashes != 0 {
		t.Fatalf("after crashes: %v, %+v", err, res)
	}
}

func TestCloseKillsProcessGroup(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	if _, err := p.Render(context.Background(), Request{URL: base + "/js/item/0.html"}); err != nil {
		t.Fatal(err)
	}
	dirs, groups := p.Dirs(), p.Groups()
	if n := Processes(dirs...); n != 1 {
		t.Fatalf("%d chromium processes with %v, want the browser", n, dirs)
	}
	if n := GroupProcesses(groups...); n < 3 {
		t.Fatalf("%d processes in the browser's group %v, want the browser and its helpers", n, groups)
	}
	p.Close()
	waitFor(t, 5*time.Second, func() bool { return Processes(dirs...) == 0 }, "no chromium process left with the pool's user-data-dir")
	waitFor(t, 5*time.Second, func() bool { return GroupProcesses(groups...) == 0 }, "no helper left in the browser's process group")
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("user-data-dir %s left behind: %v", d, err)
		}
	}
}

func TestBrowserRetiredAfterPages(t *testing.T) {
	p := testPool(t, func(c *Config) { c.PagesPerBrowser = 2; c.Tabs = 1 })
	_, base := jsSite(t)
	for k := range 5 {
		if _, err := p.Render(context.Background(), Request{URL: fmt.Sprintf("%s/js/item/%d.html", base, k), Wait: WaitLoad}); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.Started != 3 || s.Retired != 2 || s.Browsers != 1 {
		t.Errorf("stats %+v: want 3 browsers started for 5 pages at 2 a browser, 2 retired", s)
	}
}

// TestSweepKillsOrphans starts a browser as a killed worker leaves it:
// its process group running, its user-data-dir named for a pid that is
// gone.
func TestSweepKillsOrphans(t *testing.T) {
	tmp := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, fmt.Sprintf("%s%d-1", DirPrefix, dead.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-1", DirPrefix, os.Getpid()))
	for _, d := range []string{dir, live} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	path, err := DefaultConfig().execPath()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+dir, "--remote-debugging-port=0", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	waitFor(t, 20*time.Second, func() bool { return GroupProcesses(cmd.Process.Pid) >= 3 }, "the orphan browser and its helpers running")
	s, err := Sweep(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if s.Groups != 1 || s.Dirs != 1 {
		t.Errorf("swept %+v, want 1 group and 1 dir", s)
	}
	waitFor(t, 5*time.Second, func() bool { return GroupProcesses(cmd.Process.Pid) == 0 }, "no process left in the orphan's group")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan dir left: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the running worker's dir was removed: %v", err)
	}
}

// privateGuard refuses the hosts of refuse, as the crawl engine's
// --deny-private refuses private addresses.
type privateGuard struct{ refuse string }

func (g privateGuard) Allow(_ context.Context, u *url.URL) error {
	if u.Hostname() == g.refuse {
		return fmt.Errorf("refused private address %s (deny_private)", g.refuse)
	}
	return nil
}

func TestGuardRefusesPrivateRequests(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	// The same site on 127.0.0.2: the private address a page reaches.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewUnstartedServer(demosite.NewJS(demosite.DefaultJSConfig()))
	other.Listener = ln
	other.Start()
	t.Cleanup(other.Close)
	otherSite := other.Config.Handler.(*demosite.JSSite)
	to := strings.TrimPrefix(other.URL, "http://")
	policy := PolicyOf(privateGuard{refuse: "127.0.0.2"})

	res, err := p.Render(context.Background(), Request{URL: base + "/js/reach.html?to=" + to, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused != 1 || otherSite.Hits("/js/data/0.json") != 0 {
		t.Errorf("refused %d, private host hit %d times; want its fetch refused", res.Refused, otherSite.Hits("/js/data/0.json"))
	}
	_, err = p.Render(context.Background(), Request{URL: other.URL + "/js/item/0.html", Policy: policy})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "refused private address 127.0.0.2") {
		t.Errorf("document on the private host: err = %v", err)
	}
	if otherSite.Hits("/js/item/0.html") != 0 {
		t.Error("the refused document was requested")
	}
	// Without the policy the same page reaches it: the test can fail.
	if _, err := p.Render(context.Background(), Request{URL: base + "/js/reach.html?to=" + to}); err != nil {
		t.Fatal(err)
	}
	if otherSite.Hits("/js/data/0.json") != 1 {
		t.Errorf("unguarded: private host hit %d times, want 1", otherSite.Hits("/js/data/0.json"))
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	c := DefaultConfig()
	c.Tabs = 0
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Tabs" {
		t.Errorf("Validate = %v, want the field Tabs named", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCloseAfterBrowserKilled kills only the browser's main process (as
// the OOM killer may): its helpers outlive it unless the whole group is
// killed.
func TestCloseAfterBrowserKilled(t *testing.T) {
	p := testPool(t, nil)
	_, base := jsSite(t)
	if _, err := p.Render(context.Background(), Request{URL: base + "/js/item/0.html"}); err != nil {
		t.Fatal(err)
	}
	groups := p.Groups()
	if err := syscall.Kill(groups[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return !alive(groups[0]) }, "the browser's main process gone")
	p.Close()
	waitFor(t, 5*time.Second, func() bool { return GroupProcesses(groups...) == 0 }, "no helper left in the browser's process group")
}
