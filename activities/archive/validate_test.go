package archive_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/archive"
)

func TestConfigValidateNamesTheBadField(t *testing.T) {
	if err := archive.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	cases := []struct {
		field string
		edit  func(*archive.Config)
	}{
		{"Prefix", func(c *archive.Config) { c.Prefix = "" }},
		{"Prefix", func(c *archive.Config) { c.Prefix = "../evil" }},
		{"Prefix", func(c *archive.Config) { c.Prefix = "a/b" }},
		{"MaxFileSize", func(c *archive.Config) { c.MaxFileSize = 0 }},
		{"DigestAlgorithm", func(c *archive.Config) { c.DigestAlgorithm = "md5" }},
		{"MaxOpenFiles", func(c *archive.Config) { c.MaxOpenFiles = 0 }},
		{"MaxOpenFiles", func(c *archive.Config) { c.MaxOpenFiles = 1000 }},
		{"Software", func(c *archive.Config) { c.Software = "" }},
	}
	for _, c := range cases {
		cfg := archive.DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", cfg, err, c.field)
		}
		if _, err := archive.NewWriter(t.TempDir(), cfg); err == nil {
			t.Errorf("NewWriter took %+v", cfg)
		}
	}
}

func TestNewWriterNeedsADirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := archive.NewWriter(filepath.Join(dir, "missing"), archive.DefaultConfig()); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing directory: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.NewWriter(file, archive.DefaultConfig()); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as directory: %v", err)
	}
}

func TestWriteExchangeRefusesMalformedExchanges(t *testing.T) {
	w := newWriter(t, t.TempDir(), nil)
	defer w.Close()
	cases := []struct {
		want string
		edit func(*archive.Exchange)
	}{
		{"absolute URL", func(e *archive.Exchange) { e.URL = "/relative" }},
		{"Method", func(e *archive.Exchange) { e.Method = "GET /x" }},
		{"StatusLine", func(e *archive.Exchange) { e.StatusLine = "HTTP/1.1 200 OK\r\nX-Evil: 1" }},
		{"StatusLine", func(e *archive.Exchange) { e.StatusLine = "200 OK" }},
		{"ResponseHeader: line 2 is empty", func(e *archive.Exchange) { e.ResponseHeader = []byte("A: 1\r\n\r\nB: 2\r\n") }},
		{"ResponseHeader: line 1", func(e *archive.Exchange) { e.ResponseHeader = []byte("A: 1\nB: 2\r\n") }},
		{"RequestHeader: line 1", func(e *archive.Exchange) { e.RequestHeader = []byte("Host: a.test") }},
		{"RemoteIP", func(e *archive.Exchange) { e.RemoteIP = "a.test" }},
		{"FetchedAt is zero", func(e *archive.Exchange) { e.FetchedAt = time.Time{} }},
		{"FetchedAt", func(e *archive.Exchange) { e.FetchedAt = e.FetchedAt.AddDate(-3000, 0, 0) }},
		{"Truncated", func(e *archive.Exchange) { e.Truncated = "bored" }},
	}
	for _, c := range cases {
		e := exchange("http://a.test/", "body")
		c.edit(&e)
		if _, err := w.WriteExchange(context.Background(), e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
}

func TestWritesAfterCloseOrCancel(t *testing.T) {
	w := newWriter(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.WriteExchange(ctx, exchange("http://a.test/", "x")); err == nil {
		t.Errorf("write with a cancelled context succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteExchange(context.Background(), exchange("http://a.test/", "x")); err != archive.ErrClosed {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// URLs as Go's client sends them (spaces, pipes, non-ASCII hosts and
// paths, IPv6 literals) are archived; a URL that does not parse is refused.
func TestWriteExchangeTakesURLsAsGoSendsThem(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, nil)
	want := map[string]bool{}
	for _, raw := range []string{"http://a.test/p?q=a b|c", "http://bücher.test/ä?x=ü#frag", "http://[::1]:8080/x", "http://a.test/{x}^`"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteExchange(context.Background(), exchange(u.String(), "x")); err != nil {
			t.Errorf("%s: %v", u, err)
		}
		want[u.String()] = true
	}
	if _, err := w.WriteExchange(context.Background(), exchange("http://a.test/%zz", "x")); err == nil || !strings.Contains(err.Error(), "exchange URL") {
		t.Errorf("unparsable URL: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range byType(readDir(t, dir), "response") {
		delete(want, r.h["WARC-Target-URI"])
	}
	if len(want) > 0 {
		t.Errorf("not read back: %v", want)
	}
}
