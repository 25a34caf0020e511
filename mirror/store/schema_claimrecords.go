package store

import "github.com/wardenhq/warden/internal/db"

// claimRecordMigrations is the schema of what the claim path records
// beside the grant log (component "claim_records"; claimrequests.go,
// claimnext.go):
//
//   - claim_requests: one row per (repository, token, requestId) of a
//     claim, renew, release or POST /ready/claim that carried a requestId:
//     the operation, the item, the request's body (canonical JSON, without
//     the id), the answer (JSON; empty only inside the transaction writing it),
//     until when a resend is answered with it (unix ms; 0: never, the
//     request runs again) and when it was written. Rows older than
//     Ledger.requestRetention are pruned.
//   - grant_leases: one row per grant whose current lease is the default
//     one (no leaseSeconds on the claim, or on its latest renew: via
//     "claim" or "renew", at when). A renew that names its lease deletes
//     the row. Kept as long as the grant log (a few bytes a grant).
//
// Every statement runs unchanged on SQLite and PostgreSQL, one per step.
var claimRecordMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE claim_requests (
	repo_id BIGINT NOT NULL,
	actor TEXT NOT NULL,
	request_id TEXT NOT NULL,
	op TEXT NOT NULL,
	number BIGINT NOT NULL,
	body TEXT NOT NULL,
	answer TEXT NOT NULL,
	replay_until BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, actor, request_id))`},
	{Version: 2, SQL: `CREATE INDEX claim_requests_by_age ON claim_requests (created_at)`},
	{Version: 3, SQL: `CREATE TABLE grant_leases (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	fence BIGINT NOT NULL,
	via TEXT NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, fence))`},
}
