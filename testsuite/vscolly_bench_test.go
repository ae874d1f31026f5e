package testsuite_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkAgainstColly measures Baton as a user would, against what the
// user would write instead at full strength: a bare Colly program
// (testsuite/testdata/barecolly: asynchronous, 24 requests at once,
// robots.txt obeyed), run as a process of its own against the same server
// directly. Both are counted at the server, from its access log; neither
// goes through a proxy.
//
// For each site, store and cluster shape it starts a cluster and runs
// rounds (BATON_BENCH_ROUNDS, 1), each a bare Colly crawl then a Baton
// crawl, and reports their medians (run it with -count=5 for five runs,
// each on a fresh cluster; make bench-report gives their medians):
//   - pages/s: distinct pages the server served over the time from the
//     command to its exit (`baton crawl URL --follow --wait`, as a user
//     types it; the Colly program's process likewise), and their ratio;
//   - Baton's rate at the site (its first request to its last), and the
//     time from the command to its first request and from its last
//     request to its exit (head-ms, tail-ms; Colly's too);
//   - CPU per 1,000 pages: the Colly process's; Baton's summed over every
//     process it needs (the workers, Temporal, ZooKeeper, PostgreSQL and
//     the CLI), and their ratio.
//
// Sites (BATON_BENCH_SITES, comma-separated; default all):
//   - latency: `baton demo-site` cross-linked (20 links a page), 20 ms a
//     page, BATON_BENCH_PAGES pages (3,000);
//   - cpu: the same at 0 ms and 10,000 pages (BATON_BENCH_CPU_PAGES):
//     the machine's CPU is the limit;
//   - real: Debian's HTML manual of PostgreSQL 15 on nginx (install it
//     with `make bench-deps`; about 1,170 pages, 0 ms).
//
// BATON_BENCH_STORES (sqlite,postgres), BATON_BENCH_SHAPES (3x8; 1x24
// too), BATON_BENCH_PROFILE (a directory: CPU
// profiles of the workers, see profiled), BATON_PG_STATEMENTS (set: the
// PostgreSQL statements that write the most WAL per page and those run
// the most, with their plans and the server's time in them, from
// pg_stat_statements, which then costs the server some CPU). On
// PostgreSQL it reports the WAL, writing transactions and rows written
// per page recorded, by table and by relation (pg_walinspect). The clusters run with the
// default timers and one Backup Runner. Run it with:
//
//	make bench BENCH=AgainstColly PKGS=./testsuite/ BENCH_FLAGS='-benchtime=1x -count=5'
func BenchmarkAgainstColly(b *testing.B) {
	colly := testsuite.BuildWorker(b, "./testsuite/testdata/barecolly")
	_, starter := testsuite.BuildBinaries(b)
	rounds := envInt("BATON_BENCH_ROUNDS", 1)
	var shared *testsuite.Postgres // one server for every PostgreSQL case
	outer := b
	for _, site := range envList("BATON_BENCH_SITES", "latency,cpu,real") {
		srv := serveBenchSite(b, starter, site)
		for _, store := range envList("BATON_BENCH_STORES", "sqlite,postgres") {
			for _, shape := range envList("BATON_BENCH_SHAPES", "3x8") {
				b.Run(site+"/"+store+"/"+shape, func(b *testing.B) {
					var runners, conc int
					if _, err := fmt.Sscanf(shape, "%dx%d", &runners, &conc); err != nil {
						b.Fatalf("BATON_BENCH_SHAPES: %q: want RUNNERSxCONCURRENCY", shape)
					}
					opts := []testsuite.ClusterOption{testsuite.WithWorkerArgs("--concurrency", strconv.Itoa(conc))}
					var pg *testsuite.Postgres // counted only where the cluster uses it
					if store == "postgres" {
						if shared == nil {
							shared = testsuite.StartPostgres(outer)
						}
						pg = shared
						opts = append(opts, testsuite.WithPostgres(pg))
					}
					c := testsuite.NewCluster(b, runners, 1, opts...)
					prof := startProfiled(b, c, site+"-"+store+"-"+shape)
					c.WaitElected(90 * time.Second)
					var rs []vsRound
					var pg0 pgWrites
					if pg != nil {
						pg0 = readPGWrites(b, pg)
						if os.Getenv("BATON_PG_STATEMENTS") != "" {
							resetStatements(b, pg)
						}
					}
					for r := range rounds {
						if pg != nil {
							pg.Admin(b, "VACUUM (ANALYZE)") // settled, as between an operator's crawls
						}
						cr := runColly(b, colly, srv)
						done := prof.during(b, r)
						br := runBaton(b, c, pg, srv, defaultJobID(), runners*conc)
						done()
						if br.distinct != cr.distinct {
							b.Errorf("round %d: Baton crawled %d distinct pages, bare Colly %d", r, br.distinct, cr.distinct)
						}
						rs = append(rs, vsRound{colly: cr, baton: br})
						b.Logf("round %d: %s", r, rs[len(rs)-1])
					}
					reportRounds(b, rs)
					if pg != nil {
						reportPGWrites(b, c, pg, pg0, rs)
					}
				})
			}
		}
	}
}

