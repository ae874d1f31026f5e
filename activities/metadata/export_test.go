package metadata

// The contract suites are shared with the external test package
// (metadata_test), which can import testsuite without an import cycle.
var (
	ContractStore   = testStore
	ContractLock    = testLock
	ContractCluster = testCluster
	ContractClosed  = testClosed
	LockAcross      = testLockAcross
	WaitFor         = eventually
	FreshPath       = freshPath
	RequireFires    = requireFires
)
