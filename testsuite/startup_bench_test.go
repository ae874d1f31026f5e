package testsuite_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/batoncrawl/baton/activities/metadata"
	"github.com/batoncrawl/baton/roles"
	"github.com/batoncrawl/baton/testsuite"
)

// BenchmarkWorkerStart times one worker of a one-instance group
// (--runner 1 --backup 0) from its process start to its elected role in
// ZooKeeper (what `baton cluster` shows), as a user starting it sees it,
// on a Temporal server and ZooKeeper already running:
//
//   - fresh: a group never seen before (a new --group and --zk-root);
//   - restart: the same instance started again after it stopped on
//     SIGTERM (it left the group; its Lifecycle is closed).
//
// It reports the median, the fastest and the slowest of BATON_BENCH_RUNS
// runs (5 by default), the machine's 1-minute load average, and the
// median CPU the start cost until elected: the worker's
// (worker-cpu-ms) and the Temporal server's and ZooKeeper's over the
// same time (servers-cpu-ms), what a group of many workers started at
// once on few cores pays per instance whatever the load. Run it with
//
//	make bench BENCH='^BenchmarkWorkerStart$' PKGS=./testsuite/ BENCH_FLAGS=-benchtime=1x
func BenchmarkWorkerStart(b *testing.B) {
	runs := benchRuns(b, 5)
	c := testsuite.NewCluster(b, 1, 0)
	base, root := c.Group, c.Root
	for _, name := range []string{"fresh", "restart", "crash-restart"} {
		b.Run(name, func(b *testing.B) {
			var took, workerCPU, serversCPU []time.Duration
			for i := 0; i < b.N; i++ {
				for r := 0; r < runs; r++ {
					// Instance names are global under a root: a new root
					// for a fresh group.
					c.Group = fmt.Sprintf("%s-%s-%d-%d", base, name, i, r)
					c.Root = fmt.Sprintf("%s-%s-%d-%d", root, name, i, r)
					hbv := int32(-1)
					switch name {
					case "restart":
						stopElected(b, c, startElected(b, c, -1))
					case "crash-restart":
						startElected(b, c, -1).Kill()
						hbv = heartbeatVersion(b, c)
					}
					servers := serverCPU(b, c)
					start := time.Now()
					p := startElected(b, c, hbv)
					took = append(took, time.Since(start))
					workerCPU = append(workerCPU, cpuTime(b, p.Pid()))
					serversCPU = append(serversCPU, serverCPU(b, c)-servers)
					b.Logf("%s run %d: elected after %v", name, r+1, took[len(took)-1].Round(time.Millisecond))
					p.Kill()
				}
			}
			reportSpread(b, took, "elected")
			b.ReportMetric(medianMs(workerCPU), "worker-cpu-ms")
			b.ReportMetric(medianMs(serversCPU), "servers-cpu-ms")
		})
	}
}

// startElected starts instance 1 of c and waits for it to be the Runner
// with a heartbeat written after hbv (its version before the start; -1
// for any).
func startElected(b *testing.B, c *testsuite.Cluster, hbv int32) *testsuite.Process {
	meta := metadata.NewCluster(c.Meta.Store, c.Root, c.Group)
	p := c.Start(1)
	testsuite.EventuallyEvery(b, 60*time.Second, 5*time.Millisecond, "the worker to be elected", func() (bool, error) {
		n, _, err := meta.GetNode(context.Background(), testsuite.Name(1))
		if err != nil || n.Role != roles.RoleRunner {
			return false, err
		}
		_, v, err := meta.GetHeartbeat(context.Background(), testsuite.Name(1))
		return err == nil && v > hbv, err
	})
	return p
}

// serverCPU is the CPU time the cluster's Temporal server and ZooKeeper
// have spent.
func serverCPU(b *testing.B, c *testsuite.Cluster) time.Duration {
	d := cpuTime(b, c.Temporal.Process().Pid())
	if c.ZK != nil { // a standalone server (not an ensemble)
		d += cpuTime(b, c.ZK.Process().Pid())
	}
	return d
}

// medianMs is the median of d in milliseconds.
func medianMs(d []time.Duration) float64 {
	d = slices.Clone(d)
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Millisecond)
}

// heartbeatVersion is the version of instance 1's heartbeat znode.
func heartbeatVersion(b *testing.B, c *testsuite.Cluster) int32 {
	_, v, err := metadata.NewCluster(c.Meta.Store, c.Root, c.Group).GetHeartbeat(context.Background(), testsuite.Name(1))
	if err != nil {
		b.Fatalf("heartbeat: %v", err)
	}
	return v
}

// stopElected stops p with SIGTERM and waits for it to exit and for its
// instance to have left the group.
func stopElected(b *testing.B, c *testsuite.Cluster, p *testsuite.Process) {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		b.Fatalf("SIGTERM: %v", err)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		b.Logf("worker exit: %v", err)
	}
}

// reportSpread reports the median, min and max of took as what-median-s,
// what-min-s and what-max-s, and the 1-minute load average.
func reportSpread(b *testing.B, took []time.Duration, what string) {
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), what+"-median-s")
	b.ReportMetric(took[0].Seconds(), what+"-min-s")
	b.ReportMetric(took[len(took)-1].Seconds(), what+"-max-s")
	b.ReportMetric(loadAverage(b), "loadavg")
}

// benchRuns returns BATON_BENCH_RUNS, or def.
func benchRuns(b *testing.B, def int) int {
	v := os.Getenv("BATON_BENCH_RUNS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("BATON_BENCH_RUNS=%q: want a count >= 1", v)
	}
	return n
}
