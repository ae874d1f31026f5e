package jobs

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Bodies are kept compressed with zstd (a stored body of the job store,
// or a file "<sha256 of the URL>.zst" of a bodies directory): `zstd -d`
// reads such a file.
var (
	zencOnce sync.Once
	zenc     *zstd.Encoder
)

func codecs() {
	zencOnce.Do(func() {
		// EncodeAll is safe for concurrent use.
		zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	})
}

// CompressBody compresses a page body for storing.
func CompressBody(body []byte) []byte {
	codecs()
	return zenc.EncodeAll(body, make([]byte, 0, len(body)/4+64))
}

// DecompressBody reads a body compressed by CompressBody, at most max
// bytes.
func DecompressBody(data []byte, max int64) ([]byte, error) {
	d, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("stored body: %w", err)
	}
	defer d.Close()
	out, err := io.ReadAll(io.LimitReader(d, max+1))
	if err != nil {
		return nil, fmt.Errorf("stored body: %w", err)
	}
	if int64(len(out)) > max {
		return nil, fmt.Errorf("stored body: larger than %d bytes", max)
	}
	return out, nil
}
