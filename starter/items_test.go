package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
)

// itemsJob stores a user crawler's job with two pages and three items.
func itemsJob(t *testing.T) *sqlstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	js, err := sqlstore.OpenSQLite(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { js.Close() })
	spec := jobs.Spec{ID: "items", Group: "g", Seeds: []string{"http://127.0.0.1:1/a"}, Options: crawl.DefaultOptions(), Crawler: "shop"}
	_, err = js.CreateJob(ctx, spec, []jobs.Entry{{URL: "http://127.0.0.1:1/a", Label: "detail"}, {URL: "http://127.0.0.1:1/b", Label: "detail"}})
	require.NoError(t, err)
	_, err = js.TakeBatch(ctx, spec.ID, "b1", 10)
	require.NoError(t, err)
	_, err = js.Claim(ctx, spec.ID, "b1", "r1", 1)
	require.NoError(t, err)
	items := map[string][]string{
		"http://127.0.0.1:1/a": {`{"sku":"A-1","price_cents":1250,"in_stock":true,"tags":["x"]}`, `{"sku":"=CMD()","price_cents":7.5}`},
		"http://127.0.0.1:1/b": {`{"sku":"B-1","price_cents":3}`},
	}
	var rs []jobs.Record
	for _, u := range []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b"} {
		var pushed []crawler.Pushed
		for i, v := range items[u] {
			pushed = append(pushed, crawler.Pushed{Label: "detail", Index: i, Value: json.RawMessage(v)})
		}
		rs = append(rs, jobs.Record{Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, URL: u, Items: pushed,
			Page: &jobs.PageRecord{Page: crawl.Page{URL: u, StatusCode: 200}, Job: spec.ID, Batch: "b1", Runner: "r1", Epoch: 1, Label: "detail", Items: len(pushed)}})
	}
	_, err = js.RecordAll(ctx, rs)
	require.NoError(t, err)
	return js
}

func TestItemsExport(t *testing.T) {
	js := itemsJob(t)
	ctx := context.Background()

	var buf bytes.Buffer
	require.NoError(t, writeItems(ctx, &buf, js, "items", formatJSONL, false, false, nil))
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 3)
	var first crawler.StoredItem
	require.NoError(t, json.Unmarshal(lines[0], &first))
	assert.Equal(t, crawler.ItemID("items", "http://127.0.0.1:1/a", 0), first.ID)

	buf.Reset()
	require.NoError(t, writeItems(ctx, &buf, js, "items", formatCSV, false, false, nil))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 4)
	assert.Equal(t, []string{"item_id", "url", "label", "index", "in_stock", "price_cents", "sku", "tags"}, rows[0])
	assert.Equal(t, []string{first.ID, "http://127.0.0.1:1/a", "detail", "0", "true", "1250", "A-1", `["x"]`}, rows[1])
	assert.Equal(t, "'=CMD()", rows[2][6], "a formula is defused")

	buf.Reset()
	require.NoError(t, writeItems(ctx, &buf, js, "items", formatParquet, false, false, nil))
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	assert.Equal(t, int64(3), f.NumRows())
	kinds := map[string]string{}
	for _, fld := range f.Schema().Fields() {
		kinds[fld.Name()] = fld.Type().String()
	}
	assert.Equal(t, "DOUBLE", kinds["price_cents"], "1250 and 7.5: a double column")
	assert.Equal(t, "BOOLEAN", kinds["in_stock"])
	assert.Equal(t, "INT(64,true)", kinds["index"])

	assert.Error(t, writeItems(ctx, &buf, js, "items", formatCSV, false, true, nil), "--follow is JSON lines")
}
