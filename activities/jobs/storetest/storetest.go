// Package storetest is the conformance suite of jobs.Store: every engine
// must pass Run. Each subtest asserts a property a caller relies on (the
// doc comments of jobs.Store and of the interfaces it joins, ReaderStore,
// SubmitterStore, SupervisorStore and RunnerStore, are the contract).
// Run is the one entry point; the subtests live in a file per area (job,
// batch, record, concurrency, control, items, revisit), their helpers in
// fixture.go.
//
// The suite never assumes a store is empty: every job it creates has an ID
// made from the subtest's name and a random suffix, so one store (one
// PostgreSQL database) may serve every subtest and every run.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
)

// Run runs the conformance suite. open is called once per subtest and
// must return a ready store (it may be the same database each time: the
// suite's jobs have unique IDs); Run closes it at the end of the subtest
// (open may register its own cleanup too: closing twice must be harmless).
func Run(t *testing.T, open func(t *testing.T) jobs.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"CreateJob", testCreateJob},
		{"SpecUnknownJob", testSpecUnknownJob},
		{"TakeBatchFIFO", testTakeBatchFIFO},
		{"TakeBatchIdempotent", testTakeBatchIdempotent},
		{"TakeBatchEmptyFrontier", testTakeBatchEmpty},
		{"OpenBatch", testOpenBatch},
		{"PullSharesAShortQueue", testPullSharesAShortQueue},
		{"MaxPagesWithLinks", testMaxPagesLinks},
		{"MaxPagesSeedsAndRequeue", testMaxPagesSeedsRequeue},
		{"MaxPagesKnownLinks", testMaxPagesKnownLinks},
		{"Secrets", testSecrets},
		{"DeleteJob", testDeleteJob},
		{"AddSeeds", testAddSeeds},
		{"AddSeedsInBulk", testAddSeedsInBulk},
		{"AddSeedsSharedValues", testAddSeedsSharedValues},
		{"ClaimEpochs", testClaimEpochs},
		{"FinishBatch", testFinishBatch},
		{"RecordOnce", testRecordOnce},
		{"RecordLinksOnce", testRecordLinksOnce},
		{"RecordNilPage", testRecordNilPage},
		{"RecordTake", testRecordTake},
		{"ResultsOrderAndFields", testResults},
		{"ResultsByURL", testResultsByURL},
		{"Requeue", testRequeue},
		{"UnfinishedAfterExtend", testUnfinished},
		{"RequeueStaleEpoch", testRequeueStale},
		{"FailBatch", testFailBatch},
		{"ConcurrentRecord", testConcurrentRecord},
		{"ConcurrentTakeBatch", testConcurrentTake},
		{"ConcurrentTakeBatchMaxPages", testConcurrentTakeMaxPages},
		{"ConcurrentTakeBatchSameID", testConcurrentTakeSameID},
		{"RequeueWhileRecording", testRequeueWhileRecording},
		{"Identity", testIdentity},
		{"TwoJobs", testTwoJobs},
		{"Duplicates", testDuplicates},
		{"ConcurrentDuplicates", testConcurrentDuplicates},
		{"Bodies", testBodies},
		{"Refused", testRefused},
		{"Control", testControl},
		{"ExtendRefusedWhileHalted", testExtendHalted},
		{"Release", testRelease},
		{"ReleaseStaleEpoch", testReleaseStale},
		{"RequeueFailed", testRequeueFailed},
		{"RequeueFailedMaxPages", testRequeueFailedMaxPages},
		{"EntryLabels", testEntryLabels},
		{"FirstLabelWins", testFirstLabelWins},
		{"ItemsWithPage", testItemsWithPage},
		{"ItemsOnceAfterHandOver", testItemsOnceAfterHandOver},
		{"ConcurrentItems", testConcurrentItems},
		{"SinkLeases", testSinkLeases},
		{"ConcurrentLease", testConcurrentLease},
		{"SinkLeaseRunsOut", testSinkLeaseRunsOut},
		{"SinkBackoff", testSinkBackoff},
		{"DeadLetters", testDeadLetters},
		{"PendingJobs", testPendingJobs},
		{"ItemBatch", testItemBatch},
		{"HostLeasesExclusive", testHostLeasesExclusive},
		{"HostLeasesShares", testHostLeasesShares},
		{"HostLeasesFollowRobots", testHostLeasesFollowRobots},
		{"RobotsClaim", testRobotsClaim},
		{"HostLeaseExpiry", testHostLeaseExpiry},
		{"HostLeaseHandOver", testHostLeaseHandOver},
		{"HostLeaseRelease", testHostLeaseRelease},
		{"HostLeasesLookPastAHeldHost", testHostLeasesLookPastAHeldHost},
		{"HostDelayAcrossJobs", testHostDelayAcrossJobs},
		{"HostStricterAcrossJobs", testHostStricterAcrossJobs},
		{"HostLeaseExpiryAcrossJobs", testHostLeaseExpiryAcrossJobs},
		{"RenderStats", testRenderStats},
		{"RevisitRows", testRevisitRows},
		{"RevisitValidatorsBounded", testRevisitValidatorsBounded},
		{"ItemsCarriedOver", testItemsCarriedOver},
		{"BulkCarry", testBulkCarry},
		{"BulkCarryNoFollow", testBulkCarryNoFollow},
		{"BulkCarryStaleEpoch", testBulkCarryStaleEpoch},
		{"BulkCarryListLengths", testBulkCarryListLengths},
		{"NotModified", testNotModified},
		{"NotModifiedStaleEpoch", testNotModifiedStaleEpoch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			require.NotNil(t, s, "open returned a nil store")
			t.Cleanup(func() { _ = s.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			tc.fn(t, &fixture{t: t, ctx: ctx, s: s})
		})
	}
}
