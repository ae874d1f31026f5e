package jobs

import "encoding/json"

// EncodeSpecForTest is the spec as it travels (workflow inputs, the jobs
// table).
func EncodeSpecForTest(s Spec) ([]byte, error) { return json.Marshal(s) }

// StartWaitForTest is how long a start batch waits for the first links.
const StartWaitForTest = startWait

// CommitGroupForTest is the group a commit of a batch with conc slots
// lingers for.
func CommitGroupForTest(conc int) int { return commitGroup(conc) }
