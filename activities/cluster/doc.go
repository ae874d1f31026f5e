// Package cluster is the bottom layer of Baton's cluster activities:
// what the activities of every capability (packages membership,
// heartbeat, failover, runner and scale, under activities/) share. It
// holds:
//
//   - the inputs and results of the activities (Member, Position,
//     WatchResult, RunTaskResult, ...), which the workflows pass;
//   - Deps, the clients of one worker process that every capability's
//     Activities points to, with their helpers: the metadata of a group
//     (Deps.Cluster), the clock, the activity's logger (Deps.Logger,
//     LogWith, Deps.Seen) and the report of a corrupted znode
//     (Deps.Corrupt);
//   - the error types of the activities' failures (ErrTypeFenced, ...);
//   - reads that re-read a znode only after it changed (WatchedZnode,
//     WatchedChildren);
//   - the questions more than one capability asks of a group: an
//     instance's Position (PositionOf) and whether a claimer is dead
//     (ClaimerDead).
//
// It imports no other package of activities/ but metadata, telemetry and
// jobs (for the jobs.Batches interface).
package cluster
