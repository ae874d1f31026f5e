package crawl

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// zstdStream compresses content as one streamed frame (no content size)
// whose header declares window.
func zstdStream(t *testing.T, window int, content []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(window), zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = w.Write(content)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	var h zstd.Header
	require.NoError(t, h.Decode(buf.Bytes()))
	require.Equal(t, uint64(window), h.WindowSize, "the frame declares the window")
	require.False(t, h.HasFCS, "a streamed frame: the decoder cannot size its window by the content")
	return buf.Bytes()
}

// A zstd response whose frame declares a 64 MiB window is refused (RFC
// 9659: 8 MiB at most in HTTP), and the decoder's memory is bounded:
// sixteen responses held half-read at once (the worker's default
// --concurrency) keep the heap under 256 MiB. Not parallel: it measures
// the process's heap.
func TestZstdWindowBounded(t *testing.T) {
	// Incompressible, so that the frame has several blocks: the first is
	// sent, the rest held back while the heap is measured.
	content := make([]byte, 600<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range content {
		content[i] = byte(rng.IntN(256))
	}
	frames := map[string][]byte{
		"/w64": zstdStream(t, 64<<20, content),
		"/w8":  zstdStream(t, 8<<20, content),
	}
	var held atomic.Int32
	// The round's release channel: a handler of the last round may still
	// be reading it when the next round makes its own.
	var mu sync.Mutex
	release := make(chan struct{})
	var once sync.Once
	current := func() chan struct{} { mu.Lock(); defer mu.Unlock(); return release }
	releaseAll := func() { mu.Lock(); defer mu.Unlock(); once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		frame, ok := frames[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "zstd")
		half := len(frame) / 2
		w.Write(frame[:half])
		w.(http.Flusher).Flush()
		held.Add(1)
		select {
		case <-current():
			w.Write(frame[half:])
		case <-r.Context().Done():
		}
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	o.Parallelism = 16
	o.Retries = 0

	inFlight := func(path string) (heap uint64, pages []Page) {
		held.Store(0)
		mu.Lock()
		release = make(chan struct{})
		once = sync.Once{}
		mu.Unlock()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		pages = make([]Page, 16)
		var wg sync.WaitGroup
		for i := range pages {
			wg.Go(func() { pages[i] = e.Fetch(context.Background(), get(srv.URL+path), Auth{}, 0, o) })
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		// Every response half sent (or every fetch over): give the decoders
		// a moment to reach the held-back blocks, then weigh the heap.
		deadline := time.Now().Add(10 * time.Second)
		for held.Load() < 16 && time.Now().Before(deadline) {
			select {
			case <-done:
				deadline = time.Now()
			case <-time.After(10 * time.Millisecond):
			}
		}
		time.Sleep(500 * time.Millisecond)
		runtime.GC()
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		releaseAll()
		wg.Wait()
		if during.HeapAlloc > before.HeapAlloc {
			heap = during.HeapAlloc - before.HeapAlloc
		}
		return heap, pages
	}

	heap, pages := inFlight("/w64")
	t.Logf("16 responses declaring a 64 MiB window: %d MiB of heap", heap>>20)
	require.Less(t, heap, uint64(256<<20), "16 hostile zstd responses in flight")
	for _, p := range pages {
		require.Contains(t, p.Error, "zstd body: window larger than 8388608 bytes", "%+v", p)
	}

	// An 8 MiB window is decoded, within the same bound.
	heap, pages = inFlight("/w8")
	t.Logf("16 responses with an 8 MiB window: %d MiB of heap", heap>>20)
	require.Less(t, heap, uint64(256<<20), "16 zstd responses with an 8 MiB window in flight")
	for _, p := range pages {
		require.True(t, p.OK(), "%+v", p)
		require.Equal(t, int64(len(content)), p.Bytes)
	}

	// The window is bounded by the body cap too: a 1 MiB cap refuses an
	// 8 MiB window before reserving it.
	o.MaxBodyBytes = 1 << 20
	releaseAll()
	p := e.Fetch(context.Background(), get(srv.URL+"/w8"), Auth{}, 0, o)
	require.Contains(t, p.Error, "zstd body: window larger than 1048576 bytes", "%+v", p)
}

// A page's <title> is kept to MaxTitleBytes (whole UTF-8 characters): a
// 3 MiB title cannot blow up a Task znode (EngineFetcher's Response) or a
// result row.
func TestHugeTitleTruncated(t *testing.T) {
	t.Parallel()
	title := strings.Repeat("é", 3<<19) // 3 MiB, two bytes a character
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title> x%s </title></head><body>ok</body></html>", title)
	})
	o := testOptions()
	o.IgnoreRobots = true
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.True(t, p.OK(), p.Error)
	require.LessOrEqual(t, len(p.Title), MaxTitleBytes)
	require.Greater(t, len(p.Title), MaxTitleBytes-4)
	require.True(t, strings.HasPrefix(p.Title, "xéé"), "%.20q", p.Title)
	require.True(t, strings.HasSuffix(p.Title, "é"), "cut on a character boundary: %q", p.Title[len(p.Title)-4:])
}

// A response's header is bounded (MaxResponseHeaderBytes), far below
// net/http's 10 MiB default.
func TestResponseHeaderBounded(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 40 {
			w.Header().Set(fmt.Sprintf("X-Filler-%d", i), strings.Repeat("h", 40<<10))
		}
		fmt.Fprint(w, "<title>fat headers</title>")
	})
	o := testOptions()
	o.IgnoreRobots = true
	o.Retries = 0
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.False(t, p.OK(), "1.6 MiB of response header accepted: %+v", p.Title)
	require.Contains(t, p.Error, "header")
}

