package store

import (
	"context"
	"fmt"

	"github.com/wardenhq/warden/internal/db"
)

// schema is every table warden keeps, in the order Migrate applies them.
// Each component's steps are numbered from 1 and recorded under its name in
// schema_migrations, so a database an older warden migrated component by
// component continues where it stopped, and a new step goes at the end of
// its component's list. The lists follow, in this order, each with what
// its tables hold.
var schema = []struct {
	component string
	steps     []db.Migration
}{
	{"ledger", ledgerMigrations},
	{"acts", actsMigrations},
	{"issue_state", issueStateMigrations},
	{"pulls", pullMigrations},
	{"divergences", divergenceMigrations},
	{"reconcile", reconcileMigrations},
	{"trail", trailMigrations},
	{"anchors", anchorMigrations},
	{"commands", commandMigrations},
	{"backfills", backfillMigrations},
	{"dashboards", dashboardMigrations},
	{"reports", reportMigrations},
	{"settings", settingsMigrations},
	{"disowned", disownedMigrations},
	{"trail_summary", trailSummaryMigrations},
	{"spec", specMigrations},
	{"claim_records", claimRecordMigrations},
	{"transitions", transitionMigrations},
	{"dispatches", dispatchMigrations},
}

// Migrate applies every step of the schema that has not run on d yet. It is
// safe at every start and from several replicas at once (db.Migrate).
func Migrate(ctx context.Context, d *db.DB) error {
	for _, c := range schema {
		if err := d.Migrate(ctx, c.component, c.steps); err != nil {
			return fmt.Errorf("migrate the store: %w", err)
		}
	}
	return nil
}

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
	// What the evidence of work was, in words, for the report's evidence
	// line ("a push by … to …").
	{Version: 14, SQL: `ALTER TABLE ledger_evidence ADD COLUMN detail TEXT NOT NULL DEFAULT ''`},
	// A logged push that force-pushed or deleted its branch ("forced",
	// "deleted"; "" for one that added commits): prior-branch-rewritten.
	{Version: 15, SQL: `ALTER TABLE ledger_pushes ADD COLUMN rewrite TEXT NOT NULL DEFAULT ''`},
	// A login's pushes (RecordActivity: which claims it acts for).
	{Version: 16, SQL: `CREATE INDEX ledger_pushes_by_login ON ledger_pushes (repo_id, login)`},
}

var actsMigrations = []db.Migration{{Version: 1, SQL: `
CREATE TABLE admissions (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	admitted_by TEXT NOT NULL,
	admitted_at BIGINT NOT NULL,
	how TEXT NOT NULL,
	PRIMARY KEY (repo_id, number)
)`}, actsMigrationV2}

// The acts warden remembers per item beyond admissions (CONTRACT.md §5–§7):
//
//   - item_epochs: the last human unpark, which starts a new attempt epoch,
//     and the last /backlog resolve, which clears takeover collisions whose
//     evidence is at or before it. Both only move forward.
//   - item_parks: the parking ladder's progress for warden's own park (the
//     fence of its maintenance claim, the attempts it parked at, the route,
//     the question, the park comment once posted), so that a park
//     interrupted half-way is finished rather than started again.
//   - label_findings: findings that come from label acts rather than from
//     the ledger (agent-removed-admission, agent-removed-park,
//     park-label-without-tag, item-label-removed, park-without-question):
//     each open until what resolves it happens, with the actor and a count
//     of repeats keyed by the GitHub event that caused each one (so the
//     same event seen twice counts once).
//   - repo_agents: logins recorded as agents from the trail
//     (undeclared-agent) and logins seen acting as both (shared-identity).
var actsMigrationV2 = db.Migration{Version: 2, SQL: `
CREATE TABLE item_epochs (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	epoch_start BIGINT NOT NULL,
	epoch_by TEXT NOT NULL,
	resolved_at BIGINT NOT NULL,
	resolved_by TEXT NOT NULL,
	PRIMARY KEY (repo_id, number)
);
CREATE TABLE item_parks (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	fence BIGINT NOT NULL,
	attempts BIGINT NOT NULL,
	ruling_owner TEXT NOT NULL,
	ruling_topic TEXT NOT NULL,
	question TEXT NOT NULL,
	stage TEXT NOT NULL,
	comment_id BIGINT NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number)
);
CREATE TABLE label_findings (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	code TEXT NOT NULL,
	actor TEXT NOT NULL,
	detail TEXT NOT NULL,
	count BIGINT NOT NULL,
	open BIGINT NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, code)
);
CREATE TABLE label_finding_events (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	code TEXT NOT NULL,
	event_key TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, code, event_key)
);
CREATE TABLE repo_agents (
	repo_id BIGINT NOT NULL,
	login TEXT NOT NULL,
	kind TEXT NOT NULL,
	detail TEXT NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, login, kind)
)`}

