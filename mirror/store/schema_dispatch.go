package store

import "github.com/wardenhq/warden/internal/db"

// dispatchMigrations is the schema of dispatch by assignment (component
// "dispatches"; dispatch.go): one row per issues.assigned delivery that
// assigned an agent to an item, keyed by the delivery id (a redelivery
// finds its row and does nothing twice).
//
//   - login is the assignee as GitHub named it, owner the claim's owner
//     (gating.DispatchOwner), assigned_at when warden handled it (unix ms).
//   - outcome is granted (a claim with fence was taken and is live while
//     ended_at is 0), refused (reason is the exclusion code or the ledger's
//     reason, detail the agent-dispatch-refused line), or, once a granted
//     dispatch ended, what ended it (released, complete; ended_at then).
//   - The latest row of an item (by assigned_at, then delivery) that is
//     refused is listed as agent-dispatch-refused in the item's report.
//
// Every statement runs unchanged on SQLite and PostgreSQL, one per step.
var dispatchMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE dispatches (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	delivery TEXT NOT NULL,
	login TEXT NOT NULL,
	owner TEXT NOT NULL,
	fence BIGINT NOT NULL,
	assigned_at BIGINT NOT NULL,
	outcome TEXT NOT NULL,
	reason TEXT NOT NULL,
	detail TEXT NOT NULL,
	ended_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, delivery))`},
	// forced_by: the login of the human whose /backlog dispatch forced a
	// granted dispatch (a maintenance claim taken for the agent); '' for
	// an assignment. Its delivery is "command:<comment id>".
	{Version: 2, SQL: `ALTER TABLE dispatches ADD COLUMN forced_by TEXT NOT NULL DEFAULT ''`},
}
