package testsuite_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkClusterScale measures what a cluster costs ZooKeeper as it
// grows: at N = 10, 30 and 60 real baton-worker processes with
// the reference timers, in two shapes — "backups" (N/3 Runners, the rest
// Backups) and "all-runners" (All-are-Runner mode) — it reports
//
//   - formation-s: all processes started → every member has its elected
//     role and GroupState lists them all; formation-cpu-s: the CPU time
//     the workers, Temporal and ZooKeeper spent meanwhile;
//   - zk-recv/s/inst, zk-sent/s/inst: ZooKeeper's zk_packets_received and
//     zk_packets_sent (mntr) per second and per instance over a steady
//     window (BATON_SCALE_WINDOW, 60s by default, after 10 s of settling);
//   - zk-recv/s-busiest: the busiest instance's packets/s (its session in
//     `cons`), where one instance's O(N) work shows;
//   - zk-recv-KiB/s/inst, zk-sent-KiB/s/inst: zk_bytes_received_count and
//     zk_response_bytes per second and per instance over the window;
//   - zk-watches, zk-watch-paths: wchs at the end of the window;
//   - zk-cpu-cores, worker-cpu-mcores: CPU over the window, ZooKeeper's
//     and per worker; loadavg: the machine's 1-minute load average then
//     (the cores are shared: compare runs at similar loads);
//   - rss-max-MiB, rss-mean-MiB: the workers' peak RSS (VmHWM);
//   - detect-s, takeover-s, takeover-max-s: for 3 Runners SIGKILLed one
//     after the other, the median time from SIGKILL to the Runner being
//     claimed dead and to it being in fail_crawler (and the standby a
//     Runner), and the slowest takeover, against bound+0.5-s
//     (update_timeout + heart_rhythm_timeout × check_crawler_state, +
//     0.5 s);
//   - failover-zk-pkts: the median packets the workers sent ZooKeeper for
//     one fail-over beyond their steady rate (kill → 3 s after the
//     takeover), where GroupState rewrites re-read by every watcher show;
//     with backups only: in All-are-Runner mode the steady traffic's own
//     variation over those seconds is larger than the fail-over's;
//   - false-deaths: instances declared dead without being killed; the
//     benchmark fails if there is one.
//
// BATON_SCALE_SIZES (e.g. "10,30") restricts the sizes. Run it with
//
//	make bench BENCH=ClusterScale BENCH_FLAGS=-benchtime=1x PKGS=./testsuite/
func BenchmarkClusterScale(b *testing.B) {
	sizes := scaleSizes(b)
	for _, shape := range []struct {
		name    string
		runners func(n int) int
	}{
		{"backups", func(n int) int { return n / 3 }},
		{"all-runners", func(n int) int { return n }},
	} {
		b.Run(shape.name, func(b *testing.B) {
			for _, n := range sizes {
				b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
					r := shape.runners(n)
					s := scaleRun{Runners: r, Backups: n - r, Settle: 10 * time.Second,
						Window: scaleWindow(b, 60*time.Second), Kills: 3}
					var f scaleFigures
					for i := 0; i < b.N; i++ { // -benchtime=1x: one cluster per size
						f = runScale(b, s)
					}
					b.ReportMetric(f.Formation.Seconds(), "formation-s")
					b.ReportMetric(f.FormationCPU.Seconds(), "formation-cpu-s")
					b.ReportMetric(f.Received, "zk-recv/s/inst")
					b.ReportMetric(f.Sent, "zk-sent/s/inst")
					b.ReportMetric(f.MaxReceived, "zk-recv/s-busiest")
					b.ReportMetric(f.ReceivedKiB, "zk-recv-KiB/s/inst")
					b.ReportMetric(f.SentKiB, "zk-sent-KiB/s/inst")
					b.ReportMetric(float64(f.Watches.Watches), "zk-watches")
					b.ReportMetric(float64(f.Watches.Paths), "zk-watch-paths")
					b.ReportMetric(f.ZKCPU, "zk-cpu-cores")
					b.ReportMetric(f.Load, "loadavg")
					b.ReportMetric(f.WorkerCPU, "worker-cpu-mcores")
					b.ReportMetric(float64(f.MaxRSS)/1024, "rss-max-MiB")
					b.ReportMetric(float64(f.MeanRSS)/1024, "rss-mean-MiB")
					if len(f.Kills) > 0 { // none after a false death
						detected, tookOver := f.median()
						b.ReportMetric(detected.Seconds(), "detect-s")
						b.ReportMetric(tookOver.Seconds(), "takeover-s")
						b.ReportMetric(f.slowest().TakenOver.Seconds(), "takeover-max-s")
						if n > r { // see failover-zk-pkts above
							b.ReportMetric(f.medianBurst(), "failover-zk-pkts")
						}
						b.ReportMetric((f.Bound + 500*time.Millisecond).Seconds(), "bound+0.5-s")
					}
					b.ReportMetric(float64(len(f.FalseDeaths)), "false-deaths")
					if k, limit := f.slowest(), f.Bound+500*time.Millisecond; k.TakenOver > limit {
						b.Logf("N=%d %s: takeover of %s took %v, over the bound %v + 0.5 s", n, shape.name, k.Victim, k.TakenOver, f.Bound)
					}
				})
			}
		})
	}
}

// scaleSizes returns BATON_SCALE_SIZES, or 10, 30 and 60.
func scaleSizes(b *testing.B) []int {
	v := os.Getenv("BATON_SCALE_SIZES")
	if v == "" {
		return []int{10, 30, 60}
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			b.Fatalf("BATON_SCALE_SIZES=%q: want sizes >= 2 such as 10,30,60", v)
		}
		out = append(out, n)
	}
	return out
}