// profiled takes CPU profiles of the workers during the first round's
// Baton crawl when BATON_BENCH_PROFILE names a directory (each worker
// serves Go's profiler on a port of its own): BATON_BENCH_PROFILE_SECONDS
// (10) from the crawl's start, written as CASE-worker-N.pprof.
type profiled struct {
	dir, name string
	addrs     []string
}

func startProfiled(b *testing.B, c *testsuite.Cluster, name string) profiled {
	p := profiled{dir: os.Getenv("BATON_BENCH_PROFILE"), name: name}
	for i := 1; i <= c.Runner+c.Backup; i++ {
		if p.dir == "" {
			c.Start(i)
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", testsuite.FreePort(b))
		p.addrs = append(p.addrs, addr)
		c.StartWith(i, []string{"--pprof-addr", addr})
	}
	return p
}

// during starts the profiles of round r (only the first) and returns a
// func that waits for them.
func (p profiled) during(b *testing.B, r int) (wait func()) {
	if p.dir == "" || r > 0 {
		return func() {}
	}
	secs := envInt("BATON_BENCH_PROFILE_SECONDS", 10)
	var wg sync.WaitGroup
	for i, addr := range p.addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
			if err != nil {
				b.Errorf("profile of worker %d: %v", i+1, err)
				return
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(p.dir, fmt.Sprintf("%s-worker-%d.pprof", p.name, i+1)), data, 0o644)
			}
			if err != nil {
				b.Errorf("profile of worker %d: %v", i+1, err)
			}
		}()
	}
	return wg.Wait
}

// pgWrites is what PostgreSQL wrote so far: WAL bytes, transactions
// that wrote (the next transaction ID) and rows inserted, updated or
// deleted in the client database.
type pgWrites struct {
	wal, xacts, rows int64
	walRecords, fpi  int64               // WAL records, full-page images among them
	lsn              string              // the WAL position
	tables           map[string][4]int64 // inserted, updated (HOT of them), deleted
}

func readPGWrites(b *testing.B, pg *testsuite.Postgres) pgWrites {
	return pgWrites{
		wal:        pg.AdminInt(b, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`),
		lsn:        walLSN(b, pg),
		xacts:      pg.AdminInt(b, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`),
		rows:       pg.AdminInt(b, `SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = current_database()`),
		walRecords: pg.AdminInt(b, `SELECT wal_records FROM pg_stat_wal`),
		fpi:        pg.AdminInt(b, `SELECT wal_fpi FROM pg_stat_wal`),
		tables: tableWrites(pg.AdminText(b, `SELECT coalesce(string_agg(format('%s %s %s %s %s', relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del), ';'), '')
			FROM pg_stat_user_tables`)),
	}
}

func tableWrites(s string) map[string][4]int64 {
	m := map[string][4]int64{}
	for _, row := range strings.Split(s, ";") {
		var name string
		var n [4]int64
		if _, err := fmt.Sscanf(row, "%s %d %d %d %d", &name, &n[0], &n[1], &n[2], &n[3]); err == nil {
			m[name] = n
		}
	}
	return m
}

