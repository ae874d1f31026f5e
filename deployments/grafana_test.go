package deployments_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/batoncrawl/baton/activities/telemetry/prommetrics"
)

const dashboardPath = "grafana/baton-dashboard.json"

// exported returns the series names a worker exports at /metrics (Baton's
// own and the Go runtime's and process's, registered as worker/metrics.go
// does; the Temporal SDK's are left out: the dashboard does not use them),
// each with its label names. Histograms export _bucket (with le), _sum and
// _count.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := prommetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	// Every vector gets a series, so that its labels are seen.
	m.Page("job", 200, false, 1, time.Millisecond)
	m.Retries("job", 2)
	m.RobotsRefusal("job")
	m.Queued("job", 1)
	m.PeerAge("sc-crawler_1", time.Second)
	m.Detected(time.Second)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		var labels []string
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		labels = append(labels, "instance", "job") // added by Prometheus on scraping
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[mf.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[mf.GetName()+"_sum"] = labels
			out[mf.GetName()+"_count"] = labels
		default:
			out[mf.GetName()] = labels
		}
	}
	return out
}

// PromQL words that are not metric names.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "stddev": true, "stdvar": true, "topk": true,
	"bottomk": true, "quantile": true, "count_values": true, "group": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "bool": true, "and": true, "or": true, "unless": true,
	"offset": true, "rate": true, "irate": true, "increase": true, "delta": true, "idelta": true, "deriv": true,
	"histogram_quantile": true, "label_values": true, "abs": true, "clamp_min": true, "clamp_max": true, "time": true,
	"vector": true, "scalar": true, "avg_over_time": true, "max_over_time": true, "min_over_time": true, "sum_over_time": true,
}

