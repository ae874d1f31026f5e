// Package roles holds Baton's cluster model and its rules, with no I/O:
// the metadata objects shared through ZooKeeper (GroupState, NodeState, Task,
// Heartbeat) with the reference's JSON field names and enum strings, their
// validation, crawler names, the election and the dead-runner detector.
//
// Everything here is plain data and pure functions, safe to call from
// Temporal workflow code: no clock, no goroutines, no map iteration that
// influences results.
package roles
