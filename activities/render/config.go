// Package render renders pages that need JavaScript with headless
// Chromium driven over the DevTools protocol (chromedp). A Pool belongs to
// one worker process: it starts its browsers itself, each in a process
// group of its own with a user-data-dir under a Baton prefix (so that a
// browser is stopped with every helper it forked, and the leftovers of a
// killed worker are swept when the next one starts), renders at most Tabs
// pages at a time, gives every navigation its own deadline, discards a
// crashed tab and retries its page once, and retires a browser after a
// number of pages or an age. Every request a page makes — the document,
// its redirects, subresources, XHR, fetch, workers' — is paused and judged
// by the caller's policy before it leaves the browser.
package render

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Defaults of DefaultConfig, sized for a worker on 2 cores.
const (
	DefaultTabs            = 4
	DefaultPagesPerBrowser = 100
	DefaultBrowserMaxAge   = 10 * time.Minute
	DefaultTimeout         = 15 * time.Second
	DefaultMaxHTMLBytes    = 10 << 20
	DefaultJSHeapMB        = 512
	// DirPrefix starts the name of every user-data-dir of a Pool, under
	// Config.TempDir: DirPrefix-<worker pid>-<n>.
	DirPrefix = "baton-chromium-"
)

// Config configures a Pool. Validate names the first bad field.
type Config struct {
	// ExecPath is the browser binary; empty: the first of
	// /usr/lib/chromium/chromium (Debian's binary, not its launcher
	// script), chromium, chromium-browser, google-chrome found.
	ExecPath string
	// Tabs is how many pages render at once, across the Pool's browsers.
	Tabs int
	// TabsPerBrowser is how many tabs share one browser process; Tabs /
	// TabsPerBrowser browsers (rounded up) run at once.
	TabsPerBrowser int
	// PagesPerBrowser and BrowserMaxAge retire a browser (after its open
	// pages end) once it rendered that many pages or is that old.
	PagesPerBrowser int
	BrowserMaxAge   time.Duration
	// Timeout is a page's budget when its Request sets none: navigation,
	// waiting and reading the DOM.
	Timeout time.Duration
	// MaxHTMLBytes bounds a rendered DOM's HTML; a larger one fails.
	MaxHTMLBytes int
	// JSHeapMB bounds a tab's JavaScript heap (V8's old space): a page
	// that allocates past it crashes its tab instead of the machine.
	JSHeapMB int
	// TempDir holds the user-data-dirs; empty: os.TempDir().
	TempDir string
	// Flags are extra command-line flags ("--name=value").
	Flags []string
}

// DefaultConfig returns the defaults: 4 tabs, 2 a browser, a browser
// retired after 100 pages or 10 minutes, 15 s a page.
func DefaultConfig() Config {
	return Config{
		Tabs:            DefaultTabs,
		TabsPerBrowser:  2,
		PagesPerBrowser: DefaultPagesPerBrowser,
		BrowserMaxAge:   DefaultBrowserMaxAge,
		Timeout:         DefaultTimeout,
		MaxHTMLBytes:    DefaultMaxHTMLBytes,
		JSHeapMB:        DefaultJSHeapMB,
	}
}

// ConfigError names the field of a Config that is wrong.
type ConfigError struct{ Field, Msg string }

func (e *ConfigError) Error() string { return "render config: " + e.Field + ": " + e.Msg }

// Validate returns a *ConfigError naming the first bad field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Tabs < 1 || c.Tabs > 256:
		return bad("Tabs", "%d is not in [1, 256]", c.Tabs)
	case c.TabsPerBrowser < 1:
		return bad("TabsPerBrowser", "%d is not positive", c.TabsPerBrowser)
	case c.PagesPerBrowser < 1:
		return bad("PagesPerBrowser", "%d is not positive", c.PagesPerBrowser)
	case c.BrowserMaxAge <= 0:
		return bad("BrowserMaxAge", "%v is not positive", c.BrowserMaxAge)
	case c.Timeout <= 0:
		return bad("Timeout", "%v is not positive", c.Timeout)
	case c.MaxHTMLBytes < 1:
		return bad("MaxHTMLBytes", "%d is not positive", c.MaxHTMLBytes)
	case c.JSHeapMB < 16:
		return bad("JSHeapMB", "%d is below 16", c.JSHeapMB)
	}
	if c.ExecPath != "" {
		if _, err := exec.LookPath(c.ExecPath); err != nil {
			return bad("ExecPath", "%v (install it: make deps)", err)
		}
	}
	if c.TempDir != "" {
		if fi, err := os.Stat(c.TempDir); err != nil || !fi.IsDir() {
			return bad("TempDir", "%q is not a directory", c.TempDir)
		}
	}
	return nil
}

// execPath returns the browser binary of c.
func (c Config) execPath() (string, error) {
	if c.ExecPath != "" {
		return c.ExecPath, nil
	}
	for _, p := range []string{"/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("render: no chromium found (install it: make deps)")
}

func (c Config) tempDir() string {
	if c.TempDir != "" {
		return c.TempDir
	}
	return os.TempDir()
}