// reportPGWrites reports PostgreSQL's writes per page recorded over the
// case (the cluster's start and its rounds), read once the workers are
// gone (a session's row counts reach pg_stat_database when it ends).
func reportPGWrites(b *testing.B, c *testsuite.Cluster, pg *testsuite.Postgres, before pgWrites, rs []vsRound) {
	pages := 0
	for _, r := range rs {
		pages += r.baton.distinct
	}
	for i := 1; i <= c.Runner+c.Backup; i++ {
		c.Kill(i)
	}
	pg.Deadlocks(b) // waits for the workers' sessions to end
	after := readPGWrites(b, pg)
	per := func(n int64) float64 { return float64(n) / float64(max(pages, 1)) }
	b.ReportMetric(per(after.wal-before.wal), "pg-wal-B/page")
	b.ReportMetric(per(after.xacts-before.xacts), "pg-xacts/page")
	b.ReportMetric(per(after.rows-before.rows), "pg-rows/page")
	var tables []string
	for _, name := range slices.Sorted(maps.Keys(after.tables)) {
		a, z := after.tables[name], before.tables[name]
		if a == z {
			continue
		}
		tables = append(tables, fmt.Sprintf("%s +%.2f ~%.2f (HOT %.2f) -%.2f", name,
			per(a[0]-z[0]), per(a[1]-z[1]), per(a[2]-z[2]), per(a[3]-z[3])))
	}
	b.Logf("PostgreSQL per page recorded: %.0f B of WAL (%.1f records, %.2f full-page images), %.3f transactions that wrote, %.2f rows written (inserted +, updated ~, deleted -: %s)",
		per(after.wal-before.wal), per(after.walRecords-before.walRecords), per(after.fpi-before.fpi), per(after.xacts-before.xacts), per(after.rows-before.rows), strings.Join(tables, "; "))
	// PostgreSQL compresses the values of a row over about 2 KB: a
	// record is stored (and logged) compressed in such a row only.
	b.Logf("PostgreSQL WAL per page recorded by relation (records×bytes): %s; a page's record (JSON) averages %d B, stored %d B, %d %% of them compressed",
		walByRelation(b, pg, before.lsn, pages), pg.AdminInt(b, `SELECT coalesce(avg(octet_length(record)), 0)::bigint FROM baton_results`),
		pg.AdminInt(b, `SELECT coalesce(avg(pg_column_size(record)), 0)::bigint FROM baton_results`),
		pg.AdminInt(b, `SELECT coalesce(round(100 * avg((pg_column_size(record) < octet_length(record))::int)), 0)::bigint FROM baton_results`))
	if os.Getenv("BATON_PG_STATEMENTS") == "" {
		return
	}
	b.Logf("PostgreSQL statements per page recorded, the most WAL first (calls, rows, WAL records, WAL bytes): %s", topStatements(b, pg, pages))
	b.Logf("PostgreSQL statements per page recorded, the most run first: %s", statementsByCalls(b, pg, pages))
}

// benchSite is a server the benchmark crawls, with its access log.
type benchSite struct {
	url, log string
}

func serveBenchSite(b *testing.B, starter, kind string) benchSite {
	switch kind {
	case "latency", "cpu":
		latency, pages := "20ms", envInt("BATON_BENCH_PAGES", 3000)
		if kind == "cpu" {
			latency, pages = "0s", envInt("BATON_BENCH_CPU_PAGES", 10000)
		}
		port := testsuite.FreePort(b)
		log := filepath.Join(b.TempDir(), "access.log")
		testsuite.StartProcess(b, testsuite.ProcessSpec{Name: "demo-site-" + kind, Path: starter, Args: []string{"demo-site",
			"--addr", fmt.Sprintf("127.0.0.1:%d", port), "--pages", strconv.Itoa(pages), "--cross-links", "20",
			"--latency", latency, "--slow-page", "0s", "--broken-links", "5", "--seed", "11", "--access-log", log}})
		u := fmt.Sprintf("http://127.0.0.1:%d", port)
		testsuite.Eventually(b, 30*time.Second, "the demo site answers", func() (bool, error) {
			resp, err := http.Get(u + "/robots.txt")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return true, nil
		})
		return benchSite{url: u, log: log}
	case "real":
		root := os.Getenv("BATON_REAL_SITE_DIR")
		if root == "" {
			root = "/usr/share/doc/postgresql-doc-15/html"
		}
		if _, err := os.Stat(root + "/index.html"); err != nil {
			b.Skipf("no real site at %s (make bench-deps installs Debian's PostgreSQL manual)", root)
		}
		ng := testsuite.StartNginx(b, root)
		return benchSite{url: ng.URL, log: ng.AccessLog}
	}
	b.Fatalf("BATON_BENCH_SITES: unknown site %q (latency, cpu, real)", kind)
	return benchSite{}
}

