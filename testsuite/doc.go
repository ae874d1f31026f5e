// Package testsuite is Baton's integration-test harness. It starts real
// ZooKeeper and Temporal dev servers on free loopback ports, builds and runs
// the Baton binaries as child processes, and offers polling helpers so tests
// synchronise on observable conditions instead of sleeping.
//
// Typical use from an integration test:
//
//	func TestMain(m *testing.M) { testsuite.Main(m) } // removes built binaries
//
//	func TestCrawl(t *testing.T) {
//		zk := testsuite.StartZooKeeper(t)
//		tmp := testsuite.StartTemporal(t)
//		workerBin, starterBin := testsuite.BuildBinaries(t)
//		w := testsuite.StartProcess(t, testsuite.ProcessSpec{
//			Path: workerBin,
//			Args: []string{ /* worker flags pointing at zk.Addr() and tmp.Address() */ },
//		})
//		testsuite.Eventually(t, 30*time.Second, "worker registered", func() (bool, error) { ... })
//		w.Kill()
//	}
//
// StartEnsemble starts a ZooKeeper ensemble (quorum mode) instead of a
// standalone server, with Kill, Restart and Leader for fault injection; give
// it to a cluster with NewCluster(t, runner, backup, WithEnsemble(e)).
//
// Everything started by the harness is stopped through t.Cleanup, and child
// processes die with the test binary (Linux parent-death signal).
//
// Environment variables:
//
//	BATON_TEMPORAL_BIN  temporal CLI binary (default <repo>/.stack/bin/temporal, then $PATH)
//	BATON_ZK_HOME       ZooKeeper install dir (default /usr/share/zookeeper; an
//	                    upstream tarball with lib/*.jar works too)
//	BATON_ZK_CLASSPATH  explicit ZooKeeper server classpath (overrides discovery)
//	JAVA_HOME           Java runtime for ZooKeeper (default: java on $PATH)
//	BATON_ALLOW_SKIP    "1" turns "ZooKeeper/Temporal not installed" into t.Skip
//	                    instead of t.Fatal
//
// In -short mode (go test -short) StartZooKeeper, StartTemporal and
// BuildBinaries skip the calling test, which is how `make test-unit` excludes
// integration tests.
package testsuite
