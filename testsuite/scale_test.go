package testsuite_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// scaleRun describes one cluster-scale measurement: a group of Runners and
// Backups with the reference timers, formed, held for Settle + Window, and
// then Kills Runners SIGKILLed one after the other.
type scaleRun struct {
	Runners, Backups int
	// Settle is how long the formed cluster runs before the measured
	// window, so that formation traffic is not counted.
	Settle time.Duration
	// Window is the steady-state window over which ZooKeeper's packet
	// counters and the processes' CPU time are read.
	Window time.Duration
	// Kills is how many Runners are SIGKILLed, one after the other, after
	// the window (1 if 0; at most Runners).
	Kills int
}

func (s scaleRun) size() int { return s.Runners + s.Backups }

func (s scaleRun) kills() int { return min(max(s.Kills, 1), s.Runners) }

// killFigures is the fail-over of one SIGKILLed Runner.
type killFigures struct {
	Victim string
	// Detected is kill → the Runner's NodeState says dead-runner (the
	// claim of Discover); TakenOver is kill → it is in fail_crawler and,
	// with backups, the standby that claimed it is a Runner (Activate).
	Detected, TakenOver time.Duration
	// Burst is the packets the surviving workers sent ZooKeeper from the
	// kill to failoverQuiet after the takeover, beyond their steady rate:
	// the cost of one fail-over (GroupState rewritten and re-read, ...).
	Burst float64
}

// failoverQuiet is how long after a takeover its ZooKeeper traffic is
// still counted: the watchers re-read what changed.
const failoverQuiet = 3 * time.Second

// takeoverTimeout bounds the wait for a takeover: far beyond any timer
// bound, it only ends a run whose detector stalled.
const takeoverTimeout = 60 * time.Second

// killRunner SIGKILLs Runner victim and times its detection and takeover.
// If the takeover does not come within takeoverTimeout it fails t
// (t.Errorf) and returns false.
func killRunner(t testing.TB, c *testsuite.Cluster, s scaleRun, victim int) (killFigures, bool) {
	t.Helper()
	k := killFigures{Victim: testsuite.Name(victim)}
	standby := 0
	if s.Backups > 0 {
		id := c.GroupState().StandbyID
		var err error
		if standby, err = strconv.Atoi(id); err != nil {
			t.Fatalf("standby_id %q before killing %s: %v", id, k.Victim, err)
		}
	}
	ctx := context.Background()
	killedAt := c.Kill(victim)
	var detected time.Time
	state := "not polled"
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		now := time.Now()
		if now.Sub(killedAt) > takeoverTimeout {
			t.Errorf("%s not taken over %v after SIGKILL: %s", k.Victim, takeoverTimeout, state)
			return k, false
		}
		if detected.IsZero() {
			if r := c.Role(victim); r.Dead() {
				detected = now
			} else {
				state = fmt.Sprintf("%s is still %q", k.Victim, r)
				continue
			}
		}
		g, _, err := c.Meta.GetGroup(ctx)
		switch {
		case err != nil:
			state = err.Error()
		case !slices.Contains(g.FailCrawler, k.Victim):
			state = fmt.Sprintf("%s declared dead after %v, not in fail_crawler %v", k.Victim, detected.Sub(killedAt), g.FailCrawler)
		case standby > 0 && c.Role(standby) != roles.RoleRunner:
			state = fmt.Sprintf("standby %s is %q", testsuite.Name(standby), c.Role(standby))
		default:
			k.Detected, k.TakenOver = detected.Sub(killedAt), now.Sub(killedAt)
			return k, true
		}
	}
}

// slowest returns the kill with the longest takeover.
func (f scaleFigures) slowest() killFigures {
	var w killFigures
	for _, k := range f.Kills {
		if k.TakenOver > w.TakenOver {
			w = k
		}
	}
	return w
}

// medianBurst returns the median fail-over burst, in packets.
func (f scaleFigures) medianBurst() float64 {
	if len(f.Kills) == 0 {
		return 0
	}
	var b []float64
	for _, k := range f.Kills {
		b = append(b, k.Burst)
	}
	slices.Sort(b)
	return b[len(b)/2]
}

// median returns the median detection and takeover times.
func (f scaleFigures) median() (detected, tookOver time.Duration) {
	if len(f.Kills) == 0 {
		return 0, 0
	}
	var d, o []time.Duration
	for _, k := range f.Kills {
		d, o = append(d, k.Detected), append(o, k.TakenOver)
	}
	slices.Sort(d)
	slices.Sort(o)
	return d[len(d)/2], o[len(o)/2]
}

