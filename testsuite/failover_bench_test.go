package testsuite_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkFailover measures the time from SIGKILL of the Runner to its Task
// running again on the new Runner (the first result recorded by the new
// holder), over 10 kills, with the reference's default timers and with the
// fast profile. Each kill is followed by a restart of the killed instance,
// which rejoins as the backup for the next round. Run it with
//
//	make bench BENCH=Failover
//
// It reports the median and the maximum, and the bound the timers imply
// (update_timeout + heart_rhythm_timeout × check_crawler_state).
func BenchmarkFailover(b *testing.B) {
	for _, prof := range []struct {
		name   string
		timers roles.Timers
	}{{"default", roles.DefaultTimers()}, {"fast", roles.FastTimers()}} {
		b.Run(prof.name, func(b *testing.B) {
			const kills = 10
			c := testsuite.NewCluster(b, 1, 1, testsuite.WithWorkerArgs("--timers", prof.name))
			site := testsuite.NewSite(b, 10*time.Millisecond)
			c.StartAll()
			c.WaitElected(90 * time.Second)
			runner, backup := 1, 2
			var took []time.Duration
			b.ResetTimer()
			for k := 0; k < kills; k++ {
				if !c.Task(runner).Pending() {
					c.Assign(runner, site.URLs(fmt.Sprintf("k%d", k), 2000))
				}
				start := c.Task(runner).NextIndex
				c.WaitTaskProgress(60*time.Second, runner, start+2)
				killed := c.Kill(runner)
				var resumed time.Time
				from := -1
				testsuite.EventuallyEvery(b, 120*time.Second, 5*time.Millisecond, "the task to run again on the backup", func() (bool, error) {
					t := c.Task(backup)
					if t.HandedOverFrom != testsuite.Name(runner) || t.Holder != testsuite.Name(backup) {
						return false, nil
					}
					if from < 0 {
						from = t.NextIndex
					}
					if t.NextIndex > from {
						resumed = time.Now()
						return true, nil
					}
					return false, nil
				})
				took = append(took, resumed.Sub(killed))
				// The killed instance comes back and rejoins as the standby.
				c.Start(runner)
				r := runner
				testsuite.Eventually(b, 120*time.Second, "the killed instance to rejoin as standby", func() (bool, error) {
					g := c.GroupState()
					return c.Role(r) == roles.RoleBackup && g.StandbyID == fmt.Sprint(r), nil
				})
				runner, backup = backup, runner
			}
			b.StopTimer()
			slices.Sort(took)
			median := took[len(took)/2]
			bound := prof.timers.DetectionBound()
			b.ReportMetric(median.Seconds(), "median-s")
			b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
			b.ReportMetric(took[0].Seconds(), "min-s")
			b.ReportMetric((bound + 500*time.Millisecond).Seconds(), "bound+0.5-s")
			b.Logf("%s timers (%v): %d kills, kill→running again: %v", prof.name, prof.timers, kills, took)
		})
	}
}