// Issue state: each issue's current labels and open/closed state as the
// latest `issues` delivery (or the API's own answer) reported them, so that
// the ready set knows whether the admission label is on an item's issue
// without asking GitHub.
//
// GitHub does not keep delivery order, and every `issues` payload carries
// the issue's full current label set and its updated_at. A payload is applied
// only when its updated_at is not older than the one stored: an older
// payload never overwrites a newer one. (GitHub's updated_at has one-second
// resolution; two payloads of the same second are applied in the order they
// are processed. The admission decision itself also needs a recorded human
// act, so a stale label set within one second never admits anything.)
var issueStateMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE issue_state (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	state TEXT NOT NULL,
	labels TEXT NOT NULL,
	updated_at BIGINT NOT NULL,
	recorded_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number))`},
}

// The pull requests warden knows (CONTRACT.md §8): each PR's state, head and
// base, body (for linking) and when GitHub last changed it, recorded from
// pull_request deliveries and the reconcile's reads. An older view never
// overwrites a newer one (updated_at), so deliveries may come in any order.
// check_runs holds warden's one `backlog` check run per head commit: its id
// and what was last written, so it is created once and edited only when
// the verdict changes.
var pullMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE pull_requests (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	state TEXT NOT NULL,
	merged BIGINT NOT NULL,
	draft BIGINT NOT NULL,
	title TEXT NOT NULL,
	body TEXT NOT NULL,
	head_ref TEXT NOT NULL,
	head_sha TEXT NOT NULL,
	head_repo TEXT NOT NULL,
	base_ref TEXT NOT NULL,
	merged_at BIGINT NOT NULL,
	mergeable BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number))`},
	{Version: 2, SQL: `CREATE INDEX pull_requests_by_head ON pull_requests (repo_id, head_sha)`},
	{Version: 3, SQL: `CREATE TABLE check_runs (
	repo_id BIGINT NOT NULL,
	head_sha TEXT NOT NULL,
	check_run_id BIGINT NOT NULL,
	conclusion TEXT NOT NULL,
	written_hash TEXT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, head_sha))`},
	// green: every check but backlog passed and mergeable (1), not (2),
	// unknown (0), as the reconcile last read it for the head green_sha.
	{Version: 4, SQL: `ALTER TABLE pull_requests ADD COLUMN green BIGINT NOT NULL DEFAULT 0`},
	{Version: 5, SQL: `ALTER TABLE pull_requests ADD COLUMN green_sha TEXT NOT NULL DEFAULT ''`},
	// The login that opened the PR: a holder's PR is evidence of its work.
	{Version: 6, SQL: `ALTER TABLE pull_requests ADD COLUMN author TEXT NOT NULL DEFAULT ''`},
	{Version: 7, SQL: `CREATE INDEX pull_requests_by_author ON pull_requests (repo_id, author)`},
}