// scaleFigures are the measurements of one scaleRun.
type scaleFigures struct {
	N         int
	Formation time.Duration // all processes started → every member has its elected role
	// FormationCPU is the CPU time the workers, Temporal and ZooKeeper
	// spent over the formation: on a machine of few cores, formation
	// takes at least this divided by the cores.
	FormationCPU time.Duration
	// Received and Sent are ZooKeeper's zk_packets_received and
	// zk_packets_sent per second and per instance over the window.
	Received, Sent float64
	// MaxReceived is the busiest instance's packets/s to ZooKeeper (its
	// session in `cons`) over the window.
	MaxReceived float64
	// ReceivedKiB and SentKiB are zk_bytes_received_count and
	// zk_response_bytes in KiB per second and per instance.
	ReceivedKiB, SentKiB float64
	Watches              testsuite.WatchSummary // at the end of the window
	ZKCPU                float64                // ZooKeeper's CPU, in cores, over the window
	// Load is the machine's 1-minute load average at the end of the
	// window: figures taken under a much higher load than the cluster's
	// own are not comparable.
	Load      float64
	WorkerCPU float64 // CPU per worker, in milli-cores, over the window
	MaxRSS    int     // largest worker VmHWM, KiB
	MeanRSS   int     // mean worker VmHWM, KiB
	// FalseDeaths names the instances declared dead without being killed
	// (over the whole run, kill included).
	FalseDeaths []string
	// Kills are the fail-overs of the SIGKILLed Runners, in order.
	Kills []killFigures
	// Bound is the timers' detection bound (roles.Timers.DetectionBound).
	Bound time.Duration
}

// formationTimeout bounds the formation of n instances on a small machine.
func formationTimeout(n int) time.Duration { return 60*time.Second + time.Duration(n)*3*time.Second }

