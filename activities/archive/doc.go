// Package archive writes what a crawl fetched as WARC/1.1 files, the format
// web archives read (ISO 28500): a request and a response record for each
// exchange, with the response exactly as received (Content-Encoding kept,
// body bytes not decoded), revisit records for unchanged pages that point
// at the original response record, a warcinfo record opening each file,
// and rotation by size. The records, digests and files are those of
// github.com/nlnwa/gowarc/v3; this package chooses the fields and keeps
// revisits pointing at originals.
//
// Capture wraps an http.RoundTripper so the raw exchange reaches a Writer
// while the caller still sees a decoded body, as from Go's own transport.
package archive
