package crawl

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const fiftyMB = 50 << 20

// streamBody writes size bytes of HTML-ish filler from one small buffer
// (never allocating the body) and returns how many bytes were written.
func streamBody(w http.ResponseWriter, size int64) int64 {
	chunk := bytes.Repeat([]byte("<p>filler filler filler filler</p>\n"), 1000)
	var n int64
	for n < size {
		c := chunk
		if rest := size - n; rest < int64(len(c)) {
			c = c[:rest]
		}
		k, err := w.Write(c)
		n += int64(k)
		if err != nil {
			break
		}
	}
	return n
}

// A 50 MB body streamed without Content-Length fails with a clear error,
// is not read to its end, and costs bounded memory. Not parallel: it
// measures the process's allocations.
func TestHugeStreamedBody(t *testing.T) {
	written := make(chan int64, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.(http.Flusher).Flush() // chunked: no Content-Length
		written <- streamBody(w, fiftyMB)
	})
	e := NewEngine()
	o := DefaultOptions()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	p := e.Fetch(context.Background(), get(srv.URL+"/huge"), Auth{}, 0, o)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if p.Error != "body exceeds 10485760 bytes" || p.Attempts != 1 || p.StatusCode != 200 {
		t.Fatalf("huge body: %+v", p)
	}
	if p.Bytes <= 10<<20 || p.Bytes > 11<<20 {
		t.Errorf("read %d bytes, want just over the 10 MiB limit", p.Bytes)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("50 MB body refused after %s, %d bytes read, %.1f MiB allocated", elapsed, p.Bytes, float64(alloc)/(1<<20))
	if alloc > 40<<20 && !raceEnabled {
		t.Errorf("allocated %.1f MiB for a body bounded at 10 MiB", float64(alloc)/(1<<20))
	}
	if n := <-written; n >= fiftyMB {
		t.Errorf("the server wrote all of the %d bytes: the client read to the end", n)
	}
}

