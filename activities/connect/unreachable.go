package connect

import (
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/cmdline/exitcode"
)

// Unreachable returns the error for a ZooKeeper that did not answer within
// timeout (exit code 5): what failed and what to check. The local stack's
// `make stack-up` is suggested only when the hosts are its default.
func (z ZooKeeper) Unreachable(err error, timeout time.Duration) error {
	return unreachable("ZooKeeper", z.Hosts, z.Hosts == DefaultZKHosts, "--zk-hosts (BATON_ZK_HOSTS)",
		" and that the ensemble is reachable from this machine", "your ensemble", err, timeout)
}

// Unreachable returns the error for a Temporal frontend that did not
// answer within timeout (exit code 5), like ZooKeeper.Unreachable.
func (t Temporal) Unreachable(err error, timeout time.Duration) error {
	return unreachable("Temporal", t.Address, t.Address == DefaultTemporalAddress, "--temporal-address (BATON_TEMPORAL_ADDRESS)",
		", its TLS settings, and that the frontend is reachable from this machine", "your Temporal", err, timeout)
}

// unreachable builds both: what did not answer at addr, and a hint naming
// flag (the local stack's when addr is its default).
func unreachable(what, addr string, localDefault bool, flag, check, yours string, err error, timeout time.Duration) error {
	hint := "check " + flag + check
	if localDefault {
		hint = "that is the local stack's default address: start it with 'make stack-up' in the Baton repository, " +
			"or point " + flag + " at " + yours
	}
	return exitcode.With(exitcode.Unavailable, fmt.Errorf("%s at %s did not answer within %v (%w); %s", what, addr, timeout, err, hint))
}