// atSite is what the server logged during one crawl.
type atSite struct {
	distinct, fetches int
	first, last       time.Time
}

func hitsSince(b *testing.B, s benchSite, offset int64) atSite {
	hits, _, err := testsuite.ReadAccessLog(s.log, offset)
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var a atSite
	for _, h := range hits {
		if h.URI == "/robots.txt" {
			continue
		}
		a.fetches++
		seen[h.URI] = true
		if a.first.IsZero() || h.At.Before(a.first) {
			a.first = h.At
		}
		if h.At.After(a.last) {
			a.last = h.At
		}
	}
	a.distinct = len(seen)
	return a
}

// crawlRun is one side's crawl: at the site, wall time from the command
// to its exit, and CPU.
type crawlRun struct {
	atSite
	start time.Time // the command's start
	wall  time.Duration
	cpu   time.Duration
	// parts splits Baton's CPU by process kind.
	parts map[string]time.Duration
}

func (r crawlRun) rate() float64 { return float64(r.distinct) / r.wall.Seconds() }

func (r crawlRun) siteRate() float64 {
	return float64(r.distinct) / max(r.last.Sub(r.first), time.Millisecond).Seconds()
}

// head is the time from the command to its first request at the site,
// tail from its last request to the command's exit.
func (r crawlRun) head() time.Duration { return r.first.Sub(r.start) }
func (r crawlRun) tail() time.Duration { return r.start.Add(r.wall).Sub(r.last) }

func (r crawlRun) cpuPer1000() float64 {
	return float64(r.cpu.Milliseconds()) * 1000 / float64(max(r.distinct, 1))
}

func runColly(b *testing.B, bin string, s benchSite) crawlRun {
	offset := testsuite.LogSize(s.log)
	cmd := exec.Command(bin, "-url", s.url+"/", "-parallelism", "24")
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("bare Colly: %v: %s", err, out)
	}
	var res struct{ Responses int }
	_ = json.Unmarshal(out, &res)
	return crawlRun{atSite: hitsSince(b, s, offset), start: start, wall: wall,
		cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
}

// batonCPU is the CPU used so far by every process of the cluster.
func batonCPU(c *testsuite.Cluster, pg *testsuite.Postgres) map[string]time.Duration {
	m := map[string]time.Duration{"temporal": treeCPU(c.Temporal.Process().Pid())}
	if c.ZK != nil {
		m["zookeeper"] = treeCPU(c.ZK.Process().Pid())
	}
	if pg != nil {
		m["postgres"] = treeCPU(pg.Process().Pid())
	}
	for i := 1; i <= c.Runner+c.Backup; i++ {
		if p := c.Process(i); p != nil {
			m["workers"] += treeCPU(p.Pid())
		}
	}
	return m
}

func runBaton(b *testing.B, c *testsuite.Cluster, pg *testsuite.Postgres, s benchSite, id string, parallelism int) crawlRun {
	offset := testsuite.LogSize(s.log)
	var pgLog int64
	if pg != nil {
		pgLog = pg.LogOffset()
	}
	before := batonCPU(c, pg)
	args := append(c.StarterArgs(), "crawl", s.url+"/", "--id", id, "--follow", "--depth", "100",
		"--max-pages", "0", "--parallelism", strconv.Itoa(parallelism), "--wait", "--quiet")
	cmd := exec.Command(c.Starter, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("baton crawl: %v: %s", err, out)
	}
	after := batonCPU(c, pg)
	if pg != nil {
		if n := strings.Count(pg.LogSince(pgLog), "deadlock detected"); n > 0 {
			b.Errorf("PostgreSQL logged %d deadlocks during job %s", n, id)
		}
	}
	r := crawlRun{atSite: hitsSince(b, s, offset), start: start, wall: wall, parts: map[string]time.Duration{
		"cli": cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}}
	for k, v := range after {
		r.parts[k] = v - before[k]
	}
	for _, v := range r.parts {
		r.cpu += v
	}
	return r
}

