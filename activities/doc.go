// Package activities is the I/O side of Baton's roles: the Temporal
// activities that the workflows (package workflows) run, split by
// capability into the packages below it. Each capability has its own
// Activities struct, whose methods are its activities (Temporal registers
// them by method name), over one shared *cluster.Deps per worker process.
// This package itself holds no code: only this overview and the tests
// that exercise every capability together.
//
// The cluster capabilities form three layers, bottom to top; a package
// imports only packages of lower layers, never one above it nor this one:
//
//  1. cluster: what every capability shares: the activities' inputs and
//     results (Member, Position, ...), Deps (the metadata store, the
//     clock, the logger, the metrics, the job store's batches) with its
//     helpers, the error types (ErrTypeFenced, ...), reads re-armed by
//     ZooKeeper watches, PositionOf and ClaimerDead.
//  2. heartbeat (BeatHeart), runner (WaitTask, RunTask; a runner the group
//     no longer wants steps down), scale (Promote; AwaitIdle and Leave,
//     run by a worker that leaves) and failover (WatchRunners,
//     WaitStandby, Discover, Activate, HandOver): of the capabilities,
//     each imports cluster only.
//  3. membership (Register, WaitMembers, Elect, Position): it imports
//     failover too, whose Activate and HandOver finish at registration
//     the fail-overs a member claimed and did not finish.
//
// Below cluster: metadata (the ZooKeeper store and the group's znodes),
// telemetry (metrics), crawl (the fetch engine, crawl.Fetcher), crawler
// (the API of users' own crawlers) and, above those, jobs (crawl jobs,
// their store interfaces and their own activities struct, jobs.Activities;
// jobs/sqlstore implements the store, jobs/storetest is its conformance
// suite). Beside them, for the two binaries only: connect (the connection
// settings, with security, their secrets) and cmdline (exit codes,
// BATON_<FLAG> variables, --version). The whole module's layers are the
// table of deployments/layers_test.go, which fails when a package imports
// one above it.
package activities
