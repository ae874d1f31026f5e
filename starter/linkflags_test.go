package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// --select name=SEL is every page's, --select LABEL:name=SEL one label's;
// --label NAME=REGEX is a rule, --label NAME the seeds' label; --links
// takes json:PATH.
func TestParseLinkFlags(t *testing.T) {
	lf, err := parseLinkFlags(
		[]string{"title=title", "product:price=.price", "product:sku=xpath://*[@itemprop=\"sku\"]", "index:count=xpath:count(//a)", "img=a[href=\"x\"]@href"},
		[]string{"product=/page/\\d+\\.html$", "index=/$", "start", "eq=a=b"},
		[]string{"json:items.#.url", "json:next"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"title": "title", "img": `a[href="x"]@href`}, lf.fields)
	assert.Equal(t, map[string]map[string]string{"product": {"price": ".price", "sku": `xpath://*[@itemprop="sku"]`},
		"index": {"count": "xpath:count(//a)"}}, lf.labelFields)
	assert.Equal(t, []crawl.LabelRule{{Name: "product", Pattern: `/page/\d+\.html$`}, {Name: "index", Pattern: "/$"}, {Name: "eq", Pattern: "a=b"}}, lf.labels)
	assert.Equal(t, "start", lf.seedLabel)
	assert.Equal(t, []string{"items.#.url", "next"}, lf.linksJSON)
	assert.Empty(t, (linkFlags{fields: map[string]string{}, seedLabel: "x"}).builtinOnly(), "a seed label is any crawler's")

	for _, tc := range []struct {
		selects, labels, links []string
		want                   string
	}{
		{[]string{"noequals"}, nil, nil, `--select #1 "noequals": want name=SELECTOR`},
		{[]string{"a=b", ":price=.p"}, nil, nil, `--select #2 ":price=.p": want LABEL:name=SELECTOR`},
		{[]string{"product:=.p"}, nil, nil, `--select #1 "product:=.p": want LABEL:name=SELECTOR`},
		{nil, []string{"a", "b"}, nil, `--label "a" and --label "b": the seeds take one label`},
		{nil, nil, []string{"items.#.url"}, `--links "items.#.url": want json:PATH`},
		{nil, nil, []string{"json:"}, `--links "json:": want json:PATH`},
	} {
		_, err := parseLinkFlags(tc.selects, tc.labels, tc.links)
		assert.ErrorContains(t, err, tc.want)
		assert.Equal(t, exitcode.Usage, exitcode.Of(err), tc.want)
	}
}

// A bad rule, label or label field is a usage error naming the flag, and
// nothing is contacted (the servers' ports are closed).
func TestLinkFlagsBadUsage(t *testing.T) {
	zk, temporal := testsuite.ClosedPort(t), testsuite.ClosedPort(t)
	seed := "http://127.0.0.1:1/"
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--follow", "--follow-deny", "/ok/", "--follow-deny", "("}, `invalid crawl: --follow-deny: invalid regexp "(": missing closing )`},
		{[]string{"--follow-allow", "[a"}, `invalid crawl: --follow-allow: invalid regexp "[a": missing closing ]`},
		{[]string{"--label", "product=(x"}, `invalid crawl: --label: label product: invalid regexp "(x"`},
		{[]string{"--label", "bad name=x"}, `invalid crawl: --label: label name "bad name"`},
		{[]string{"--label", "p=x", "--select", "q:price=.price"}, `invalid crawl: --select q:price: no label rule is named "q"`},
		{[]string{"--label", "p=x", "--select", "p:price=a["}, `invalid crawl: --select p:price: invalid CSS selector`},
		{[]string{"--links", "json:items.#.url"}, "--links: the links of JSON responses are followed with --follow"},
		{[]string{"--follow", "--links", "items"}, `--links "items": want json:PATH`},
		{[]string{"--crawler", "shop", "--label", "p=x"}, "--label NAME=REGEX is the built-in crawler's"},
		{[]string{"--crawler", "shop", "--links", "json:x"}, "--links is the built-in crawler's"},
	} {
		args := append([]string{"--zk-hosts", zk, "--temporal-address", temporal, "--connect-timeout", "5s", "crawl", seed}, tc.args...)
		out, errw, code := run(t, args...)
		assert.Equal(t, exitcode.Usage, code, "%v: %s", tc.args, errw)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errw, tc.msg, "%v", tc.args)
		for _, field := range []string{"follow_deny", "follow_allow", "labels[", "label_selectors", "links_json"} {
			assert.NotContains(t, errw, field, "%v: the spec's field, not the flag", tc.args)
		}
	}
}

