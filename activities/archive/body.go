package archive

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"sync"
)

// teeBody passes a response body through to the caller and keeps its
// first max bytes; at the body's end, or at Close, it hands them to done
// once.
type teeBody struct {
	raw       io.ReadCloser
	max       int64
	buf       bytes.Buffer
	truncated string
	once      sync.Once
	done      func(body []byte, truncated string)
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.raw.Read(p)
	t.keep(p[:n])
	switch {
	case errors.Is(err, io.EOF):
		t.finish()
	case err != nil && t.truncated == "":
		t.truncated = "disconnect"
	}
	return n, err
}

func (t *teeBody) keep(b []byte) {
	room := t.max - int64(t.buf.Len())
	if int64(len(b)) > room {
		b = b[:max(room, 0)]
		t.truncated = "length"
	}
	t.buf.Write(b)
}

// Close reads what is left of the body, up to the limit, so the archive
// holds the whole body even when the caller stopped early, then closes it.
func (t *teeBody) Close() error {
	drained := false
	if t.truncated == "" {
		room := t.max - int64(t.buf.Len())
		n, err := io.Copy(io.Discard, io.LimitReader(struct{ io.Reader }{t}, room+1))
		drained = err == nil && n <= room
	}
	if !drained && t.truncated == "" {
		t.truncated = "unspecified"
	}
	err := t.raw.Close()
	t.finish()
	return err
}

func (t *teeBody) finish() {
	t.once.Do(func() { t.done(t.buf.Bytes(), t.truncated) })
}

// gunzipBody decodes a gzip body for the caller while the teeBody under
// it keeps the bytes as received.
type gunzipBody struct {
	tee *teeBody
	zr  *gzip.Reader
	err error
}

func (g *gunzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.tee)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

func (g *gunzipBody) Close() error { return g.tee.Close() }
