package testsuite_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// hostsSite is the demo site served on the bridge of the hosts, counting
// requests by the address they came from: its pages', and its robots.txt's.
type hostsSite struct {
	*demosite.Site
	srv    *httptest.Server
	mu     sync.Mutex
	from   map[string]int // client IP → page requests
	robots map[string]int // client IP → robots.txt requests
}

func newHostsSite(t *testing.T, h *testsuite.Hosts, cfg demosite.Config) *hostsSite {
	s := &hostsSite{Site: demosite.New(cfg), from: map[string]int{}, robots: map[string]int{}}
	s.srv = h.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.mu.Lock()
		if r.URL.Path == "/robots.txt" {
			s.robots[ip]++
		} else {
			s.from[ip]++
		}
		s.mu.Unlock()
		s.Site.ServeHTTP(w, r)
	}))
	return s
}

// From returns how many page requests came from each address.
func (s *hostsSite) From() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.from)
}

// RobotsFrom returns how many robots.txt requests came from each address.
func (s *hostsSite) RobotsFrom() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.robots)
}

// hostsCluster is a group of 2 Runners and 1 Backup, each worker on a host
// of its own, on PostgreSQL; ZooKeeper, Temporal, PostgreSQL and the site
// listen on the hosts' bridge.
func hostsCluster(t *testing.T, cfg demosite.Config, opts ...testsuite.ClusterOption) (*testsuite.Hosts, *testsuite.Postgres, *testsuite.Cluster, *hostsSite) {
	t.Helper()
	start := time.Now()
	hosts := testsuite.NewHosts(t, 3)
	pg := testsuite.StartPostgresOn(t, hosts.ServerIP())
	c := testsuite.NewCluster(t, 2, 1, append([]testsuite.ClusterOption{testsuite.FastTimers,
		testsuite.WithHosts(hosts), testsuite.WithPostgres(pg)}, opts...)...)
	site := newHostsSite(t, hosts, cfg)
	c.StartAll()
	c.WaitElected(electTimeout)
	t.Logf("3 hosts, PostgreSQL, ZooKeeper, Temporal on %s and a group of 2+1 ready in %v",
		hosts.ServerIP(), time.Since(start).Round(time.Millisecond))
	return hosts, pg, c, site
}

// sessionsFrom counts the job store's sessions from ip, and those of
// them in a transaction or holding a lock.
func sessionsFrom(t *testing.T, pg *testsuite.Postgres, ip string) (all, holding int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.DSN())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE a.state <> 'idle'
			OR a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL
			OR EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid))
		FROM pg_stat_activity a WHERE a.client_addr = $1::inet`, ip).Scan(&all, &holding))
	return all, holding
}

// clientAddrs lists the addresses of the job store's sessions (as
// PostgreSQL sees them).
func clientAddrs(t *testing.T, pg *testsuite.Postgres) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.DSN())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT DISTINCT host(client_addr) FROM pg_stat_activity
		WHERE usename = $1 AND client_addr IS NOT NULL AND pid <> pg_backend_pid()`, pg.User())
	require.NoError(t, err)
	addrs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	slices.Sort(addrs)
	return addrs
}

// sitePath is the path of a recorded URL of the site.
func sitePath(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return p.Path
}

