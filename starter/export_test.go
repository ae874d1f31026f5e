package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// exportJob stores a job with fields price, images and url (which clashes
// with a base column) and three pages, the first labelled product.
func exportJob(t *testing.T) (*sqlstore.Store, jobs.Spec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	js, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { js.Close() })
	opts := crawl.DefaultOptions()
	opts.Selectors = map[string]string{"price": ".price", "images": "img@src", "url": "link[rel=x]@href"}
	spec := jobs.Spec{ID: "export", Group: "g", Seeds: []string{"http://127.0.0.1:1/a"}, Options: opts, BatchSize: 10}
	urls := []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b", "http://127.0.0.1:1/c"}
	var seeds []jobs.Entry
	for _, u := range urls {
		seeds = append(seeds, jobs.Entry{URL: u})
	}
	_, err = js.CreateJob(ctx, spec, seeds)
	require.NoError(t, err)
	_, err = js.TakeBatch(ctx, spec.ID, "b1", 10)
	require.NoError(t, err)
	_, err = js.Claim(ctx, spec.ID, "b1", "r1", 1)
	require.NoError(t, err)
	pages := []crawl.Page{
		{URL: urls[0], StatusCode: 200, Title: "A, \"quoted\"", Attempts: 1, BodyHash: "h1", Bytes: 10,
			Fields: map[string][]string{"price": {"$1"}, "images": {"/1.jpg", "/2.jpg"}, "url": {"x"}},
			JSONLD: []json.RawMessage{json.RawMessage(`{"@type":"Product"}`)}, Canonical: urls[0] + "?c"},
		{URL: urls[1], StatusCode: 200, Title: "B", Attempts: 3, BodyHash: "h1", Bytes: 10,
			Fields: map[string][]string{"price": {}, "images": {"/3.jpg"}, "url": {}}, Links: []string{urls[0]}},
		{URL: urls[2], StatusCode: 404, Error: "HTTP 404", Attempts: 1, Bytes: 5},
	}
	var rs []jobs.Record
	for i, p := range pages {
		label := ""
		if i == 0 {
			label = "product"
		}
		rs = append(rs, jobs.Record{Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, URL: p.URL,
			Page: &jobs.PageRecord{Page: p, Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, Label: label}})
	}
	_, err = js.RecordAll(ctx, rs)
	require.NoError(t, err)
	return js, spec
}

func TestCSVHasAColumnPerField(t *testing.T) {
	js, spec := exportJob(t)
	var buf bytes.Buffer
	require.NoError(t, writeResults(context.Background(), &buf, js, spec, formatCSV))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 4)
	head := rows[0]
	col := func(name string) int {
		for i, h := range head {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %q in %v", name, head)
		return -1
	}
	assert.Equal(t, []string{"images", "price", "field_url"}, head[len(head)-3:], "one column per field, sorted; a clash gets field_")
	a, b, c := rows[1], rows[2], rows[3]
	assert.Equal(t, "/1.jpg | /2.jpg", a[col("images")])
	assert.Equal(t, "$1", a[col("price")])
	assert.Equal(t, "x", a[col("field_url")])
	assert.Equal(t, "http://127.0.0.1:1/a", a[col("url")])
	assert.Equal(t, `A, "quoted"`, a[col("title")])
	assert.Equal(t, `[{"@type":"Product"}]`, a[col("jsonld")])
	assert.Equal(t, "http://127.0.0.1:1/a?c", a[col("canonical")])
	assert.Equal(t, "", b[col("price")])
	assert.Equal(t, "http://127.0.0.1:1/a", b[col("duplicate_of")])
	assert.Equal(t, "3", b[col("attempts")])
	assert.Equal(t, "1", b[col("links")])
	assert.Equal(t, "HTTP 404", c[col("error")])
	assert.Equal(t, "404", c[col("status_code")])
}

