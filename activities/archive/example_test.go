package archive_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/batoncrawl/baton/activities/archive"
)

// Capture feeds a Writer: each response is archived as received, a
// repeated payload as a revisit of its first response record.
func ExampleCapture() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "the same page")
	}))
	defer site.Close()
	dir, _ := os.MkdirTemp("", "warc")
	defer os.RemoveAll(dir)

	w, err := archive.NewWriter(dir, archive.DefaultConfig())
	if err != nil {
		panic(err)
	}
	idx := archive.NewIndex()
	client := &http.Client{Transport: archive.Capture(archive.NewTransport(),
		func(ctx context.Context, e archive.Exchange) {
			rec, err := w.WriteDeduplicated(ctx, e, idx)
			if err != nil {
				slog.Warn("archive", "url", e.URL, "err", err)
				return
			}
			fmt.Println(rec.Type)
		}, archive.CaptureOptions{})}
	for _, path := range []string{"/a", "/b"} {
		res, err := client.Get(site.URL + path)
		if err != nil {
			panic(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close() // the exchange reaches the writer here at the latest
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	// Output:
	// response
	// revisit
}