// The reconcile's divergences between the ledger and GitHub (CONTRACT.md
// §8, §9; the PM's reconcile table): item_divergences holds each item's,
// repo_divergences the repository's (a pull request linking no item). Both
// are recomputed whole from what warden recorded (cheap: no GitHub call),
// after a pass read GitHub and whenever a pull request closes; the snapshot
// reports the items' ones with the ready set's defects, the report comment
// lists them, and they leave when resolved.
var divergenceMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE item_divergences (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	code TEXT NOT NULL,
	detail TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, code, detail))`},
	{Version: 2, SQL: `CREATE TABLE repo_divergences (
	repo_id BIGINT NOT NULL,
	code TEXT NOT NULL,
	detail TEXT NOT NULL,
	PRIMARY KEY (repo_id, code, detail))`},
}

// reconcile_state: per repository, where the last pass got to. since is
// the start of the last complete pass (issues changed since then are read
// again, with a margin); a pass that ran out of budget records the phase
// and page it stopped at and the since it was using, and the next pass
// resumes there.
var reconcileMigrations = []db.Migration{{Version: 1, SQL: `CREATE TABLE reconcile_state (
	repo_id BIGINT NOT NULL PRIMARY KEY,
	since BIGINT NOT NULL,
	resume_phase TEXT NOT NULL,
	resume_page BIGINT NOT NULL,
	resume_since BIGINT NOT NULL,
	last_started BIGINT NOT NULL,
	last_finished BIGINT NOT NULL,
	last_result TEXT NOT NULL)`}}

// The comment trail (CONTRACT.md §6): every comment on an item's issue, as
// warden first knew it. GitHub does not keep delivery order and a comment
// can be edited or deleted, so each row keeps
//
//   - the earliest known text (earliest_body) with the time it is known to
//     have been current by (earliest_at: the comment's created_at for the
//     text of an unedited created delivery; the updated_at of a delivery
//     that already showed an edit; just before an edit's updated_at for the
//     prior body an `edited` delivery carries in changes.body.from). A text
//     known to be older replaces it, never a newer one: the earliest text
//     only moves back in time, whatever the order of receipt;
//   - the current text (current_body) as of current_at (the payload's
//     updated_at; an older payload never overwrites a newer one);
//   - whether it was edited or deleted (flags only ever set);
//   - who wrote it and how far warden trusted that author when it recorded
//     it: an agent (a Bot account or a configured agent), warden itself (the
//     App's bot), or a login with write access (looked up only for a
//     non-agent author of a backlog-worker marker; a failed lookup is no
//     write access: fail closed). The flags are only ever set.
//
// Only the earliest text is parsed as a marker (gating.EvaluateTrail).
var trailMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE trail_comments (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	comment_id BIGINT NOT NULL,
	author TEXT NOT NULL,
	author_type TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	earliest_body TEXT NOT NULL,
	earliest_at BIGINT NOT NULL,
	current_body TEXT NOT NULL,
	current_at BIGINT NOT NULL,
	edited BIGINT NOT NULL,
	deleted BIGINT NOT NULL,
	is_agent BIGINT NOT NULL,
	is_warden BIGINT NOT NULL,
	has_write BIGINT NOT NULL,
	recorded_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, comment_id))`},
	// A login's comments (RecordActivity: the claim markers it posted).
	{Version: 2, SQL: `CREATE INDEX trail_comments_by_author ON trail_comments (repo_id, author)`},
}

// Code anchors from push deliveries (CONTRACT.md §3, §9; PROTOCOL.md "Why
// anchoredTo matters"). anchor_state holds, per item and anchoredTo path,
// the blob SHA warden recorded on the item's baseBranch (validated_commit is
// the ref it was read at: a commit SHA when it came from a push, the branch
// name when it came from a link write) and whether a later push moved it
// (stale, with the commit and how) or left nothing at the path (dangling).
// A push marks anchors from its commits' file lists, at no API cost; only a
// truncated or forced push costs a compare, and a path that may be gone one
// contents read at the pushed head. anchor_blobs caches those reads per
// commit and path ("" blob: nothing there), so the same commit and path are
// never read twice. Rewriting the link (PATCH addLinks, after removeLinks or
// not) re-reads the anchor and clears the state.
var anchorMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE anchor_state (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	path TEXT NOT NULL,
	base_branch TEXT NOT NULL,
	blob_sha TEXT NOT NULL,
	validated_commit TEXT NOT NULL,
	validated_at BIGINT NOT NULL,
	stale BIGINT NOT NULL,
	stale_reason TEXT NOT NULL,
	dangling BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, path))`},
	{Version: 2, SQL: `CREATE TABLE anchor_blobs (
	repo_id BIGINT NOT NULL,
	commit_sha TEXT NOT NULL,
	path TEXT NOT NULL,
	blob_sha TEXT NOT NULL,
	PRIMARY KEY (repo_id, commit_sha, path))`},
}

// command_log: every comment warden answered as a command (each comment
// once), with who ran it on which item and when (its created_at: the rate
// limit is GitHub's time, not the order of receipt), and the answer.
var commandMigrations = []db.Migration{{Version: 1, SQL: `CREATE TABLE command_log (
	repo_id BIGINT NOT NULL,
	comment_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	login TEXT NOT NULL,
	verb TEXT NOT NULL,
	at BIGINT NOT NULL,
	result TEXT NOT NULL,
	PRIMARY KEY (repo_id, comment_id))`}}

// item_backfills: the items whose history warden has read from GitHub once
// (comments and label events), so it is read once.
var backfillMigrations = []db.Migration{{Version: 1, SQL: `CREATE TABLE item_backfills (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	at BIGINT NOT NULL,
	comments BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number))`}}

// dashboardMigrations is the dashboards' schema (portable SQL, as the
// ledger's): one row per repository that has, or is getting, a dashboard
// issue: its number (0: none known), the hash of the body last written, and
// the write lease.
var dashboardMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE dashboards (
	repo_id BIGINT NOT NULL PRIMARY KEY,
	issue_number BIGINT NOT NULL DEFAULT 0,
	body_hash TEXT NOT NULL DEFAULT '',
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until BIGINT NOT NULL DEFAULT 0,
	updated_at BIGINT NOT NULL)`},
}