func TestParquetExport(t *testing.T) {
	js, spec := exportJob(t)
	path := filepath.Join(t.TempDir(), "pages.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, writeResults(context.Background(), f, js, spec, formatParquet))
	require.NoError(t, f.Close())

	// Read back with the library's generic reader, as a user's tool would.
	rf, err := os.Open(path)
	require.NoError(t, err)
	defer rf.Close()
	st, err := rf.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(rf, st.Size())
	require.NoError(t, err)
	assert.Equal(t, int64(3), pf.NumRows())
	var names []string
	for _, c := range pf.Schema().Fields() {
		names = append(names, c.Name())
	}
	for _, want := range []string{"url", "status_code", "title", "duplicate_of", "links", "jsonld", "label", "images", "price", "field_url"} {
		assert.Contains(t, names, want)
	}
	type row struct {
		URL         string   `parquet:"url"`
		StatusCode  int32    `parquet:"status_code"`
		Title       string   `parquet:"title"`
		DuplicateOf string   `parquet:"duplicate_of"`
		Images      []string `parquet:"images,list"`
		Price       []string `parquet:"price,list"`
		JSONLD      []string `parquet:"jsonld,list"`
		Error       string   `parquet:"error"`
		Label       string   `parquet:"label"`
	}
	rows, err := parquet.Read[row](rf, st.Size())
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, row{URL: "http://127.0.0.1:1/a", StatusCode: 200, Title: `A, "quoted"`, Images: []string{"/1.jpg", "/2.jpg"},
		Price: []string{"$1"}, JSONLD: []string{`{"@type":"Product"}`}, Label: "product"}, rows[0])
	assert.Equal(t, "http://127.0.0.1:1/a", rows[1].DuplicateOf)
	assert.Empty(t, rows[1].Price)
	assert.Equal(t, "HTTP 404", rows[2].Error)
}

func TestStatsBlock(t *testing.T) {
	js, spec := exportJob(t)
	rep, err := jobs.BuildReport(context.Background(), js, spec.ID)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, rep.Write(&buf))
	out := buf.String()
	for _, want := range []string{
		"pages        3 (1 failed)", "status codes 200: 2, 404: 1", "bytes        25", "retries      2",
		"robots.txt   0 refused", "duplicates   1",
	} {
		assert.Contains(t, out, want)
	}
}

// readSeeds is scanSeedFile's URLs, read again as storeSeeds does.
func readSeeds(name string, stdin io.Reader) ([]string, error) {
	sf, err := jobs.ScanSeedFile(name, stdin)
	if err != nil {
		return nil, submitError(err)
	}
	defer sf.Close()
	var out []string
	err = sf.Each(func(u string) error { out = append(out, u); return nil })
	return out, err
}

