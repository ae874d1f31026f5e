package connect

import (
	"fmt"
	"time"

	"github.com/batoncrawl/baton/activities/connect/exitcode"
)

// Unreachable returns the error for a ZooKeeper that did not answer within
// timeout (exit code 5): what failed and what to check. The local stack's
// `make stack-up` is suggested only when the hosts are its default.
func (z ZooKeeper) Unreachable(err error, timeout time.Duration) error {
	hint := "check --zk-hosts (BATON_ZK_HOSTS) and that the ensemble is reachable from this machine"
	if z.Hosts == DefaultZKHosts {
		hint = "that is the local stack's default address: start it with 'make stack-up' in the Baton repository, " +
			"or point --zk-hosts (BATON_ZK_HOSTS) at your ensemble"
	}
	return exitcode.With(exitcode.Unavailable, fmt.Errorf("ZooKeeper at %s did not answer within %v (%w); %s", z.Hosts, timeout, err, hint))
}

// Unreachable returns the error for a Temporal frontend that did not
// answer within timeout (exit code 5), like ZooKeeper.Unreachable.
func (t Temporal) Unreachable(err error, timeout time.Duration) error {
	hint := "check --temporal-address (BATON_TEMPORAL_ADDRESS), its TLS settings, and that the frontend is reachable from this machine"
	if t.Address == DefaultTemporalAddress {
		hint = "that is the local stack's default address: start it with 'make stack-up' in the Baton repository, " +
			"or point --temporal-address (BATON_TEMPORAL_ADDRESS) at your Temporal"
	}
	return exitcode.With(exitcode.Unavailable, fmt.Errorf("Temporal at %s did not answer within %v (%w); %s", t.Address, timeout, err, hint))
}
