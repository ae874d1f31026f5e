package archive

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// fileNamer names a Writer's files PREFIX-TIMESTAMP-SERIAL-HOST-TOKEN.warc,
// after the WARC 1.1 annex's recommendation and Heritrix's names: the
// timestamp (UTC, to the millisecond) orders files, the serial counts this
// writer's files, the host and a token drawn once per writer keep two
// writers of one directory apart. It implements gowarc's
// WarcFileNameGenerator (the gzip suffix is the library's).
type fileNamer struct {
	dir, prefix, host, token string
	serial                   atomic.Int64
	now                      func() time.Time
}

func newFileNamer(dir, prefix string) (*fileNamer, error) {
	tok := make([]byte, 3)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("archive file names: %w", err)
	}
	host, _ := os.Hostname()
	return &fileNamer{dir: dir, prefix: prefix, host: safeHost(host), token: hex.EncodeToString(tok), now: time.Now}, nil
}

// NewWarcfileName returns the directory and the next file name.
func (n *fileNamer) NewWarcfileName() (string, string) {
	ts := n.now().UTC().Format("20060102150405.000")
	ts = strings.Replace(ts, ".", "", 1)
	return n.dir, fmt.Sprintf("%s-%s-%05d-%s-%s.warc", n.prefix, ts, n.serial.Add(1), n.host, n.token)
}

// safeHost keeps the letters, digits, dots and hyphens of a host name.
func safeHost(h string) string {
	h = strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, h)
	if h == "" {
		return "localhost"
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}
