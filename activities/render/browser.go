package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

// startTimeout bounds a browser's start.
const startTimeout = 30 * time.Second

// browser is one Chromium process group of a Pool. Its counters are
// guarded by the Pool's mutex.
type browser struct {
	n       int64
	dir     string // its --user-data-dir
	pgid    int
	ctx     context.Context // the browser's chromedp context: tabs derive from it
	cancel  func()
	started time.Time

	pages    int  // pages begun in it
	open     int  // pages in flight
	tabs     int  // tabs open, idle ones included
	retiring bool // takes no new page; closed when open reaches 0
	closed   bool
}

// flags are the command-line flags of every browser: headless, no
// sandbox (containers), and quiet: no background or component traffic
// (which would leave the guard's view), no QUIC, no first-run work. No
// spare renderer either: Chromium keeps one warm for the browser context
// that navigated last, and with a context per tab it starts a new one
// (and kills the last) at nearly every page, a renderer process's start
// each time.
func (c Config) flags(dir string) []chromedp.ExecAllocatorOption {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(dir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-crash-reporter", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,SpareRendererForSitePerProcess"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("js-flags", fmt.Sprintf("--max-old-space-size=%d", c.JSHeapMB)),
	}
	for _, f := range c.Flags {
		name, value, ok := cutFlag(f)
		if ok {
			opts = append(opts, chromedp.Flag(name, value))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	return opts
}

func cutFlag(f string) (name, value string, ok bool) {
	f = trimDashes(f)
	for i := 0; i < len(f); i++ {
		if f[i] == '=' {
			return f[:i], f[i+1:], true
		}
	}
	return f, "", false
}

func trimDashes(s string) string {
	for len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	return s
}

// start starts browser n: its own process group (so that closing it kills
// every helper it forked) and its own user-data-dir under DirPrefix.
func (p *Pool) start(n int64) (*browser, error) {
	dir := filepath.Join(p.cfg.tempDir(), fmt.Sprintf("%s%d-%d", DirPrefix, os.Getpid(), n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("render: user-data-dir: %w", err)
	}
	var cmd *exec.Cmd
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(p.path)}, p.cfg.flags(dir)...)
	opts = append(opts, chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
		cmd = c
		// Pdeathsig kills the browser with the worker; Setpgid puts its
		// helpers (zygote, renderers, network and GPU processes) in its
		// group, which close and Sweep kill as one.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	b := &browser{n: n, dir: dir, ctx: bctx, started: time.Now()}
	b.cancel = func() { bcancel(); acancel() }

	errc := make(chan error, 1)
	go func() { errc <- chromedp.Do(bctx) }() // starts the process
	var err error
	select {
	case err = <-errc:
	case <-time.After(startTimeout):
		err = fmt.Errorf("no answer within %v", startTimeout)
	}
	if cmd != nil && cmd.Process != nil {
		b.pgid = cmd.Process.Pid
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("render: start %s: %w", p.path, err)
	}
	return b, nil
}

// close kills the browser's process group and removes its user-data-dir.
func (b *browser) close() {
	if b.pgid > 0 {
		_ = syscall.Kill(-b.pgid, syscall.SIGKILL)
	}
	b.cancel()
	// The processes are gone (SIGKILL): nothing writes in dir any more,
	// but the kernel may take a moment to release them.
	for i := 0; i < 50; i++ {
		if err := os.RemoveAll(b.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