// The spec's validation errors of the new options name their flags.
func TestLinkRuleErrorsNameTheFlag(t *testing.T) {
	spec := func(edit func(*crawl.Options)) jobs.Spec {
		o := crawl.DefaultOptions()
		edit(&o)
		return jobs.Spec{ID: "j", Group: "g", Seeds: []string{"http://127.0.0.1:1/"}, Options: o, Timers: roles.DefaultTimers()}
	}
	for _, tc := range []struct {
		edit func(*crawl.Options)
		want string
	}{
		{func(o *crawl.Options) { o.FollowDeny = []string{"("} }, "--follow-deny: invalid regexp"},
		{func(o *crawl.Options) { o.FollowAllow = []string{""} }, "--follow-allow: empty pattern"},
		{func(o *crawl.Options) { o.Labels = []crawl.LabelRule{{Name: "x", Pattern: "("}} }, "--label: label x: invalid regexp"},
		{func(o *crawl.Options) {
			o.Labels = []crawl.LabelRule{{Name: "x", Pattern: "y"}}
			o.LabelSelectors = map[string]map[string]string{"x": {"f": "xpath://["}}
		}, "--select x:f: invalid XPath"},
		{func(o *crawl.Options) { o.LinksJSON = []string{""} }, "--links: empty path"},
	} {
		err := spec(tc.edit).Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, specFlagError(err).Error(), tc.want)
	}
}

// The label is a column of CSV and Parquet exports, and every label's
// fields are columns too.
func TestExportLabelColumn(t *testing.T) {
	js, spec := exportJob(t)
	spec.Options.Labels = []crawl.LabelRule{{Name: "product", Pattern: "/a$"}}
	spec.Options.LabelSelectors = map[string]map[string]string{"product": {"sku": ".sku", "price": ".price"}}
	var buf bytes.Buffer
	require.NoError(t, writeResults(context.Background(), &buf, js, spec, formatCSV))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	head := rows[0]
	assert.Equal(t, "label", head[len(baseColumns)-1])
	assert.Equal(t, []string{"images", "price", "sku", "field_url"}, head[len(baseColumns):], "every label's fields too, once each")
	assert.Equal(t, "product", rows[1][len(baseColumns)-1])
	assert.Equal(t, "", rows[2][len(baseColumns)-1])
}

// CSV and Parquet columns come in --select order (label fields included,
// each once), from the command line through the job's spec; they came
// out sorted.
func TestExportColumnsInSelectOrder(t *testing.T) {
	lf, err := parseLinkFlags([]string{"url=link[rel=x]@href", "product:sku=.sku", "price=.price", "product:price=.price", "images=img@src"},
		[]string{"product=/a$"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"url", "sku", "price", "images"}, lf.order)
	js, spec := exportJob(t)
	spec.Options.Selectors, spec.Options.FieldOrder = lf.fields, lf.order
	spec.Options.Labels, spec.Options.LabelSelectors = lf.labels, lf.labelFields
	require.NoError(t, spec.Validate())
	var buf bytes.Buffer
	require.NoError(t, writeResults(context.Background(), &buf, js, spec, formatCSV))
	rows, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, []string{"field_url", "sku", "price", "images"}, rows[0][len(baseColumns):])
	assert.Equal(t, []string{"x", "", "$1", "/1.jpg | /2.jpg"}, rows[1][len(baseColumns):])

	buf.Reset()
	require.NoError(t, writeResults(context.Background(), &buf, js, spec, formatParquet))
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	var names []string
	for _, c := range f.Schema().Fields()[len(baseColumns):] {
		names = append(names, c.Name())
	}
	assert.Equal(t, []string{"field_url", "sku", "price", "images"}, names)
}
