package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// Result formats of `baton results`.
const (
	formatJSONL   = "jsonl"
	formatCSV     = "csv"
	formatParquet = "parquet"
)

// fieldSep joins the values of a field with several matches in a CSV cell.
const fieldSep = " | "

// baseColumns are the columns of every CSV and Parquet export, before the
// job's fields.
var baseColumns = []string{"url", "final_url", "status_code", "content_type", "bytes", "duration_ms", "depth", "attempts",
	"title", "canonical", "charset", "body_hash", "duplicate_of", "body_ref", "links", "jsonld", "sitemap", "error", "runner", "label"}

// fieldColumns maps each of the job's field names (every page's and each
// label's, crawl.Options.FieldNames), sorted, to its column: the name
// itself, or field_<name> where it would clash with a base column.
func fieldColumns(spec jobs.Spec) (names, columns []string) {
	names = spec.Options.FieldNames()
	taken := map[string]bool{}
	for _, c := range baseColumns {
		taken[c] = true
	}
	for _, n := range names {
		c := n
		for taken[c] {
			c = "field_" + c
		}
		taken[c] = true
		columns = append(columns, c)
	}
	return names, columns
}

func writeResults(ctx context.Context, w io.Writer, js jobs.ReaderStore, spec jobs.Spec, format string) error {
	return writeResultsCSV(ctx, w, js, spec, format, false)
}

// writeResultsCSV is writeResults; csvRaw keeps CSV cells that a
// spreadsheet would run as formulas as they are.
func writeResultsCSV(ctx context.Context, w io.Writer, js jobs.ReaderStore, spec jobs.Spec, format string, csvRaw bool) error {
	switch format {
	case formatJSONL:
		enc := json.NewEncoder(w)
		return js.Results(ctx, spec.ID, func(p jobs.PageRecord) error { return enc.Encode(p) })
	case formatCSV:
		return writeCSV(ctx, w, js, spec, csvRaw)
	case formatParquet:
		return writeParquet(ctx, w, js, spec)
	}
	return fmt.Errorf("unknown format %q", format)
}

// writeCSV writes one row per page, one column per extracted field (its
// values joined by " | ").
// csvSafe defuses a cell that a spreadsheet would read as a formula (it
// starts with =, +, -, @, a tab or a carriage return: CSV injection, as
// OWASP describes it) by prefixing a single quote. Crawled text is
// hostile: a page's title must not run in the user's spreadsheet.
func csvSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// writeCSVRow writes row, its formula cells defused unless raw.
func writeCSVRow(cw *csv.Writer, row []string, raw bool) error {
	if !raw {
		for i, v := range row {
			row[i] = csvSafe(v)
		}
	}
	return cw.Write(row)
}

func writeCSV(ctx context.Context, w io.Writer, js jobs.ReaderStore, spec jobs.Spec, raw bool) error {
	names, columns := fieldColumns(spec)
	cw := csv.NewWriter(w)
	if err := cw.Write(append(append([]string{}, baseColumns...), columns...)); err != nil {
		return err
	}
	err := js.Results(ctx, spec.ID, func(p jobs.PageRecord) error {
		jsonld := ""
		if len(p.JSONLD) > 0 {
			b, _ := json.Marshal(p.JSONLD)
			jsonld = string(b)
		}
		row := []string{p.URL, p.FinalURL, strconv.Itoa(p.StatusCode), p.ContentType, strconv.FormatInt(p.Bytes, 10),
			strconv.FormatInt(p.DurationMS, 10), strconv.Itoa(p.Depth), strconv.Itoa(p.Attempts), p.Title, p.Canonical,
			p.Charset, p.BodyHash, p.DuplicateOf, p.BodyRef, strconv.Itoa(len(p.Links)), jsonld, strconv.FormatBool(p.Sitemap),
			p.Error, p.Runner, p.Label}
		for _, n := range names {
			row = append(row, strings.Join(p.Fields[n], fieldSep))
		}
		return writeCSVRow(cw, row, raw)
	})
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// parquetRow is the Go type of a Parquet row of a job: the base columns
// and one LIST<STRING> column per field, built at run time (reflect) so
// that parquet-go derives the schema from it.
func parquetRow(columns []string) reflect.Type {
	str := reflect.TypeOf("")
	field := func(i int, name string, t reflect.Type, opts string) reflect.StructField {
		tag := name
		if opts != "" {
			tag += "," + opts
		}
		return reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t, Tag: reflect.StructTag(fmt.Sprintf(`parquet:%q`, tag))}
	}
	fs := []reflect.StructField{
		field(0, "url", str, ""), field(1, "final_url", str, ""), field(2, "status_code", reflect.TypeOf(int32(0)), ""),
		field(3, "content_type", str, ""), field(4, "bytes", reflect.TypeOf(int64(0)), ""),
		field(5, "duration_ms", reflect.TypeOf(int64(0)), ""), field(6, "depth", reflect.TypeOf(int32(0)), ""),
		field(7, "attempts", reflect.TypeOf(int32(0)), ""), field(8, "title", str, ""), field(9, "canonical", str, ""),
		field(10, "charset", str, ""), field(11, "body_hash", str, ""), field(12, "duplicate_of", str, ""),
		field(13, "body_ref", str, ""), field(14, "links", reflect.TypeOf([]string{}), "list"),
		field(15, "jsonld", reflect.TypeOf([]string{}), "list"), field(16, "sitemap", reflect.TypeOf(false), ""),
		field(17, "error", str, ""), field(18, "runner", str, ""), field(19, "label", str, ""),
	}
	for i, c := range columns {
		fs = append(fs, field(len(baseColumns)+i, c, reflect.TypeOf([]string{}), "list"))
	}
	return reflect.StructOf(fs)
}