func TestReadSeeds(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.txt")
	require.NoError(t, os.WriteFile(good, []byte("# shop\nhttp://127.0.0.1:8000/a\n\n  http://127.0.0.1:8000/b  \nhttp://127.0.0.1:8000/a\n"), 0o644))
	seeds, err := readSeeds(good, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:8000/a", "http://127.0.0.1:8000/b", "http://127.0.0.1:8000/a"}, seeds,
		"read again in order; the store deduplicates")
	sf, err := jobs.ScanSeedFile(good, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1"}, sf.Hosts())
	assert.Equal(t, []string{"http://127.0.0.1:8000"}, sf.Origins())

	seeds, err = readSeeds("-", strings.NewReader("http://127.0.0.1:8000/x\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"http://127.0.0.1:8000/x"}, seeds)

	bad := filepath.Join(dir, "bad.txt")
	var lines []string
	for i := 0; i < 14; i++ {
		lines = append(lines, "ftp://nope/")
	}
	require.NoError(t, os.WriteFile(bad, []byte("http://127.0.0.1:8000/a\nnot a url\n"+strings.Join(lines, "\n")), 0o644))
	_, err = readSeeds(bad, nil)
	assert.Equal(t, exitcode.Usage, exitcode.Of(err), "a bad seed file is a usage error")
	assert.Contains(t, err.Error(), "15 bad lines (nothing submitted)")
	assert.Contains(t, err.Error(), bad+":2: ")
	assert.Contains(t, err.Error(), "… and 5 more")

	_, err = readSeeds(filepath.Join(dir, "missing.txt"), nil)
	assert.ErrorContains(t, err, "no such file")
	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing\n"), 0o644))
	_, err = readSeeds(empty, nil)
	assert.ErrorContains(t, err, "no URL in it")
}

func TestParseHeaders(t *testing.T) {
	h, err := parseHeaders([]string{"Accept-Language: de", "X-Empty:", "X-Colon: a:b"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Accept-Language": "de", "X-Empty": "", "X-Colon": "a:b"}, h)
	_, err = parseHeaders([]string{"A: b", "NoColonSecret"})
	assert.ErrorContains(t, err, `--header #2: want 'Name: value'`)
	assert.NotContains(t, err.Error(), "NoColonSecret", "a malformed header may be a secret: never echoed")
}

func TestExportBodies(t *testing.T) {
	ctx := context.Background()
	js, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	defer js.Close()
	spec := jobs.Spec{ID: "bodies", Group: "g", Seeds: []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b"},
		Options: crawl.DefaultOptions(), BatchSize: 10, Bodies: jobs.BodiesStore}
	_, err = js.CreateJob(ctx, spec, []jobs.Entry{{URL: spec.Seeds[0]}, {URL: spec.Seeds[1]}})
	require.NoError(t, err)
	_, err = js.TakeBatch(ctx, spec.ID, "b1", 10)
	require.NoError(t, err)
	_, err = js.Claim(ctx, spec.ID, "b1", "r1", 1)
	require.NoError(t, err)
	html := "<html><title>a</title></html>"
	_, err = js.RecordAll(ctx, []jobs.Record{
		{Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, URL: spec.Seeds[0], Body: jobs.CompressBody([]byte(html)),
			Page: &jobs.PageRecord{Page: crawl.Page{URL: spec.Seeds[0], StatusCode: 200, ContentType: "text/html; charset=utf-8"}, BodyRef: jobs.BodiesStore,
				Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1}},
		{Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, URL: spec.Seeds[1],
			Page: &jobs.PageRecord{Page: crawl.Page{URL: spec.Seeds[1], StatusCode: 0, Error: "timeout after 15s"},
				Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1}},
	})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "out")
	n, err := exportBodies(ctx, js, spec, dir)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	idx, err := os.ReadFile(filepath.Join(dir, "index.tsv"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(idx)), "\n")
	require.Len(t, lines, 2, string(idx))
	f := strings.Split(lines[1], "\t")
	require.Len(t, f, 3)
	assert.Equal(t, spec.Seeds[0], f[0])
	assert.True(t, strings.HasSuffix(f[1], ".html"), f[1])
	got, err := os.ReadFile(filepath.Join(dir, f[1]))
	require.NoError(t, err)
	assert.Equal(t, html, string(got))
}

// TestCSVFormulaCellsDefused: crawled text that a spreadsheet would run as
// a formula gets a leading quote, unless --csv-raw.
func TestCSVFormulaCellsDefused(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"=HYPERLINK(\"http://evil\")", "'=HYPERLINK(\"http://evil\")"}, {"+1", "'+1"}, {"-2", "'-2"}, {"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"}, {"plain", "plain"}, {"", ""}, {"a=b", "a=b"},
	} {
		assert.Equal(t, c.want, csvSafe(c.in), "%q", c.in)
	}
}

// TestResultsOutputReplacesASymlink: -o writes a new file and renames it,
// so a symbolic link at the path is replaced, its target left alone.
func TestResultsOutputReplacesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	require.NoError(t, os.WriteFile(target, []byte("keep me"), 0o600))
	link := filepath.Join(dir, "out.jsonl")
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, writeFileAtomic(link, []byte("new")))
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(got))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 2, "no temporary file left")
}