// bitWriter writes a bit stream least significant bit first (brotli's
// order).
type bitWriter struct {
	b   []byte
	acc uint64
	n   uint
}

func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.n
	w.n += n
	for w.n >= 8 {
		w.b = append(w.b, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

func (w *bitWriter) align() []byte {
	if w.n > 0 {
		w.b = append(w.b, byte(w.acc))
		w.acc, w.n = 0, 0
	}
	return w.b
}

// hostileBrotli is the start of a brotli stream (RFC 7932) declaring a
// window of 2^wbits-16 bytes whose first meta-block is 16 MiB of stored
// bytes, of which it gives 100: a decoder sizes its ring buffer for the
// meta-block at once.
func hostileBrotli(wbits uint64) []byte {
	var w bitWriter
	switch {
	case wbits == 16:
		w.bits(0, 1)
	default:
		w.bits(1, 1)
		w.bits(wbits-17, 3) // 18..24
	}
	w.bits(0, 1)        // ISLAST
	w.bits(2, 2)        // MNIBBLES: 6
	w.bits(1<<24-1, 24) // MLEN-1
	w.bits(1, 1)        // ISUNCOMPRESSED
	return append(w.align(), make([]byte, 100)...)
}

// A brotli stream that declares a 16 MiB window (and a 16 MiB meta-block)
// in 104 bytes is refused before the decoder reserves it: sixteen of them
// in flight held 257 MiB of heap. The window is bounded as zstd's is: 8
// MiB, and max_body_bytes. Not parallel: it measures the process's heap.
func TestBrotliWindowBounded(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	var held atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var wbits uint64 = 24
		if r.URL.Path == "/w22" {
			wbits = 22
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "br")
		w.Write(hostileBrotli(wbits))
		w.(http.Flusher).Flush()
		held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	e := NewEngine()
	o := testOptions()
	o.IgnoreRobots = true
	o.Parallelism = 16
	o.Retries = 0
	o.Timeout = 20 * time.Second
	runtime.GC()
	var before, during runtime.MemStats
	runtime.ReadMemStats(&before)
	pages := make([]Page, 16)
	var wg sync.WaitGroup
	for i := range pages {
		wg.Go(func() { pages[i] = e.Fetch(context.Background(), get(srv.URL+"/w24"), Auth{}, 0, o) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for held.Load() < 16 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&during)
	releaseAll()
	wg.Wait()
	heap := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("16 brotli streams declaring a 16 MiB window: %d MiB of heap", heap>>20)
	require.Less(t, heap, int64(64<<20))
	for _, p := range pages {
		require.Contains(t, p.Error, "brotli body: window larger than 8388608 bytes", "%+v", p)
	}
	// A 4 MiB window is within the bounds (the stream is cut short).
	p := e.Fetch(context.Background(), get(srv.URL+"/w22"), Auth{}, 0, o)
	require.NotContains(t, p.Error, "window", "%+v", p)
}

// brotliWindow reads the window an encoder declares, for every window
// size brotli has.
func TestBrotliWindowHeader(t *testing.T) {
	t.Parallel()
	for lgwin := 10; lgwin <= 24; lgwin++ {
		var buf bytes.Buffer
		w := brotli.NewWriterOptions(&buf, brotli.WriterOptions{Quality: 5, LGWin: lgwin})
		w.Write([]byte("<title>x</title>"))
		require.NoError(t, w.Close())
		require.Equal(t, uint64(1<<lgwin-16), brotliWindow(buf.Bytes()[0]), "lgwin %d", lgwin)
	}
	require.Equal(t, uint64(1<<24-16), brotliWindow(hostileBrotli(24)[0]))
}