type vsRound struct{ colly, baton crawlRun }

func (r vsRound) String() string {
	parts := make([]string, 0, len(r.baton.parts))
	for _, k := range slices.Sorted(maps.Keys(r.baton.parts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.baton.parts[k].Milliseconds()))
	}
	return fmt.Sprintf("bare Colly %d pages (%d fetches) in %v = %.0f/s, CPU %v; Baton %d pages (%d fetches) in %v = %.0f/s (%.0f/s at the site), CPU %v (ms: %s); ratio %.2f, CPU per page %.2f×",
		r.colly.distinct, r.colly.fetches, r.colly.wall.Round(time.Millisecond), r.colly.rate(), r.colly.cpu.Round(time.Millisecond),
		r.baton.distinct, r.baton.fetches, r.baton.wall.Round(time.Millisecond), r.baton.rate(), r.baton.siteRate(), r.baton.cpu.Round(time.Millisecond),
		strings.Join(parts, ", "), r.baton.rate()/r.colly.rate(), r.baton.cpuPer1000()/r.colly.cpuPer1000())
}

// reportRounds reports the rounds' medians as metrics and logs each with
// its min and max.
func reportRounds(b *testing.B, rs []vsRound) {
	type metric struct {
		name string
		of   func(vsRound) float64
	}
	ms := []metric{
		{"colly-pages/s", func(r vsRound) float64 { return r.colly.rate() }},
		{"baton-pages/s", func(r vsRound) float64 { return r.baton.rate() }},
		{"ratio", func(r vsRound) float64 { return r.baton.rate() / r.colly.rate() }},
		{"baton-site-pages/s", func(r vsRound) float64 { return r.baton.siteRate() }},
		{"colly-cpu-ms/1000pages", func(r vsRound) float64 { return r.colly.cpuPer1000() }},
		{"baton-cpu-ms/1000pages", func(r vsRound) float64 { return r.baton.cpuPer1000() }},
		{"cpu-ratio", func(r vsRound) float64 { return r.baton.cpuPer1000() / r.colly.cpuPer1000() }},
		{"baton-wall-ms", func(r vsRound) float64 { return float64(r.baton.wall.Milliseconds()) }},
		{"baton-head-ms", func(r vsRound) float64 { return float64(r.baton.head().Milliseconds()) }},
		{"baton-tail-ms", func(r vsRound) float64 { return float64(r.baton.tail().Milliseconds()) }},
		{"colly-head-ms", func(r vsRound) float64 { return float64(r.colly.head().Milliseconds()) }},
		{"colly-tail-ms", func(r vsRound) float64 { return float64(r.colly.tail().Milliseconds()) }},
	}
	for _, kind := range []string{"workers", "temporal", "zookeeper", "postgres", "cli"} {
		if _, ok := rs[0].baton.parts[kind]; ok {
			ms = append(ms, metric{"baton-" + kind + "-cpu-ms/1000pages", func(r vsRound) float64 {
				return float64(r.baton.parts[kind].Milliseconds()) * 1000 / float64(max(r.baton.distinct, 1))
			}})
		}
	}
	var lines []string
	for _, m := range ms {
		vs := make([]float64, len(rs))
		for i, r := range rs {
			vs[i] = m.of(r)
		}
		slices.Sort(vs)
		med := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		b.ReportMetric(med, m.name)
		lines = append(lines, fmt.Sprintf("%s %.3g (%.3g–%.3g)", m.name, med, vs[0], vs[len(vs)-1]))
	}
	b.Logf("medians of %d rounds (min–max): %s", len(rs), strings.Join(lines, "; "))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envList(name, def string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}
