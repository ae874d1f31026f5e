package render

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
)

// benchTabs is the tabs of both sides of BenchmarkRender.
const benchTabs = 4

// BenchmarkRender renders the JS items of the demo site through a Pool
// and through a bare chromedp loop (one browser, a tab per goroutine
// reused for every page) with the same tabs and wait, in one run. It
// reports pages/s, the RSS of the browser's processes per tab and the
// CPU (browser and Go) per page.
func BenchmarkRender(b *testing.B) {
	site := demosite.NewJS(demosite.JSConfig{Items: 500, JSEvery: 1})
	srv := httptest.NewServer(site)
	defer srv.Close()
	const wait = WaitSelector + "span.price"

	b.Run("pool", func(b *testing.B) {
		cfg := DefaultConfig()
		cfg.Tabs, cfg.TabsPerBrowser, cfg.TempDir = benchTabs, benchTabs, b.TempDir()
		p, err := New(cfg)
		if err != nil {
			b.Fatalf("%v (install it: make deps)", err)
		}
		defer p.Close()
		if _, err := p.Render(context.Background(), Request{URL: srv.URL + "/js/item/0.html", Wait: wait}); err != nil {
			b.Fatal(err)
		}
		measure(b, p.Groups, func(k int) error {
			res, err := p.Render(context.Background(), Request{URL: fmt.Sprintf("%s/js/item/%d.html", srv.URL, k%500), Wait: wait})
			if err == nil && !strings.Contains(res.HTML, demosite.ItemPrice(k%500)) {
				err = fmt.Errorf("item %d: no price", k%500)
			}
			return err
		})
	})

	b.Run("bare-chromedp", func(b *testing.B) {
		cfg := DefaultConfig()
		path, err := cfg.execPath()
		if err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(path)}, cfg.flags(dir)...)
		// A group of its own, so that its processes are measured as the pool's.
		opts = append(opts, chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		}))
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		defer acancel()
		bctx, bcancel := chromedp.NewContext(actx)
		defer bcancel()
		if err := chromedp.Do(bctx); err != nil {
			b.Fatal(err)
		}
		pgid := chromedp.FromContext(bctx).Browser.Process().Pid
		tabs := make(chan context.Context, benchTabs)
		for range benchTabs {
			tctx, tcancel := chromedp.NewContext(bctx)
			defer tcancel()
			if err := chromedp.Do(tctx); err != nil {
				b.Fatal(err)
			}
			tabs <- tctx
		}
		measure(b, func() []int { return []int{pgid} }, func(k int) error {
			tctx := <-tabs
			defer func() { tabs <- tctx }()
			ctx, cancel := context.WithTimeout(tctx, DefaultTimeout)
			defer cancel()
			u := fmt.Sprintf("%s/js/item/%d.html", srv.URL, k%500)
			if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("span.price"))); err != nil {
				return err
			}
			h, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
			if err == nil && !strings.Contains(h, demosite.ItemPrice(k%500)) {
				err = fmt.Errorf("item %d: no price", k%500)
			}
			return err
		})
	})
}

// measure renders b.N pages with benchTabs goroutines and reports the
// figures; groups are the browsers' process groups.
func measure(b *testing.B, groups func() []int, page func(k int) error) {
	cpu0 := groupCPU(groups()) + selfCPU()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchTabs)
	b.ResetTimer()
	start := time.Now()
	for range benchTabs {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= b.N {
					return
				}
				if err := page(k); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	rss := groupRSS(groups())
	cpu := groupCPU(groups()) + selfCPU() - cpu0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pages/s")
	b.ReportMetric(float64(rss)/benchTabs/(1<<20), "MiB-RSS/tab")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "CPU-ms/page")
}

// procStat returns the fields after the command of /proc/pid/stat.
func procStat(pid string) []string {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// forGroups calls f with the stat fields of every process of groups.
func forGroups(groups []int, f func([]string)) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		st := procStat(p.Name())
		if len(st) < 22 {
			continue
		}
		if g, err := strconv.Atoi(st[2]); err == nil {
			for _, want := range groups {
				if g == want {
					f(st)
				}
			}
		}
	}
}

// groupCPU is the CPU time of the groups' processes and their reaped
// children (clock ticks of 10 ms).
func groupCPU(groups []int) time.Duration {
	var ticks int64
	forGroups(groups, func(st []string) {
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			n, _ := strconv.ParseInt(st[i], 10, 64)
			ticks += n
		}
	})
	return time.Duration(ticks) * 10 * time.Millisecond
}

// groupRSS is the resident memory of the groups' processes, in bytes.
func groupRSS(groups []int) int64 {
	var pages int64
	forGroups(groups, func(st []string) {
		n, _ := strconv.ParseInt(st[21], 10, 64)
		pages += n
	})
	return pages * int64(os.Getpagesize())
}

func selfCPU() time.Duration {
	st := procStat(strconv.Itoa(os.Getpid()))
	if len(st) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(st[11], 10, 64)
	s, _ := strconv.ParseInt(st[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