// runScale forms the cluster, measures the steady window and the
// fail-overs of SIGKILLed Runners, and returns the figures. A false death
// or a missing takeover fails t (t.Errorf, so the figures are still
// returned); the caller judges the detection times.
func runScale(t testing.TB, s scaleRun) scaleFigures {
	t.Helper()
	n := s.size()
	f := scaleFigures{N: n, Bound: roles.DefaultTimers().DetectionBound()}
	c := testsuite.NewCluster(t, s.Runners, s.Backups) // reference (default) timers
	if c.ZK == nil {
		t.Fatal("the scale measurement reads a standalone ZooKeeper's counters")
	}
	before := clusterCPU(t, c, 0)
	start := time.Now()
	c.StartAll()
	c.WaitElected(formationTimeout(n))
	testsuite.Eventually(t, formationTimeout(n), "GroupState to list every member", func() (bool, error) {
		g := c.GroupState()
		ok := len(g.CurrentCrawler) == n && (s.Backups == 0 || g.StandbyID != "")
		return ok, fmt.Errorf("%d of %d members, standby_id %q", len(g.CurrentCrawler), n, g.StandbyID)
	})
	f.Formation = time.Since(start)
	formed := clusterCPU(t, c, n)
	f.FormationCPU = formed.workers + formed.temporal - before.temporal + formed.zk - before.zk
	t.Logf("N=%d (%d runners, %d backups): formed in %v at load %.1f; CPU to form: workers %v (%v each), Temporal %v, ZooKeeper %v",
		n, s.Runners, s.Backups, f.Formation.Round(time.Millisecond), loadAverage(t), formed.workers.Round(time.Millisecond),
		(formed.workers / time.Duration(n)).Round(time.Millisecond), (formed.temporal - before.temporal).Round(time.Millisecond),
		(formed.zk - before.zk).Round(time.Millisecond))

	// Settle, then the measured window. Nothing in the test process talks
	// to ZooKeeper meanwhile (its own session only pings), so the server's
	// counters are the workers' traffic. The workers are checked for
	// liveness locally every second.
	holdAlive(t, c, n, s.Settle, nil)
	zk := c.ZK.Addr()
	zc, ok := c.Meta.Store.(*metadata.ZooKeeper)
	if !ok {
		t.Fatalf("the cluster's metadata store is a %T, want *metadata.ZooKeeper", c.Meta.Store)
	}
	self := zc.Conn().SessionID() // the test's own session, left out of per-session figures
	m0 := readMonitor(t, zk)
	cons0 := readConnections(t, zk, self)
	cpu0 := clusterCPU(t, c, n)
	t0 := time.Now()
	holdAlive(t, c, n, s.Window, nil)
	m1 := readMonitor(t, zk)
	cons1 := readConnections(t, zk, self)
	cpu1 := clusterCPU(t, c, n)
	dt := time.Since(t0).Seconds()
	f.Load = loadAverage(t)
	w, err := testsuite.ReadWatches(zk)
	if err != nil {
		t.Fatalf("zookeeper watches: %v", err)
	}
	f.Watches = w
	f.Received = float64(monitorInt(t, m1, "zk_packets_received")-monitorInt(t, m0, "zk_packets_received")) / dt / float64(n)
	f.Sent = float64(monitorInt(t, m1, "zk_packets_sent")-monitorInt(t, m0, "zk_packets_sent")) / dt / float64(n)
	f.ReceivedKiB = float64(monitorInt(t, m1, "zk_bytes_received_count")-monitorInt(t, m0, "zk_bytes_received_count")) / 1024 / dt / float64(n)
	f.SentKiB = float64(monitorInt(t, m1, "zk_response_bytes")-monitorInt(t, m0, "zk_response_bytes")) / 1024 / dt / float64(n)
	var steady int64 // packets received from the workers' sessions over the window
	for sid, p := range cons1 {
		d := p - cons0[sid]
		steady += d
		f.MaxReceived = max(f.MaxReceived, float64(d)/dt)
	}
	if len(cons1) != n {
		t.Errorf("ZooKeeper lists %d sessions besides the test's, want one per worker (%d)", len(cons1), n)
	}
	steadyRate := float64(steady) / dt / float64(n) // per instance
	f.ZKCPU = (cpu1.zk - cpu0.zk).Seconds() / dt
	f.WorkerCPU = (cpu1.workers - cpu0.workers).Seconds() / dt / float64(n) * 1000
	total := 0
	for i := 1; i <= n; i++ {
		kb := rssKB(c.Process(i).Pid())
		total += kb
		f.MaxRSS = max(f.MaxRSS, kb)
	}
	f.MeanRSS = total / n
	// The roles first, then the logs: a death declared in between shows
	// in the logs.
	lost := unformed(c, s)
	if dead := sortedKeys(union(lost, falseDeaths(c, n, nil))); len(dead) > 0 {
		// Reported, not fatal, so a benchmark still reports its figures;
		// the roles are scrambled now, so the kill is not measured.
		f.FalseDeaths = dead
		t.Errorf("false deaths by the end of the %v window at N=%d: %v (lost their role or in a fail list: %v)",
			s.Window, n, dead, lost)
		return f
	}

	// SIGKILL Runners one after the other (1, 2, ...: watched by the
	// standby in Runners+Backups mode, by every other Runner in
	// All-are-Runner mode) and time each detection and takeover.
	killed := map[string]bool{}
	for victim := 1; victim <= s.kills(); victim++ {
		before, from := readConnections(t, zk, self), time.Now()
		k, ok := killRunner(t, c, s, victim)
		if !ok {
			break
		}
		killed[k.Victim] = true
		holdAlive(t, c, n, failoverQuiet, killed)
		after, elapsed := readConnections(t, zk, self), time.Since(from)
		var burst int64
		for sid, p := range after {
			burst += p - before[sid] // the victim's session is gone: not counted
		}
		live := n - len(killed)
		k.Burst = float64(burst) - steadyRate*float64(live)*elapsed.Seconds()
		f.Kills = append(f.Kills, k)
		t.Logf("N=%d: %s SIGKILLed: declared dead after %v, taken over after %v (bound %v + 0.5 s); %.0f ZooKeeper packets beyond the steady rate",
			n, k.Victim, k.Detected.Round(time.Millisecond), k.TakenOver.Round(time.Millisecond), f.Bound, k.Burst)
		if dead := falseDeaths(c, n, killed); len(dead) > 0 {
			f.FalseDeaths = dead
			t.Errorf("false deaths around the fail-over of %s at N=%d: %v", k.Victim, n, dead)
			break
		}
	}
	return f
}

// holdAlive lets the cluster run for d, failing t as soon as a worker
// process other than the killed ones exits.
func holdAlive(t testing.TB, c *testsuite.Cluster, n int, d time.Duration, killed map[string]bool) {
	t.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Now().Before(end) {
		for i := 1; i <= n; i++ {
			if p := c.Process(i); p.Exited() && !killed[p.Name()] {
				t.Fatalf("%s exited (code %d) while the cluster was held:\n%s", p.Name(), p.ExitCode(), p.LogTail(4<<10))
			}
		}
		select {
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
	}
}

// unformed reads the roles and GroupState and returns, sorted, the
// instances that lost their elected role or are in a fail list: false
// deaths when nothing was killed.
func unformed(c *testsuite.Cluster, s scaleRun) []string {
	bad := map[string]bool{}
	g := c.GroupState()
	for _, l := range [][]string{g.FailCrawler, g.FailRunner, g.FailBackup} {
		for _, name := range l {
			bad[name] = true
		}
	}
	for i := 1; i <= s.size(); i++ {
		want := roles.RoleBackup
		if i <= s.Runners {
			want = roles.RoleRunner
		}
		if got := c.Role(i); got != want {
			bad[testsuite.Name(i)] = true
		}
	}
	return sortedKeys(bad)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// deathLine matches the workers' log lines that declare a peer dead (the
// detector's verdict and Discover's claim) and captures the peer.
var deathLine = regexp.MustCompile(`msg="(?:peer declared dead|discovered dead peer)".* dead=([^\s"]+)`)

// falseDeaths reads every worker's log and returns, sorted, the instances
// declared dead other than the killed ones: by a peer's detector or claim, or
// by their own life cycle finding itself dead. A false death heals (the
// instance rejoins as a backup), so the logs, not the final GroupState,
// are the record.
func falseDeaths(c *testsuite.Cluster, n int, killed map[string]bool) []string {
	dead := map[string]bool{}
	for i := 1; i <= n; i++ {
		p := c.Process(i)
		logs := p.Logs()
		for _, m := range deathLine.FindAllStringSubmatch(logs, -1) {
			if !killed[m[1]] {
				dead[m[1]] = true
			}
		}
		if !killed[testsuite.Name(i)] && strings.Contains(logs, "this instance was declared dead") {
			dead[testsuite.Name(i)] = true
		}
	}
	return sortedKeys(dead)
}

func union(lists ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			m[s] = true
		}
	}
	return m
}

