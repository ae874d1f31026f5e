package archive_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/batoncrawl/baton/activities/archive"
)

// BenchmarkWriteExchange writes 20 KB HTML pages (request and response
// records, gzip'd, SHA-256) from one goroutine per core.
func BenchmarkWriteExchange(b *testing.B) {
	w, err := archive.NewWriter(b.TempDir(), archive.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("<p>Some text of a product page, price 10 EUR.</p>\n", 400)
	b.SetBytes(int64(len(body)))
	b.SetParallelism(1)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e := exchange(fmt.Sprintf("http://bench.test/%d", n.Add(1)), body)
			if _, err := w.WriteExchange(context.Background(), e); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
