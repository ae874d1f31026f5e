package archive

import (
	"fmt"
	"regexp"
)

// Digest algorithms a Writer can use for WARC-Block-Digest and
// WARC-Payload-Digest.
const (
	DigestSHA1   = "sha1"   // base32, as Heritrix writes and CDX indexes expect
	DigestSHA256 = "sha256" // base16
)

// Config is how a Writer names, sizes and compresses its files.
type Config struct {
	// Prefix starts every file name: PREFIX-TIMESTAMP-SERIAL-HOST-TOKEN.warc.gz.
	Prefix string
	// MaxFileSize is the size in bytes (on disk) past which the writer
	// starts a new file. A record is never split: a file holds at least
	// one record, so a single large record can make a file larger.
	MaxFileSize int64
	// Gzip compresses each record as its own gzip member (.warc.gz), so a
	// reader can seek to any record's offset.
	Gzip bool
	// DigestAlgorithm is DigestSHA1 or DigestSHA256.
	DigestAlgorithm string
	// MaxOpenFiles is how many files are written at once; concurrent
	// writes are spread over them.
	MaxOpenFiles int
	// Software names the writer in each file's warcinfo record.
	Software string
	// Operator, optional, names who ran the crawl in the warcinfo record.
	Operator string
}

// DefaultConfig is a gzip'd archive of 1 GB files (Heritrix's default
// size), SHA-256 digests, one open file.
func DefaultConfig() Config {
	return Config{
		Prefix:          "baton",
		MaxFileSize:     1 << 30,
		Gzip:            true,
		DigestAlgorithm: DigestSHA256,
		MaxOpenFiles:    1,
		Software:        "baton",
	}
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// maxOpenFiles bounds Config.MaxOpenFiles.
const maxOpenFiles = 64

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	switch {
	case !prefixRE.MatchString(c.Prefix):
		return fmt.Errorf("archive config: Prefix %q: want 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", c.Prefix)
	case c.MaxFileSize <= 0:
		return fmt.Errorf("archive config: MaxFileSize %d: want a positive number of bytes", c.MaxFileSize)
	case c.DigestAlgorithm != DigestSHA1 && c.DigestAlgorithm != DigestSHA256:
		return fmt.Errorf("archive config: DigestAlgorithm %q: want %q or %q", c.DigestAlgorithm, DigestSHA1, DigestSHA256)
	case c.MaxOpenFiles < 1 || c.MaxOpenFiles > maxOpenFiles:
		return fmt.Errorf("archive config: MaxOpenFiles %d: want 1 to %d", c.MaxOpenFiles, maxOpenFiles)
	case c.Software == "":
		return fmt.Errorf("archive config: Software is empty: name the writer for the warcinfo record")
	}
	return nil
}
