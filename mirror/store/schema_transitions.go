package store

import "github.com/wardenhq/warden/internal/db"

// transitionMigrations is the schema of the transitions warden mirrors to
// GitHub after an API write (component "transitions"; transitions.go):
//
//   - subissue_sync: one row per item whose issue's native parent may not
//     be what the ledger's partOf says, written before the ledger write that
//     changes partOf and deleted once GitHub agrees: from_parent and
//     to_parent are the epic issues before and after the write (0: none;
//     the parents warden may remove or replace), tries and next_at the
//     retries' backoff (unix ms), last_error the last failure.
//   - complete_closes: one row per item whose state:complete warden
//     recorded through the API: stage (pending until the close is decided;
//     closed, already-closed, setting-off, issue-gone after), when the
//     completion and the close happened, the backoff, and the last reopening
//     of the issue by anyone but warden (reopened_by, reopened_at) and the
//     last close seen (reclosed_at): reopened-after-complete is listed
//     while a reopening is recorded, the issue is recorded open and the
//     item is complete.
//   - edge_removals: one row per (item, rel, target) edge a pm token
//     removed (actor, role, removed_at), written before the ledger write;
//     listed as edge-removed while acked_at is 0 and the edge is absent;
//     acknowledged (acked_by, acked_at, acked_how) by /backlog resolve or by
//     the edge being written again.
//
// Every statement runs unchanged on SQLite and PostgreSQL, one per step.
var transitionMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE subissue_sync (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	from_parent BIGINT NOT NULL,
	to_parent BIGINT NOT NULL,
	tries BIGINT NOT NULL,
	next_at BIGINT NOT NULL,
	last_error TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number))`},
	{Version: 2, SQL: `CREATE TABLE complete_closes (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	stage TEXT NOT NULL,
	completed_at BIGINT NOT NULL,
	closed_at BIGINT NOT NULL,
	tries BIGINT NOT NULL,
	next_at BIGINT NOT NULL,
	last_error TEXT NOT NULL,
	reopened_by TEXT NOT NULL,
	reopened_at BIGINT NOT NULL,
	reclosed_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number))`},
	{Version: 3, SQL: `CREATE TABLE edge_removals (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	rel TEXT NOT NULL,
	target TEXT NOT NULL,
	actor TEXT NOT NULL,
	role TEXT NOT NULL,
	removed_at BIGINT NOT NULL,
	acked_by TEXT NOT NULL,
	acked_at BIGINT NOT NULL,
	acked_how TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, rel, target))`},
}