// reportMigrations is the report comments' schema (portable SQL, as the
// ledger's). One row per item that has, or had, something to report: the
// desired state (findings, refusals, the body rendered from them), what was
// last written to GitHub (comment id, body hash, time), whether an edit is
// pending and when it is due, and the write lease.
var reportMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE report_comments (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	full_name TEXT NOT NULL,
	installation BIGINT NOT NULL,
	default_branch TEXT NOT NULL,
	comment_id BIGINT NOT NULL DEFAULT 0,
	body TEXT NOT NULL DEFAULT '',
	written_hash TEXT NOT NULL DEFAULT '',
	written_at BIGINT NOT NULL DEFAULT 0,
	findings_json TEXT NOT NULL DEFAULT '[]',
	refusals_json TEXT NOT NULL DEFAULT '[]',
	pending BIGINT NOT NULL DEFAULT 0,
	due_at BIGINT NOT NULL DEFAULT 0,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until BIGINT NOT NULL DEFAULT 0,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number))`},
	{Version: 2, SQL: `CREATE INDEX report_comments_due ON report_comments (pending, due_at)`},
}

// settingsMigrations is the settings store's schema (component "settings"),
// portable to SQLite and PostgreSQL. One row per served repository:
//
//   - settings_json: the settings in effect; problems_json: the findings
//     shown for them (settings-invalid, settings-changed-by-agent);
//   - source_sha, pushed_at (unix seconds, GitHub's clock), changed_by: the
//     push whose file is in effect ("" and 0 when it was read by Load, or
//     for the defaults);
//   - pending_json: the latest push not made by a human that touched the
//     file after that one, with the file it brought ("" for none): it is
//     what the default branch holds and what the findings judge, and it
//     orders later deliveries;
//   - version: bumped on every write, so that writers on several replicas
//     never overwrite each other's result (optimistic concurrency).
var settingsMigrations = []db.Migration{{Version: 1, SQL: `CREATE TABLE repo_settings (
	repo_id BIGINT NOT NULL PRIMARY KEY,
	settings_json TEXT NOT NULL,
	problems_json TEXT NOT NULL,
	source_sha TEXT NOT NULL,
	pushed_at BIGINT NOT NULL,
	changed_by TEXT NOT NULL,
	pending_json TEXT NOT NULL,
	version BIGINT NOT NULL,
	updated_at BIGINT NOT NULL)`}}

// disownedMigrations is the schema of the /backlog undelivered rulings
// (component "disowned"), portable as the ledger's: pr_disowned holds one
// row per item and merged pull request a human ruled did not deliver it
// (disowned_by, disowned_at: the ruling's author and the comment's time),
// so that pull request makes no merged-not-complete for the item. The first
// ruling is kept; a ruling is never removed.
var disownedMigrations = []db.Migration{{Version: 1, SQL: `CREATE TABLE pr_disowned (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	pr BIGINT NOT NULL,
	disowned_by TEXT NOT NULL,
	disowned_at BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, pr))`}}
