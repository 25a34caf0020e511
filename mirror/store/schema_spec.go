package store

import "github.com/wardenhq/warden/internal/db"

// specMigrations is the schema of the gate after admission (component
// "spec", after the admissions and issue_state tables it extends; spec.go):
// an agent that rewrites an admitted item's specification (the issue's
// title and body) gates it again.
//
//   - admissions.spec_digest, spec_at: the digest (gating.SpecDigest) of the
//     text the human admitted and GitHub's time by which it was the issue's
//     text (the admitting payload's issue updated_at); after a human's edit,
//     the text that edit made. Empty for an admission recorded before digests
//     were: trusted on first use.
//   - issue_state.spec_digest, spec_at: the digest of the text as
//     the newest payload or read that carried it showed it, and that
//     payload's updated_at (a read's stamp). They have an ordering guard of
//     their own, since a label warden noted moves updated_at, not the text.
//   - spec_edits: the edits of an issue's title or body that `issues.edited`
//     deliveries showed (GitHub's time, the editor and how warden judged
//     them, the digests after and before the edit, the delivery), the newest
//     few per issue (SpecEditsKept).
//
// Every statement runs unchanged on SQLite and PostgreSQL, one per step.
var specMigrations = []db.Migration{
	{Version: 1, SQL: `ALTER TABLE admissions ADD COLUMN spec_digest TEXT NOT NULL DEFAULT ''`},
	{Version: 2, SQL: `ALTER TABLE admissions ADD COLUMN spec_at BIGINT NOT NULL DEFAULT 0`},
	{Version: 3, SQL: `ALTER TABLE issue_state ADD COLUMN spec_digest TEXT NOT NULL DEFAULT ''`},
	{Version: 4, SQL: `ALTER TABLE issue_state ADD COLUMN spec_at BIGINT NOT NULL DEFAULT 0`},
	{Version: 5, SQL: `CREATE TABLE spec_edits (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	delivery_id TEXT NOT NULL,
	at BIGINT NOT NULL,
	editor TEXT NOT NULL,
	standing TEXT NOT NULL,
	why TEXT NOT NULL,
	digest TEXT NOT NULL,
	prior TEXT NOT NULL,
	PRIMARY KEY (repo_id, number, delivery_id))`},
}
