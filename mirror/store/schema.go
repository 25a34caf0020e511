package mirror

import "github.com/wardenhq/warden/internal/db"

// ledgerMigrations is the ledger's schema. Every statement runs unchanged on
// SQLite and PostgreSQL: BIGINT ids and unix-millisecond timestamps, TEXT,
// composite primary keys (no rowid aliases, no AUTOINCREMENT, no sequences),
// one statement per step (PostgreSQL drivers prepare one statement at a
// time).
//
// Claim state lives on two columns of the item row (fence: the fencing
// high-water mark; released: the released high-water mark; both only grow)
// and in the grant log, one row per grant, keyed by its fence. The grant that
// owns the fence is the row whose fence equals the item's. The grant log
// outlives Forget, so an item re-created under the same number continues
// from its old high-water mark and no token is ever issued twice.
var ledgerMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE ledger_repos (
	id BIGINT NOT NULL PRIMARY KEY,
	full_name TEXT NOT NULL,
	name_key TEXT NOT NULL,
	installation BIGINT NOT NULL,
	default_branch TEXT NOT NULL,
	served BIGINT NOT NULL,
	updated_at BIGINT NOT NULL)`},
	{Version: 2, SQL: `CREATE INDEX ledger_repos_by_name ON ledger_repos (name_key, served)`},
	{Version: 3, SQL: `CREATE TABLE ledger_items (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	title TEXT NOT NULL,
	body TEXT NOT NULL,
	author TEXT NOT NULL,
	provenance TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	fence BIGINT NOT NULL DEFAULT 0,
	released BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (repo_id, number))`},
	{Version: 4, SQL: `CREATE TABLE ledger_tags (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	tag TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, tag))`},
	{Version: 5, SQL: `CREATE TABLE ledger_links (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	rel TEXT NOT NULL,
	target TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, rel, target))`},
	// Dependents: who links to an item (blockedBy, partOf).
	{Version: 6, SQL: `CREATE INDEX ledger_links_by_target ON ledger_links (repo_id, target, rel)`},
	{Version: 7, SQL: `CREATE TABLE ledger_grants (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	fence BIGINT NOT NULL,
	owner TEXT NOT NULL,
	region TEXT NOT NULL,
	branch TEXT NOT NULL,
	purpose TEXT NOT NULL,
	granted_at BIGINT NOT NULL,
	lease_expires_at BIGINT NOT NULL,
	released_at BIGINT,
	PRIMARY KEY (repo_id, number, fence))`},
	// Evidence of work per grant (CONTRACT.md §9): the latest time its holder
	// showed it is alive (a renew, a push to the claim's branch, later a
	// comment by its login), and what it was. The grant itself is evidence
	// too (its granted_at), so a grant with no row here has that.
	{Version: 8, SQL: `CREATE TABLE ledger_evidence (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	fence BIGINT NOT NULL,
	last_at BIGINT NOT NULL,
	kind TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, fence))`},
	// Pushes find the claims of their branch.
	{Version: 9, SQL: `CREATE INDEX ledger_grants_by_branch ON ledger_grants (repo_id, branch)`},
	// A claim's readiness check reads the items in flight (claimed, not
	// released) without scanning the repository.
	{Version: 10, SQL: `CREATE INDEX ledger_items_in_flight ON ledger_items (repo_id, number) WHERE fence > released`},
	// Dependents by target, covering (the number too): without it SQLite's
	// planner prefers scanning the repository's links through the covering
	// primary key over searching the narrower index and reading the rows.
	{Version: 11, SQL: `CREATE INDEX ledger_links_by_target_covering ON ledger_links (repo_id, target, rel, number)`},
	{Version: 12, SQL: `DROP INDEX ledger_links_by_target`},
	// Pushes to the branch recorded for any grant of an item, superseded
	// ones included: a push by a prior owner after a takeover is a
	// collision (CONTRACT.md §6). One row per (item, branch, time, pusher).
	{Version: 13, SQL: `CREATE TABLE ledger_pushes (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	branch TEXT NOT NULL,
	at BIGINT NOT NULL,
	login TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, branch, at, login))`},
}
