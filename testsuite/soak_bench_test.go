package testsuite_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// EnvSoakDuration sets how long BenchmarkSoak crawls (a Go duration;
// default 10m).
const EnvSoakDuration = "BATON_SOAK_DURATION"

// soakJob is one crawl of the soak: a site of its own and the `baton crawl
// --wait` process that submitted it.
type soakJob struct {
	id   string
	site *demosite.Site
	srv  *httptest.Server
	proc *testsuite.Process
}

// soakOutcome is what a finished job recorded against its site.
type soakOutcome struct {
	pages, lost, twice int
	ok                 bool
}

// BenchmarkSoak crawls local sites back to back with a 3+2 cluster (fast
// timers) for $BATON_SOAK_DURATION (default 10m) while a random worker is
// SIGKILLed every few seconds (and restarted once it is declared dead). It
// reports pages lost and pages recorded twice (target: 0 and 0), the
// fail-over times of killed Runners (kill → declared dead, kill → three
// Runners again), and the workers' RSS over time. Run it alone with
//
//	BATON_SOAK_DURATION=10m make bench BENCH=Soak BENCH_FLAGS='-benchtime 1x -v'
func BenchmarkSoak(b *testing.B) {
	dur := 10 * time.Minute
	if v := os.Getenv(EnvSoakDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive Go duration such as 10m", EnvSoakDuration, v)
		}
		dur = d
	}
	const runners, backups = 3, 2
	c := testsuite.NewCluster(b, runners, backups, testsuite.FastTimers)
	c.StartAll()
	c.WaitElected(90 * time.Second)
	js := c.OpenStore()

	// RSS of every worker, sampled every 10 s.
	type sample struct {
		at       time.Duration
		sum, max int64 // kB
	}
	var (
		mu      sync.Mutex
		samples []sample
	)
	start := time.Now()
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			s := sample{at: time.Since(start)}
			for i := 1; i <= runners+backups; i++ {
				if p := c.Process(i); p != nil && !p.Exited() {
					kb := int64(rssKB(p.Pid()))
					s.sum += kb
					s.max = max(s.max, kb)
				}
			}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	var jobsRun []*soakJob
	next := func() *soakJob {
		n := len(jobsRun) + 1
		site := demosite.New(demosite.Config{Pages: 400, Seed: int64(n), BrokenLinks: 3, Latency: 20 * time.Millisecond})
		srv := httptest.NewServer(site)
		b.Cleanup(srv.Close)
		j := &soakJob{id: fmt.Sprintf("soak-%d", n), site: site, srv: srv}
		j.proc = startCrawl(c, j.id, srv.URL+"/", "--follow", "--depth", "100", "--max-pages", "0",
			"--batch-size", "10", "--wait-for-runners", "0", "-q")
		jobsRun = append(jobsRun, j)
		return j
	}
	cur := next()
	// pause waits at least one 20 ms step and at most d while keeping a
	// job running: the next starts as soon as one ends.
	pause := func(d time.Duration) {
		for end := time.Now().Add(d); ; {
			if cur.proc.Exited() && time.Since(start) < dur {
				cur = next()
			}
			time.Sleep(20 * time.Millisecond) // measurement and submission grain
			if !time.Now().Before(end) {
				return
			}
		}
	}

	var detect, failover, detectBackup []time.Duration
	kills, runnerKills, noFailover, backupUnseen, backupUnseenWatched := 0, 0, 0, 0, 0
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	b.ResetTimer()
	for time.Since(start) < dur {
		i := 1 + rng.IntN(runners+backups)
		role := c.Role(i)
		if role.Dead() || c.Process(i).Exited() {
			pause(100 * time.Millisecond) // a restarted instance is rejoining
			continue
		}
		// The other live backups at the kill (before every member watched
		// its ring, a backup was watched by another backup only).
		watchers := 0
		if g, _, err := c.Meta.GetGroup(context.Background()); err == nil {
			for _, n := range g.CurrentBackup {
				j, err := strconv.Atoi(strings.TrimPrefix(n, "sc-crawler_"))
				if err == nil && j != i && c.Role(j) == roles.RoleBackup && !c.Process(j).Exited() {
					watchers++
				}
			}
		}
		killed := c.Kill(i)
		kills++
		wasRunner := role == roles.RoleRunner
		if wasRunner {
			runnerKills++
		}
		var detected, replaced time.Duration
		// A Runner's fail-over is awaited; a backup's death is awaited
		// 10 s (its ring predecessors, Runners or backups, declare it).
		limit := 60 * time.Second
		if !wasRunner {
			limit = 10 * time.Second
		}
		for time.Since(killed) < limit && (detected == 0 || (wasRunner && replaced == 0)) {
			if detected == 0 && c.Role(i).Dead() {
				detected = time.Since(killed)
			}
			if wasRunner && replaced == 0 {
				if g, _, err := c.Meta.GetGroup(context.Background()); err == nil &&
					len(g.CurrentRunner) >= runners && !slices.Contains(g.CurrentRunner, testsuite.Name(i)) {
					replaced = time.Since(killed)
				}
			}
			pause(0)
		}
		switch {
		case !wasRunner && detected > 0:
			detectBackup = append(detectBackup, detected)
		case !wasRunner:
			backupUnseen++
			if watchers > 0 {
				backupUnseenWatched++
			}
		}
		if wasRunner {
			detect = append(detect, detected)
			if replaced > 0 {
				failover = append(failover, replaced)
			} else {
				noFailover++ // no live backup left at the time
			}
		}
		c.Start(i)                                                   // it rejoins as a backup
		pause(time.Duration(2000+rng.IntN(3000)) * time.Millisecond) // the pace of the faults
	}
	// The last job finishes without faults.
	faultsEnd := time.Now()
	if err := cur.proc.Wait(5 * time.Minute); err != nil {
		b.Logf("last job %s: %v\n%s", cur.id, err, cur.proc.LogTail(2048))
	}
	b.Logf("the last job, %s, ended %v after the last fault", cur.id, time.Since(faultsEnd).Round(time.Millisecond))
	b.StopTimer()
	close(stopSampling)
	<-sampled

	var total soakOutcome
	failed := 0
	for _, j := range jobsRun {
		if !j.proc.Exited() {
			continue
		}
		o := soakCheck(b, js, j)
		if !o.ok {
			failed++
			b.Logf("job %s: exit %d\n%s", j.id, j.proc.ExitCode(), j.proc.LogTail(2048))
		}
		total.pages += o.pages
		total.lost += o.lost
		total.twice += o.twice
	}
	slices.Sort(detect)
	slices.Sort(failover)
	b.ReportMetric(float64(total.lost), "pages-lost")
	b.ReportMetric(float64(total.twice), "pages-twice")
	b.ReportMetric(float64(total.pages), "pages")
	b.ReportMetric(float64(len(jobsRun)), "jobs")
	b.ReportMetric(float64(kills), "kills")
	b.ReportMetric(float64(backupUnseen), "backup-kills-unseen")
	if len(failover) > 0 {
		b.ReportMetric(failover[len(failover)/2].Seconds(), "failover-median-s")
		b.ReportMetric(failover[len(failover)-1].Seconds(), "failover-max-s")
	}
	if len(detect) > 0 {
		b.ReportMetric(detect[len(detect)/2].Seconds(), "detect-median-s")
		b.ReportMetric(detect[len(detect)-1].Seconds(), "detect-max-s")
	}
	b.Logf("soak %v: %d jobs (%d not completed), %d pages, %d lost, %d twice; %d kills (%d Runners, %d with no backup left to take over)",
		time.Since(start).Round(time.Second), len(jobsRun), failed, total.pages, total.lost, total.twice, kills, runnerKills, noFailover)
	b.Logf("kill → declared dead: %v", detect)
	b.Logf("kill → %d Runners again: %v", runners, failover)
	slices.Sort(detectBackup)
	b.Logf("backup kill → declared dead: %v (%d backup kills not declared dead within 10 s, %d of them with another live backup at the kill)",
		detectBackup, backupUnseen, backupUnseenWatched)
	var rss strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&rss, "  %6s  sum %6.1f MB  max %5.1f MB\n", s.at.Round(time.Second), float64(s.sum)/1024, float64(s.max)/1024)
	}
	b.Logf("worker RSS over time:\n%s", rss.String())
	if len(samples) > 0 {
		b.ReportMetric(float64(samples[len(samples)-1].max)/1024, "rss-end-max-MB")
	}
	if total.lost > 0 || total.twice > 0 || failed > 0 {
		b.Errorf("soak: %d pages lost, %d recorded twice, %d jobs not completed", total.lost, total.twice, failed)
	}
	if backupUnseen > 0 {
		b.Errorf("soak: %d backup kills not declared dead within 10 s: every member is watched by its ring predecessors", backupUnseen)
	}
}

// soakCheck compares a finished job's results with its site's reachable
// pages.
func soakCheck(b *testing.B, js jobs.Store, j *soakJob) soakOutcome {
	count := map[string]int{}
	err := js.Results(context.Background(), j.id, func(p jobs.PageRecord) error {
		count[p.URL]++
		return nil
	})
	o := soakOutcome{ok: err == nil && j.proc.ExitCode() == 0}
	if err != nil {
		b.Logf("results of %s: %v", j.id, err)
	}
	for _, n := range count {
		o.pages++
		o.twice += n - 1
	}
	for _, p := range j.site.Reachable(true) {
		u, err := crawl.NormalizeURL(j.srv.URL + p)
		if err == nil && count[u] == 0 {
			o.lost++
		}
	}
	return o
}