func TestHugeBodyVariants(t *testing.T) {
	t.Parallel()
	gz := func(size int) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(bytes.Repeat([]byte{' '}, size))
		zw.Close()
		return b.Bytes()
	}
	bomb := gz(20 << 20) // ~20 KB that inflate to 20 MiB
	small := gz(1000)
	var bodyStarted atomic.Bool
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declared": // Content-Length says 50 MB: refused before the body
			w.Header().Set("Content-Length", strconv.Itoa(fiftyMB))
			w.WriteHeader(200)
			bodyStarted.Store(true)
			streamBody(w, fiftyMB)
		case "/bomb":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/html")
			w.Write(bomb)
		case "/smallgz":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/html")
			w.Write(small)
		case "/exact":
			w.Write(bytes.Repeat([]byte("x"), 1000))
		case "/over":
			w.Write(bytes.Repeat([]byte("x"), 1001))
		default:
			http.NotFound(w, r)
		}
	})
	e := NewEngine()
	o := testOptions()
	o.MaxBodyBytes = 1000
	ctx := context.Background()
	if p := e.Fetch(ctx, get(srv.URL+"/exact"), Auth{}, 0, o); !p.OK() || p.Bytes != 1000 {
		t.Errorf("body at the limit: %+v", p)
	}
	if p := e.Fetch(ctx, get(srv.URL+"/over"), Auth{}, 0, o); p.Error != "body exceeds 1000 bytes" || p.Attempts != 1 {
		t.Errorf("body one byte over: %+v", p)
	}
	o.MaxBodyBytes = 1 << 20
	if p := e.Fetch(ctx, get(srv.URL+"/declared"), Auth{}, 0, o); p.Error != "body exceeds 1048576 bytes" {
		t.Errorf("declared 50 MB: %+v", p)
	}
	head := get(srv.URL + "/declared")
	head.Method = "HEAD"
	if p := e.Fetch(ctx, head, Auth{}, 0, o); !p.OK() || p.StatusCode != 200 {
		t.Errorf("HEAD of a 50 MB resource: %+v", p)
	}
	// The gzip bomb, asked for explicitly (so Go does not decode it).
	req := get(srv.URL + "/bomb")
	req.Header = map[string]string{"Accept-Encoding": "gzip"}
	if p := e.Fetch(ctx, req, Auth{}, 0, o); p.Error != "body exceeds 1048576 bytes" {
		t.Errorf("gzip bomb: %+v", p)
	}
	req.URL = srv.URL + "/smallgz"
	if p := e.Fetch(ctx, req, Auth{}, 0, o); !p.OK() || p.Bytes != 1000 {
		t.Errorf("small gzip body: %+v", p)
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	var loopHits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			loopHits.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/hop":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("/hop?n=%d", n-1), http.StatusMovedPermanently)
				return
			}
			fmt.Fprint(w, "<title>landed</title>")
		default:
			http.NotFound(w, r)
		}
	})
	e := NewEngine()
	o := testOptions()
	ctx := context.Background()
	p := e.Fetch(ctx, get(srv.URL+"/loop"), Auth{}, 0, o)
	if !strings.HasPrefix(p.Error, "stopped after 10 redirects") || p.Attempts != 1 {
		t.Errorf("redirect loop: %+v", p)
	}
	if n := loopHits.Load(); n != 11 {
		t.Errorf("loop requested %d times, want 11", n)
	}
	p = e.Fetch(ctx, get(srv.URL+"/hop?n=3"), Auth{}, 0, o)
	if !p.OK() || p.FinalURL != srv.URL+"/hop?n=0" || p.Title != "landed" || p.URL != srv.URL+"/hop?n=3" {
		t.Errorf("3 redirects: %+v", p)
	}
	o.MaxRedirects = 2
	if p := e.Fetch(ctx, get(srv.URL+"/hop?n=3"), Auth{}, 0, o); !strings.HasPrefix(p.Error, "stopped after 2 redirects") {
		t.Errorf("3 redirects, 2 allowed: %+v", p)
	}
	o.MaxRedirects = -1
	if p := e.Fetch(ctx, get(srv.URL+"/hop?n=3"), Auth{}, 0, o); !p.OK() || p.StatusCode != 301 {
		t.Errorf("no redirects followed: %+v", p)
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	var slowHits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow": // headers after 10 s
			slowHits.Add(1)
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
		case "/trickle": // headers at once, then a byte every 50 ms
			w.Header().Set("Content-Type", "text/html")
			for i := 0; i < 200; i++ {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(50 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	})
	e := NewEngine()
	o := testOptions()
	o.Timeout, o.Retries = 300*time.Millisecond, 0
	ctx := context.Background()
	if p := e.Fetch(ctx, get(srv.URL+"/slow"), Auth{}, 0, o); p.Error != "timeout after 300ms" || p.Attempts != 1 {
		t.Errorf("slow headers: %+v", p)
	}
	if p := e.Fetch(ctx, get(srv.URL+"/trickle"), Auth{}, 0, o); p.Error != "timeout after 300ms" || p.StatusCode != 200 {
		t.Errorf("slow body: %+v", p)
	}
	o.Retries = 1
	before := slowHits.Load()
	if p := e.Fetch(ctx, get(srv.URL+"/slow"), Auth{}, 0, o); p.Error != "timeout after 300ms" || p.Attempts != 2 || slowHits.Load()-before != 2 {
		t.Errorf("timeouts are retried: %+v", p)
	}
	// The caller's deadline wins over the timeout, and is not retried.
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if p := e.Fetch(dctx, get(srv.URL+"/slow"), Auth{}, 0, o); !strings.HasPrefix(p.Error, "canceled") || p.Attempts != 1 {
		t.Errorf("caller's deadline: %+v", p)
	}
}

// An endless link trap (every page links to a deeper new page) is stopped by
// MaxDepth: a crawl that follows the links it is given ends.
func TestLinkTrap(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/trap/") {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/trap/"))
		fmt.Fprintf(w, `<a href="/trap/%d">deeper</a> <a href="/trap/%d?x=%d">deeper still</a>`, n+1, n+1, n)
	})
	e := NewEngine()
	o := testOptions()
	o.Follow, o.MaxDepth = true, 4
	type item struct {
		url   string
		depth int
	}
	seen := map[string]bool{}
	queue := []item{{srv.URL + "/trap/0", 0}}
	maxDepth := 0
	for len(queue) > 0 && len(seen) < 1000 {
		it := queue[0]
		queue = queue[1:]
		p := e.Fetch(context.Background(), get(it.url), Auth{}, it.depth, o)
		if !p.OK() {
			t.Fatal(p.Error)
		}
		maxDepth = max(maxDepth, it.depth)
		for _, l := range p.Links {
			if !seen[l] {
				seen[l] = true
				queue = append(queue, item{l, it.depth + 1})
			}
		}
	}
	if maxDepth != 4 {
		t.Errorf("deepest page fetched at depth %d, want 4", maxDepth)
	}
	// Depth 0: /trap/0; each depth d > 0: /trap/d and /trap/d?x=d-1.
	if n := hits.Load(); n != 1+2*4 {
		t.Errorf("%d trap pages fetched, want 9", n)
	}
}

