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
// reused for every page, no interception, no cleaning) with the same
// browser flags, the same tabs and the same wait (selector:span.price; the items load no image,
// media or font, so the Pool's blocking changes nothing). Both sides
// open their tabs before the clock starts, and they take turns in rounds
// of a few pages, so that a change in the machine's load weighs on both
// alike. It reports pages/s of both and their ratio, the RSS of the
// browsers' processes per tab and the CPU (browser and Go) per page.
func BenchmarkRender(b *testing.B) {
	site := demosite.NewJS(demosite.JSConfig{Items: 500, JSEvery: 1})
	srv := httptest.NewServer(site)
	defer srv.Close()
	item := func(k int) (string, string) {
		return fmt.Sprintf("%s/js/item/%d.html", srv.URL, k%500), demosite.ItemPrice(k % 500)
	}
	pool := benchPool(b, item)
	defer pool.close()
	bare := benchBare(b, item)
	defer bare.close()

	b.ResetTimer()
	for done := 0; done < b.N; done += benchRound {
		n := min(benchRound, b.N-done)
		pool.run(b, done, n)
		bare.run(b, done, n)
	}
	b.StopTimer()
	pps := func(s *benchSide) float64 { return float64(b.N) / s.elapsed.Seconds() }
	b.ReportMetric(pps(pool), "pool-pages/s")
	b.ReportMetric(pps(bare), "bare-pages/s")
	b.ReportMetric(pps(pool)/pps(bare), "ratio")
	b.ReportMetric(pool.cpu.Seconds()*1000/float64(b.N), "pool-CPU-ms/page")
	b.ReportMetric(bare.cpu.Seconds()*1000/float64(b.N), "bare-CPU-ms/page")
	b.ReportMetric(float64(groupRSS(pool.groups()))/benchTabs/(1<<20), "pool-MiB-RSS/tab")
	b.ReportMetric(float64(groupRSS(bare.groups()))/benchTabs/(1<<20), "bare-MiB-RSS/tab")
}

// benchRound is the pages a side renders before the other takes its turn.
const benchRound = 4 * benchTabs

// benchSide is one side of BenchmarkRender: a page function, the process
// groups of its browsers, and its time and CPU so far.
type benchSide struct {
	page    func(k int) error
	groups  func() []int
	close   func()
	elapsed time.Duration
	cpu     time.Duration
}

// benchPool is the Pool side, its tabs opened.
func benchPool(b *testing.B, item func(int) (string, string)) *benchSide {
	cfg := DefaultConfig()
	cfg.Tabs, cfg.TabsPerBrowser, cfg.TempDir = benchTabs, benchTabs, b.TempDir()
	cfg.PagesPerBrowser = 1 << 30
	p, err := New(cfg)
	if err != nil {
		b.Fatalf("%v (install it: make deps)", err)
	}
	s := &benchSide{groups: p.Groups, close: p.Close}
	s.page = func(k int) error {
		u, price := item(k)
		res, err := p.Render(context.Background(), Request{URL: u, Wait: WaitSelector + "span.price"})
		if err == nil && !strings.Contains(res.HTML, price) {
			err = fmt.Errorf("%s: no price", u)
		}
		return err
	}
	s.warm(b)
	return s
}

// benchBare is the bare chromedp side, its tabs opened.
func benchBare(b *testing.B, item func(int) (string, string)) *benchSide {
	cfg := DefaultConfig()
	path, err := cfg.execPath()
	if err != nil {
		b.Fatal(err)
	}
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(path)}, cfg.flags(b.TempDir())...)
	// A group of its own, so that its processes are measured as the pool's.
	opts = append(opts, chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		b.Fatal(err)
	}
	pgid := chromedp.FromContext(bctx).Browser.Process().Pid
	tabs := make(chan context.Context, benchTabs)
	for range benchTabs {
		tctx, _ := chromedp.NewContext(bctx) // ends with bctx
		if err := chromedp.Do(tctx); err != nil {
			b.Fatal(err)
		}
		tabs <- tctx
	}
	s := &benchSide{groups: func() []int { return []int{pgid} }, close: func() { bcancel(); acancel() }}
	s.page = func(k int) error {
		tctx := <-tabs
		defer func() { tabs <- tctx }()
		ctx, cancel := context.WithTimeout(tctx, DefaultTimeout)
		defer cancel()
		u, price := item(k)
		if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("span.price"))); err != nil {
			return err
		}
		h, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
		if err == nil && !strings.Contains(h, price) {
			err = fmt.Errorf("%s: no price", u)
		}
		return err
	}
	s.warm(b)
	return s
}

// warm renders a page in each tab at once, so that every tab is open.
func (s *benchSide) warm(b *testing.B) {
	s.run(b, 0, benchTabs)
	s.elapsed, s.cpu = 0, 0
}

// run renders pages from..from+n with benchTabs goroutines and adds the
// time and CPU they took.
func (s *benchSide) run(b *testing.B, from, n int) {
	cpu0 := groupCPU(s.groups()) + selfCPU()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchTabs)
	start := time.Now()
	for range benchTabs {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				if err := s.page(from + k); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	s.cpu += groupCPU(s.groups()) + selfCPU() - cpu0
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
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