// parquetRowGroupRows is the most rows of a Parquet row group: the writer
// holds one row group in memory (about 5 MiB of a crawl's typical pages),
// so an export of any size runs in bounded memory.
var parquetRowGroupRows int64 = 10000

// writeParquet writes one row per page (zstd-compressed columns): the
// base columns, links and JSON-LD blocks as lists, and one list of
// strings per extracted field, in row groups of parquetRowGroupRows.
func writeParquet(ctx context.Context, w io.Writer, js jobs.ReaderStore, spec jobs.Spec) error {
	names, columns := fieldColumns(spec)
	for _, c := range columns {
		if strings.ContainsAny(c, ",\"") {
			return usage("field %q: a Parquet column name cannot contain a comma or a quote", c)
		}
	}
	t := parquetRow(columns)
	cfg, err := parquet.NewWriterConfig(parquet.SchemaOf(reflect.New(t).Interface()), parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("baton", "", ""), parquet.MaxRowsPerRowGroup(parquetRowGroupRows))
	if err != nil {
		return fmt.Errorf("parquet schema: %w", err)
	}
	pw := parquet.NewWriter(w, cfg)
	row := reflect.New(t).Elem()
	err = js.Results(ctx, spec.ID, func(p jobs.PageRecord) error {
		jsonld := make([]string, len(p.JSONLD))
		for i, j := range p.JSONLD {
			jsonld[i] = string(j)
		}
		vals := []any{p.URL, p.FinalURL, int32(p.StatusCode), p.ContentType, p.Bytes, p.DurationMS, int32(p.Depth),
			int32(p.Attempts), p.Title, p.Canonical, p.Charset, p.BodyHash, p.DuplicateOf, p.BodyRef, nonNil(p.Links), jsonld,
			p.Sitemap, p.Error, p.Runner, p.Label}
		for _, n := range names {
			vals = append(vals, nonNil(p.Fields[n]))
		}
		for i, v := range vals {
			row.Field(i).Set(reflect.ValueOf(v))
		}
		return pw.Write(row.Addr().Interface())
	})
	if err != nil {
		return err
	}
	return pw.Close()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// exportBodies writes the bodies a job kept in the store (--store-bodies)
// under dir, decompressed, one file per page named by the SHA-256 of its
// URL with an extension from its type, and dir/index.tsv listing url,
// file and content type. It returns how many it wrote.
func exportBodies(ctx context.Context, js jobs.ReaderStore, spec jobs.Spec, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	idx, err := createAtomic(filepath.Join(dir, "index.tsv"))
	if err != nil {
		return 0, err
	}
	defer idx.Abort()
	iw := bufio.NewWriter(idx)
	fmt.Fprintln(iw, "url\tfile\tcontent_type")
	limit := spec.Options.MaxBodyBytes
	if limit <= 0 {
		limit = crawl.DefaultMaxBodyBytes
	}
	n := 0
	err = js.Results(ctx, spec.ID, func(p jobs.PageRecord) error {
		if p.BodyRef != jobs.BodiesStore {
			return nil
		}
		data, err := js.Body(ctx, spec.ID, p.URL)
		if err != nil {
			return err
		}
		body, err := jobs.DecompressBody(data, limit)
		if err != nil {
			return fmt.Errorf("%s: %w", p.URL, err)
		}
		sum := sha256.Sum256([]byte(p.URL))
		name := hex.EncodeToString(sum[:]) + bodyExt(p.ContentType)
		if err := writeFileAtomic(filepath.Join(dir, name), body); err != nil {
			return err
		}
		fmt.Fprintf(iw, "%s\t%s\t%s\n", p.URL, name, strings.NewReplacer("\t", " ", "\n", " ").Replace(p.ContentType))
		n++
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := iw.Flush(); err != nil {
		return n, err
	}
	return n, idx.Commit()
}

// bodyExt is the file extension of a body of type ct.
func bodyExt(ct string) string {
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return ".html"
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return ".json"
	case strings.HasSuffix(mt, "/xml") || strings.HasSuffix(mt, "+xml"):
		return ".xml"
	case strings.HasPrefix(mt, "text/"):
		return ".txt"
	}
	return ".body"
}