func TestDenyPrivate(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	e := NewEngine()
	o := testOptions()
	o.DenyPrivate = true
	if p := e.Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o); !strings.HasPrefix(p.Error, "refused private address 127.0.0.1") || p.Attempts != 0 {
		t.Errorf("a page at depth 0 that is not a typed seed (a sitemap lists it): %+v", p)
	}
	o.TypedURLs = []string{srv.URL + "/"}
	if p := e.Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o); !p.OK() {
		t.Errorf("typed seed on loopback: %+v", p)
	}
	for _, u := range []string{srv.URL + "/", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/"} {
		if p := e.Fetch(context.Background(), get(u), Auth{}, 1, o); !strings.HasPrefix(p.Error, "refused private address 127.0.0.1") || p.Attempts != 0 {
			t.Errorf("followed link %s: %+v", u, p)
		}
	}
	// The guarded transport checks the address it dials, whatever the name.
	_, err := (&http.Client{Transport: e.guarded}).Get(srv.URL + "/")
	var pe *privateAddrError
	if !errors.As(err, &pe) {
		t.Errorf("guarded transport dialled loopback: %v", err)
	}
}

// Deeply nested matches cannot make field extraction quadratic: the text
// kept is bounded by MaxFieldBytes.
func TestNestedFieldsBounded(t *testing.T) {
	t.Parallel()
	nested := func(depth int) string {
		return strings.Repeat("<div>"+strings.Repeat("word ", 100), depth) + strings.Repeat("</div>", depth)
	}
	// 400 levels of 500 bytes: the text of all the matches is 40 MB.
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/deeper" {
			fmt.Fprint(w, nested(600))
			return
		}
		fmt.Fprint(w, nested(400))
	})
	o := testOptions()
	o.IgnoreRobots = true
	o.Selectors = map[string]string{"div": "div"}
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	if !p.OK() {
		t.Fatal(p.Error)
	}
	total := 0
	for _, v := range p.Fields["div"] {
		total += len(v)
	}
	if total > MaxFieldBytes || len(p.Fields["div"]) == 0 {
		t.Errorf("%d values, %d bytes of field text (bound %d)", len(p.Fields["div"]), total, MaxFieldBytes)
	}
	// Deeper than the HTML parser goes: an error, not silently empty fields.
	p = NewEngine().Fetch(context.Background(), get(srv.URL+"/deeper"), Auth{}, 0, o)
	if !strings.HasPrefix(p.Error, "parse HTML: ") || p.StatusCode != 200 {
		t.Errorf("600 levels: %+v", p)
	}
}

// The zero Options mean the defaults where zero has no meaning of its own.
func TestZeroOptions(t *testing.T) {
	t.Parallel()
	var rc recorder
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		rc.record(r)
		fmt.Fprint(w, "<title>t</title>")
	})
	task := rolesTask()
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/"), AuthOf(task), 0, Options{})
	if !p.OK() || p.Title != "t" || p.Links != nil {
		t.Fatalf("zero options: %+v", p)
	}
	got := rc.last(t)
	if got.Header.Get("User-Agent") != DefaultUserAgent || got.Cookies["c"] != "1" || got.Header.Get("Authorization") != "Bearer x" {
		t.Errorf("server saw %v", got.Header)
	}
	if d := (Options{}).withDefaults(); d.Parallelism != DefaultParallelism || d.MaxBodyBytes != DefaultMaxBodyBytes ||
		d.Timeout != DefaultTimeout || d.MaxRedirects != DefaultMaxRedirects || d.Retries != 0 || d.IgnoreRobots {
		t.Errorf("defaults %+v", d)
	}
}