// A crawl on three "machines": every worker in a network namespace of its
// own, reaching ZooKeeper, Temporal, PostgreSQL and the site over a veth
// pair and a bridge. Every reachable page is recorded and fetched exactly
// once, by the Runners' hosts; each server sees each worker from its own
// host's address.
func TestCrawlOnThreeHosts(t *testing.T) {
	hosts, pg, c, site := hostsCluster(t, demosite.Config{Pages: 300, Seed: 5, BrokenLinks: 3, Latency: 20 * time.Millisecond})
	start := time.Now()
	p := startCrawl(c, "hosts", site.srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0", "--batch-size", "20")
	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job hosts completed")
	took := time.Since(start)

	js := c.OpenStore()
	recs := readResults(t, js, "hosts")
	assertEveryPageOnce(t, site.Site, site.srv.URL, recs)
	hits := site.AllHits()
	for _, path := range site.Reachable(true) {
		assert.Equal(t, 1, hits[path], "%s fetched once", path)
	}
	runnerIPs := []string{hosts.Host(1).IP, hosts.Host(2).IP}
	for ip := range site.From() {
		assert.Contains(t, runnerIPs, ip, "the site's pages were crawled from the Runners' hosts only")
	}
	// robots.txt is fetched once for the job, by the worker that ran its
	// first step (its warm-up): a Runner's, or the backup's.
	robots := 0
	for _, n := range site.RobotsFrom() {
		robots += n
	}
	assert.Equal(t, 1, robots, "robots.txt fetched once for the job: %v", site.RobotsFrom())
	t.Logf("%d pages in %v; page requests by address: %v; robots.txt requests: %v", len(recs), took.Round(time.Millisecond), site.From(), site.RobotsFrom())

	// ZooKeeper and PostgreSQL see every worker from its host.
	cons, err := testsuite.FourLetterWord(c.ZK.Addr(), "cons")
	require.NoError(t, err)
	addrs := clientAddrs(t, pg)
	for i := 1; i <= 3; i++ {
		assert.Contains(t, cons, "/"+hosts.Host(i).IP+":", "ZooKeeper has a session from host %d", i)
	}
	for i := 1; i <= 2; i++ {
		assert.Contains(t, addrs, hosts.Host(i).IP, "PostgreSQL has sessions from host %d", i)
	}
	assert.NotContains(t, addrs, "127.0.0.1", "no worker reached PostgreSQL over loopback")
}

// A Runner's host is partitioned mid-crawl, cut off from ZooKeeper,
// Temporal, PostgreSQL and the site at once, for longer than its
// ZooKeeper session: the backup declares it dead and takes its batch over
// (raising the batch's epoch in the store once PostgreSQL has ended the
// cut-off session's transaction, if one was open: no session of the
// vanished host holds a lock past sqlstore.SessionBound), the crawl goes
// on without it; a write at the cut-off Runner's epoch is refused. Then
// the link comes back: the cut-off Runner, still running, finds it was
// declared dead, nothing it had in hand is recorded at its old epoch, and
// it rejoins the group as a backup. The crawl completes with every page
// recorded exactly once; pages fetched twice are only pages of the
// Runner's batch.
func TestRunnerHostPartitionedMidCrawlIsFencedAndRejoins(t *testing.T) {
	const (
		session = 4 * time.Second
		job     = "part"
	)
	hosts, pg, c, site := hostsCluster(t, demosite.Config{Pages: 400, Seed: 21, BrokenLinks: 3, Latency: 60 * time.Millisecond},
		testsuite.WithWorkerArgs("--zk-session-timeout", session.String(), "--concurrency", "2"))
	reachable := len(site.Reachable(true))
	// Two requests in flight per Runner (the site's parallelism of 4, a
	// share of 2 each), and one lease per Runner for as long as the
	// frontier has work (--batch-size 0): the cut-off Runner holds its
	// batch at the cut.
	p := startCrawl(c, job, site.srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0",
		"--parallelism", "4", "--batch-size", "0", "--timeout", "5s")
	crawlDone := make(chan time.Time, 1) // when the crawl's CLI exited
	go func() {
		<-p.Done()
		crawlDone <- time.Now()
	}()
	js := c.OpenStore()
	ctx := context.Background()
	recorded := func() int {
		st, err := js.Stats(ctx, job)
		if errors.Is(err, jobs.ErrNoJob) {
			return 0
		}
		require.NoError(t, err)
		return st.Recorded
	}

	// A good share of the pages recorded, runner 2 holding a batch with
	// work left.
	var batch jobs.BatchInfo
	testsuite.Eventually(t, taskTimeout, "a third of the pages recorded and runner 2 well inside a batch", func() (bool, error) {
		if n := recorded(); n < reachable/3 {
			return false, fmt.Errorf("%d of %d pages", n, reachable)
		}
		tk := c.Task(2)
		if tk.Job == nil || !tk.Pending() {
			return false, errors.New("runner 2 holds no batch")
		}
		bs, err := js.Batches(ctx, job, []string{tk.Job.Batch})
		if err != nil || len(bs) != 1 {
			return false, fmt.Errorf("batch %s: %v", tk.Job.Batch, err)
		}
		batch = bs[0]
		entries, err := js.Entries(ctx, job, batch.ID)
		open := 0
		for _, e := range entries {
			if !e.Done {
				open++
			}
		}
		return batch.Holder == testsuite.Name(2) && batch.State == jobs.BatchRunning && open >= 2,
			fmt.Errorf("batch %+v, %d open: %v", batch, open, err)
	})

	h2 := hosts.Host(2)
	before, _ := sessionsFrom(t, pg, h2.IP)
	require.NotZero(t, before, "runner 2 has job store sessions")
	cutAt := c.Partition(2)
	atCut := recorded()
	t.Logf("host 2 (%s) partitioned after %d of %d pages; runner 2 holds batch %s at epoch %d",
		h2.IP, atCut, reachable, batch.ID, batch.Epoch)
	// Cut off whole: ZooKeeper, Temporal, PostgreSQL and the site.
	for what, addr := range map[string]string{"ZooKeeper": c.ZK.Addr(), "Temporal": c.Temporal.Address(),
		"PostgreSQL": c.Postgres.Address(), "the site": site.srv.Listener.Addr().String()} {
		assert.Error(t, h2.Dial(addr, 200*time.Millisecond), "partitioned host 2 reaches %s", what)
	}

	c.WaitRoles(taskTimeout, map[int]roles.Role{2: roles.RoleDeadRunner, 3: roles.RoleRunner})
	deadAt := time.Now()
	node, _, err := c.Meta.GetNode(ctx, testsuite.Name(2))
	require.NoError(t, err)
	assert.Equal(t, testsuite.Name(3), node.TakenOverBy, "the backup took the cut-off runner over")
	// The batch changes hands in the job store: its epoch is raised (a
	// claim waits for PostgreSQL to end the cut-off session's transaction,
	// if one was open).
	var taken jobs.BatchInfo
	testsuite.Eventually(t, taskTimeout, "runner 2's batch to be taken over in the store", func() (bool, error) {
		bs, err := js.Batches(ctx, job, []string{batch.ID})
		if err != nil || len(bs) != 1 {
			return false, fmt.Errorf("batch %s: %v", batch.ID, err)
		}
		taken = bs[0]
		return taken.Epoch > batch.Epoch, fmt.Errorf("batch %+v", taken)
	})
	claimedAt := time.Now()
	// Past the session timeout: the server has expired runner 2's session.
	testsuite.Eventually(t, 30*time.Second, "runner 2's session to expire", func() (bool, error) {
		_, _, err := c.Meta.Store.Get(ctx, c.Meta.AlivePath(testsuite.Name(2)))
		return errors.Is(err, metadata.ErrNotFound) && time.Since(cutAt) > session, err
	})
	// No session of the vanished host holds a lock or a transaction open
	// past sqlstore.SessionBound (PostgreSQL ends one idle in a
	// transaction after 10 s). A session left idle outside a transaction
	// may linger, holding nothing (see README, Tests and benchmarks).
	var lingering int
	testsuite.Eventually(t, sqlstore.SessionBound+15*time.Second, "host 2's sessions to hold no lock or transaction", func() (bool, error) {
		all, holding := sessionsFrom(t, pg, h2.IP)
		lingering = all
		return holding == 0, fmt.Errorf("%d of %d sessions from %s in a transaction or holding a lock", holding, all, h2.IP)
	})
	releasedAt := time.Now()
	require.False(t, c.Process(2).Exited(), "the cut-off worker runs on: %s", c.Process(2).LogTail(4096))
	byOldHolder := func(recs []jobs.PageRecord) (n int) {
		for _, r := range recs {
			if r.Runner == testsuite.Name(2) && r.Batch == batch.ID && r.Epoch <= batch.Epoch {
				n++
			}
		}
		return n
	}
	beforeHeal := byOldHolder(readResults(t, js, job))
	// What runner 2 would write at its epoch is refused.
	open, err := js.Unfinished(ctx, job, batch.ID)
	require.NoError(t, err)
	if len(open) == 0 { // all done by the new holder already: any URL of the batch
		entries, err := js.Entries(ctx, job, batch.ID)
		require.NoError(t, err)
		require.NotEmpty(t, entries)
		open = []jobs.Entry{entries[0].Entry}
	}
	_, err = js.Record(ctx, jobs.Record{Job: job, Batch: batch.ID, Runner: testsuite.Name(2), Epoch: batch.Epoch, URL: open[0].URL})
	require.ErrorIs(t, err, jobs.ErrStale, "a record at runner 2's old epoch")

	healAt := c.Heal(2)
	c.WaitRoles(taskTimeout, map[int]roles.Role{2: roles.RoleBackup})
	rejoinAt := time.Now()
	t.Logf("declared dead %v after the cut, batch %s claimed by %s at epoch %d %v after the cut, "+
		"none of host 2's %d PostgreSQL sessions held a lock or a transaction %v after the cut (bound %v; %d still open, idle); partition lasted %v (ZooKeeper session %v); "+
		"runner 2 rejoined as a backup %v after the heal; %d pages recorded at the heal",
		deadAt.Sub(cutAt).Round(time.Millisecond), batch.ID, taken.Holder, taken.Epoch,
		claimedAt.Sub(cutAt).Round(time.Millisecond), before, releasedAt.Sub(cutAt).Round(time.Millisecond), sqlstore.SessionBound, lingering,
		healAt.Sub(cutAt).Round(time.Millisecond), session, rejoinAt.Sub(healAt).Round(time.Millisecond), recorded())

	require.NoError(t, p.Wait(3*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())
	assert.Contains(t, p.Logs(), "job "+job+" completed")
	doneAt := <-crawlDone

	recs := readResults(t, js, job)
	assertEveryPageOnce(t, site.Site, site.srv.URL, recs)
	// Fenced: nothing the cut-off Runner had in hand was recorded at its
	// old epoch once its batch changed hands.
	assert.Equal(t, beforeHeal, byOldHolder(recs), "pages recorded by runner 2 at its old epoch after the takeover")
	for _, r := range recs {
		if r.Runner == testsuite.Name(2) && r.Epoch > batch.Epoch && r.Batch == batch.ID {
			t.Errorf("runner 2 recorded %s in its old batch at epoch %d", r.URL, r.Epoch)
		}
	}
	logs := c.Process(2).Logs()
	assert.Contains(t, logs, "declared dead", "the cut-off runner learnt it was declared dead")
	fencedInLog := strings.Contains(logs, jobs.ErrStale.Error())

	// At the site: every page fetched, and only pages of runner 2's batch
	// (in flight or pulled ahead at the cut) more than once.
	entries, err := js.Entries(ctx, job, batch.ID)
	require.NoError(t, err)
	inBatch := map[string]bool{}
	for _, e := range entries {
		inBatch[sitePath(t, e.URL)] = true
	}
	hits := site.AllHits()
	var twice []string
	extra := 0
	for _, path := range site.Reachable(true) {
		n := hits[path]
		assert.GreaterOrEqual(t, n, 1, "%s fetched", path)
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s×%d", path, n))
			extra += n - 1
			assert.True(t, inBatch[path], "%s fetched %d times, not a page of runner 2's batch", path, n)
		}
	}
	dups := 0
	count := map[string]int{}
	for _, r := range recs {
		count[crawlKey(r.URL)]++
	}
	for _, n := range count {
		dups += n - 1
	}
	t.Logf("crawl completed %v after the cut (%v after the heal): %d pages recorded, %d recorded twice; %d by runner 2 at epoch %d "+
		"(all before the cut), %d pages of its batch; %d pages fetched more than once (%d extra fetches): %v; "+
		"ErrStale in runner 2's log: %v",
		doneAt.Sub(cutAt).Round(time.Millisecond), doneAt.Sub(healAt).Round(time.Millisecond), len(recs), dups, beforeHeal, batch.Epoch, len(entries),
		len(twice), extra, twice, fencedInLog)
	for i := 1; i <= 3; i++ {
		require.False(t, c.Process(i).Exited(), "%s exited: %s", testsuite.Name(i), c.Process(i).LogTail(4096))
	}
}

// crawlKey is the normalised form of a recorded URL.
func crawlKey(u string) string {
	if n, err := crawl.NormalizeURL(u); err == nil {
		return n
	}
	return u
}
