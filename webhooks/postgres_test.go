package webhooks

import (
	"os"
	"testing"

	"github.com/wardenhq/warden/internal/db/dbtest"
)

// TestInboxPostgres runs the inbox's and the dispatcher's tests on
// PostgreSQL when WARDEN_TEST_POSTGRES holds a URL, each test on a fresh
// schema. SQLite-only tests (PRAGMAs, EXPLAIN QUERY PLAN, crash recovery of
// a database file) are not in the list.
func TestInboxPostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL inbox suite skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	suite := []struct {
		name string
		run  func(*testing.T)
	}{
		{"ConcurrentAcceptGroupCommits", TestInboxConcurrentAcceptGroupCommits},
		{"DuplicateIDsInOneBurst", TestInboxDuplicateIDsInOneBurst},
		{"DueOrder", TestInboxDueOrder},
		{"Complete", TestInboxComplete},
		{"FailAndDeadLetters", TestInboxFailAndDeadLetters},
		{"RetryAllOrNothing", TestInboxRetryAllOrNothing},
		{"Prune", TestInboxPrune},
		{"AcceptAfterClose", TestInboxAcceptAfterClose},
		{"AcceptRacingCloseReturns", TestInboxAcceptRacingCloseReturns},
		{"BadDeliveryDoesNotFailItsBatch", TestInboxBadDeliveryDoesNotFailItsBatch},
		{"SurvivesReopen", TestInboxSurvivesReopen},
		{"DueAfter", TestInboxDueAfter},
		{"DispatchOrderKeys", TestDispatchOrderKeys},
		{"DispatchRetriesThenSucceeds", TestDispatchRetriesThenSucceeds},
		{"DispatchDeadAfterMaxAttemptsThenRetried", TestDispatchDeadAfterMaxAttemptsThenRetried},
		{"DispatchPermanentError", TestDispatchPermanentError},
		{"DispatchThrottledWaitsForReset", TestDispatchThrottledWaitsForReset},
		{"DispatchSelfDeliveries", TestDispatchSelfDeliveries},
		{"DispatchWaitsForIdentity", TestDispatchWaitsForIdentity},
		{"DispatchWithoutIdentityRefusesToRun", TestDispatchWithoutIdentityRefusesToRun},
		{"DispatchUnparseablePayloadIsDead", TestDispatchUnparseablePayloadIsDead},
		{"DispatchGracefulStopFinishesInFlight", TestDispatchGracefulStopFinishesInFlight},
		{"DispatchGraceExpiredLeavesDeliveryPending", TestDispatchGraceExpiredLeavesDeliveryPending},
		{"DispatchBacklogDoesNotStarveOtherKeys", TestDispatchBacklogDoesNotStarveOtherKeys},
		{"DispatchReadsEachPendingDeliveryOnce", TestDispatchReadsEachPendingDeliveryOnce},
		{"DispatchHandsOverInMemory", TestDispatchHandsOverInMemory},
		{"DispatchSeesAnotherProcessesRetry", TestDispatchSeesAnotherProcessesRetry},
		{"DispatchRoutesDeliveriesStoredByAnEarlierWarden", TestDispatchRoutesDeliveriesStoredByAnEarlierWarden},
		{"DispatchSyncWaitsForTheHandOver", TestDispatchSyncWaitsForTheHandOver},
	}
	pgSchemas = map[string]string{}
	defer func() { pgSchemas = nil }()
	for _, c := range suite {
		t.Run(c.name, c.run)
	}
	if len(pgSchemas) == 0 {
		t.Fatal("no test opened a PostgreSQL schema")
	}
}