var (
	stringLit   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	rangeSel    = regexp.MustCompile(`\[[^\]]*\]`)
	grouping    = regexp.MustCompile(`\b(by|without|on|ignoring)\s*\(([^)]*)\)`)
	selector    = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}`)
	identifier  = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	matcherName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// checkQuery returns the problems of one PromQL expression: a metric the
// worker does not export, a label matched or grouped by that the metrics
// of the query do not have, no exported metric at all.
func checkQuery(expr string, metrics map[string][]string) []string {
	var problems []string
	// Label matchers, checked against their metric's labels.
	masked := stringLit.ReplaceAllStringFunc(expr, func(s string) string { return `""` })
	var used []string
	labelsOf := func(name string) []string { return metrics[name] }
	for _, m := range selector.FindAllStringSubmatch(masked, -1) {
		name := m[1]
		for _, mm := range matcherName.FindAllStringSubmatch(m[2], -1) {
			if name != "" && metrics[name] != nil && !slices.Contains(labelsOf(name), mm[1]) {
				problems = append(problems, fmt.Sprintf("%s has no label %q", name, mm[1]))
			}
		}
	}
	rest := selector.ReplaceAllString(masked, "$1")
	rest = rangeSel.ReplaceAllString(rest, "")
	var groupLabels []string
	for _, g := range grouping.FindAllStringSubmatch(rest, -1) {
		for _, l := range strings.Split(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				groupLabels = append(groupLabels, l)
			}
		}
	}
	rest = grouping.ReplaceAllString(rest, "")
	for _, id := range identifier.FindAllString(rest, -1) {
		if promqlWords[id] {
			continue
		}
		if metrics[id] == nil {
			problems = append(problems, fmt.Sprintf("metric %q is not exported by the worker", id))
			continue
		}
		used = append(used, id)
	}
	if len(used) == 0 && len(problems) == 0 {
		problems = append(problems, "uses no metric the worker exports")
	}
	for _, l := range groupLabels {
		ok := false
		for _, u := range used {
			ok = ok || slices.Contains(labelsOf(u), l)
		}
		if !ok && len(used) > 0 {
			problems = append(problems, fmt.Sprintf("grouped by %q, a label none of %v has", l, used))
		}
	}
	return problems
}

// checkDashboard returns the problems of a Grafana dashboard: the JSON
// Grafana loads (title, uid, schema version, panels with a type, a title, a
// position and queries), every query checked by checkQuery, every
// template variable's query too.
func checkDashboard(data []byte, metrics map[string][]string) []string {
	var d struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int             `json:"id"`
			Type       string          `json:"type"`
			Title      string          `json:"title"`
			Datasource json.RawMessage `json:"datasource"`
			GridPos    *struct {
				H, W, X, Y int
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		return []string{"not valid dashboard JSON: " + err.Error()}
	}
	var problems []string
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 30 {
		problems = append(problems, fmt.Sprintf("uid %q, title %q, schemaVersion %d: want all set (schemaVersion >= 30)", d.UID, d.Title, d.SchemaVersion))
	}
	if len(d.Panels) == 0 {
		problems = append(problems, "no panel")
	}
	ids := map[int]bool{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		var s string
		if json.Unmarshal(v.Query, &s) == nil {
			q.Query = s
		} else if err := json.Unmarshal(v.Query, &q); err != nil {
			problems = append(problems, fmt.Sprintf("variable %s: query: %v", v.Name, err))
			continue
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			problems = append(problems, fmt.Sprintf("variable %s: %q is not label_values(metric, label)", v.Name, q.Query))
			continue
		}
		for _, p := range checkQuery(m[1], metrics) {
			problems = append(problems, fmt.Sprintf("variable %s: %s", v.Name, p))
		}
		if name := identifier.FindString(m[1]); metrics[name] != nil && !slices.Contains(metrics[name], m[2]) {
			problems = append(problems, fmt.Sprintf("variable %s: %s has no label %q", v.Name, name, m[2]))
		}
	}
	for _, p := range d.Panels {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		switch {
		case p.Type == "" || p.Title == "" || p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0:
			problems = append(problems, name+": needs a type, a title and a gridPos")
		case ids[p.ID]:
			problems = append(problems, name+": duplicate id")
		case len(p.Datasource) == 0:
			problems = append(problems, name+": no datasource")
		case len(p.Targets) == 0:
			problems = append(problems, name+": no query")
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				problems = append(problems, name+": a target without expr or refId")
				continue
			}
			for _, q := range checkQuery(tg.Expr, metrics) {
				problems = append(problems, fmt.Sprintf("%s %s: %s", name, tg.RefID, q))
			}
		}
	}
	return problems
}

func TestGrafanaDashboardUsesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	metrics := exported(t)
	if p := checkDashboard(data, metrics); len(p) > 0 {
		t.Fatalf("%s:\n  %s", dashboardPath, strings.Join(p, "\n  "))
	}
	// Every page metric is on the dashboard, per crawl job.
	for _, m := range []string{"baton_pages_total", "baton_page_bytes_total", "baton_fetch_duration_seconds_bucket",
		"baton_retries_total", "baton_robots_refusals_total", "baton_frontier_queued_urls"} {
		if !strings.Contains(string(data), m+`{crawl_job=~\"$crawl_job\"}`) && !strings.Contains(string(data), m+`{class=~`) {
			t.Errorf("the dashboard does not show %s by crawl job", m)
		}
	}
}

func TestGrafanaCheckCatchesBrokenDashboards(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	metrics := exported(t)
	text := string(data)
	cases := map[string]string{
		"not JSON":                    text[:len(text)/2],
		"a metric renamed":            strings.Replace(text, "baton_page_bytes_total", "baton_bytes_total", 1),
		"the scrape job label":        strings.Replace(text, `baton_pages_total{crawl_job=~`, `baton_pages_total{job_name=~`, 1),
		"grouped by a wrong label":    strings.Replace(text, "max by (peer)", "max by (pear)", 1),
		"a variable on a wrong label": strings.Replace(text, "label_values(baton_pages_total, crawl_job)", "label_values(baton_pages_total, job_id)", -1),
		"a histogram without le":      strings.Replace(text, "baton_fetch_duration_seconds_bucket", "baton_fetch_duration_seconds", 1),
		"no panels":                   strings.Replace(text, `"panels": [`, `"panels": [], "old": [`, 1),
		"an empty query":              strings.Replace(text, `"expr": "sum by (instance) (baton_tasks_in_flight)"`, `"expr": ""`, 1),
		"a variable on no metric":     strings.Replace(text, "label_values(baton_pages_total, crawl_job)", "label_values(baton_jobs, crawl_job)", -1),
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if cases[n] == text {
			t.Errorf("%s: the case did not change the dashboard", n)
			continue
		}
		p := checkDashboard([]byte(cases[n]), metrics)
		if len(p) == 0 {
			t.Errorf("%s: no problem found", n)
		}
		t.Logf("%s: %v", n, p)
	}
}