// readConnections returns the packets received on each client session of
// the server at addr but self's.
func readConnections(t testing.TB, addr string, self int64) map[int64]int64 {
	t.Helper()
	cs, err := testsuite.ReadConnections(addr)
	if err != nil {
		t.Fatalf("zookeeper cons: %v", err)
	}
	out := map[int64]int64{}
	for _, c := range cs {
		if c.Session != self {
			out[c.Session] = c.Received
		}
	}
	return out
}

func readMonitor(t testing.TB, addr string) testsuite.Monitor {
	t.Helper()
	m, err := testsuite.ReadMonitor(addr)
	if err != nil {
		t.Fatalf("zookeeper mntr: %v", err)
	}
	return m
}

func monitorInt(t testing.TB, m testsuite.Monitor, key string) int64 {
	t.Helper()
	v, err := m.Int(key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// cpuSample is the CPU time used so far by ZooKeeper, Temporal and the
// workers.
type cpuSample struct{ zk, temporal, workers time.Duration }

func clusterCPU(t testing.TB, c *testsuite.Cluster, n int) cpuSample {
	t.Helper()
	var s cpuSample
	s.zk = cpuTime(t, c.ZK.Process().Pid())
	s.temporal = cpuTime(t, c.Temporal.Process().Pid())
	for i := 1; i <= n; i++ {
		s.workers += cpuTime(t, c.Process(i).Pid())
	}
	return s
}

// loadAverage returns the 1-minute load average (Linux).
func loadAverage(t testing.TB) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatalf("load average: %v", err)
	}
	l, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatalf("load average: %q: %v", b, err)
	}
	return l
}

// cpuTime returns the user+system CPU time of process pid (Linux).
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	_, self, _, ok := procTimes(pid)
	if !ok {
		t.Fatalf("cpu time of %d: no readable /proc/%d/stat", pid, pid)
	}
	return self
}

// TestSixtyInstancesNoFalseDeath checks a cluster of the reference's scale at a size
// `make test` can afford (about 100 s): 60 instances with the reference
// timers — 20 Runners and 40 Backups, or All-are-Runner mode with
// BATON_SCALE_SHAPE=all-runners — held for a minute without a false death,
// then a SIGKILLed Runner taken over within the detection bound + 0.5 s.
// BATON_SCALE_WINDOW overrides the window (e.g. 5m to hold it for
// several minutes).
func TestSixtyInstancesNoFalseDeath(t *testing.T) {
	s := scaleRun{Runners: 20, Backups: 40, Settle: 5 * time.Second, Window: scaleWindow(t, 60*time.Second)}
	switch shape := os.Getenv("BATON_SCALE_SHAPE"); shape {
	case "", "backups":
	case "all-runners":
		s.Runners, s.Backups = 60, 0
	default:
		t.Fatalf("BATON_SCALE_SHAPE=%q: want backups or all-runners", shape)
	}
	f := runScale(t, s)
	t.Logf("N=60: formation %v, ZooKeeper %.1f received + %.1f sent packets/s per instance, %d watches, worker RSS max %d MiB",
		f.Formation.Round(time.Millisecond), f.Received, f.Sent, f.Watches.Watches, f.MaxRSS>>10)
	if k, limit := f.slowest(), f.Bound+500*time.Millisecond; k.TakenOver > limit {
		t.Fatalf("%s taken over %v after SIGKILL, want within %v (detection bound %v + 0.5 s)",
			k.Victim, k.TakenOver.Round(time.Millisecond), limit, f.Bound)
	}
}

// scaleWindow returns BATON_SCALE_WINDOW, or def.
func scaleWindow(t testing.TB, def time.Duration) time.Duration {
	v := os.Getenv("BATON_SCALE_WINDOW")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("BATON_SCALE_WINDOW=%q: want a positive duration such as 60s or 5m", v)
	}
	return d
}
