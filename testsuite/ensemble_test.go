package testsuite_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl/demosite"
	"github.com/batoncrawl/baton/testsuite"
)

// The harness's ensemble: every member serves in one quorum, the leader is
// found, and a killed leader is replaced by a new one and rejoins after a
// restart.
func TestEnsembleLeaderKillAndRestart(t *testing.T) {
	ens := testsuite.StartEnsemble(t, 3)
	require.Equal(t, 3, ens.Size())
	require.Len(t, ens.Addrs(), 3)
	leader := ens.WaitLeader(t, 30*time.Second)
	followers := 0
	for i := 0; i < ens.Size(); i++ {
		if ens.Mode(i) == "follower" {
			followers++
		}
	}
	require.Equal(t, 2, followers, "one leader, two followers")

	ens.Kill(leader)
	require.Equal(t, "", ens.Mode(leader), "a killed member does not answer")
	testsuite.Eventually(t, 30*time.Second, "a new leader", func() (bool, error) {
		l := ens.Leader()
		return l >= 0 && l != leader, fmt.Errorf("leader %d", l)
	})
	ens.Restart(t, leader)
	require.Equal(t, "follower", ens.Mode(leader), "the old leader rejoins as a follower")
}

// A crawl job through a three-node ZooKeeper ensemble whose leader is
// SIGKILLed mid-crawl and restarted later: the job completes and records
// every reachable page exactly once.
func TestCrawlSurvivesZooKeeperLeaderLoss(t *testing.T) {
	ens := testsuite.StartEnsemble(t, 3)
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers, testsuite.WithEnsemble(ens))
	require.Nil(t, c.ZK, "no standalone ZooKeeper next to the ensemble")
	require.Equal(t, ens.Hosts(), c.ZKHosts())
	site := demosite.New(demosite.Config{Pages: 80, Seed: 5, Latency: 15 * time.Millisecond})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	c.StartAll()
	c.WaitElected(electTimeout)

	args := append(c.StarterArgs(), "crawl", "--id", "ens", "--wait", "--follow", "--depth", "100", "--max-pages", "0",
		"--batch-size", "5", "--timers", "fast", srv.URL+"/")
	p := testsuite.StartProcess(t, testsuite.ProcessSpec{Name: "baton-crawl-ens", Path: c.Starter, Args: args})
	js := c.OpenStore()
	recorded := func() int { return len(readResults(t, js, "ens")) }

	testsuite.Eventually(t, taskTimeout, "10 pages recorded", func() (bool, error) {
		n := recorded()
		return n >= 10, fmt.Errorf("%d pages", n)
	})
	leader := ens.WaitLeader(t, 30*time.Second)
	before := recorded()
	killedAt := time.Now()
	ens.Kill(leader)
	t.Logf("killed ZooKeeper leader %d (%s) after %d pages", leader, ens.Member(leader).Addr(), before)

	// The two survivors elect a new leader; the crawl goes on through them.
	testsuite.Eventually(t, 30*time.Second, "a new ZooKeeper leader", func() (bool, error) {
		l := ens.Leader()
		return l >= 0 && l != leader, fmt.Errorf("leader %d", l)
	})
	t.Logf("new leader %d after %v", ens.Leader(), time.Since(killedAt).Round(time.Millisecond))
	total := len(site.Reachable(true))
	testsuite.Eventually(t, taskTimeout, "10 more pages (or all) recorded without the old leader", func() (bool, error) {
		n := recorded()
		return n >= before+10 || n >= total, fmt.Errorf("%d pages, %d before the kill, %d reachable", n, before, total)
	})
	t.Logf("%d pages recorded %v after the kill", recorded(), time.Since(killedAt).Round(time.Millisecond))

	ens.Restart(t, leader)
	t.Logf("old leader %d back as %s", leader, ens.Mode(leader))

	require.NoError(t, p.Wait(3*time.Minute), p.LogTail(4096))
	require.Equal(t, 0, p.ExitCode(), p.LogTail(4096))
	require.Contains(t, p.Logs(), "job ens completed")
	assertEveryPageOnce(t, site, srv.URL, readResults(t, js, "ens")) // job_test.go
	for i := 1; i <= c.Runner+c.Backup; i++ {
		require.False(t, c.Process(i).Exited(), "%s exited: %s", testsuite.Name(i), c.Process(i).LogTail(4096))
		t.Logf("%s ends as %s", testsuite.Name(i), c.Role(i))
	}
}
