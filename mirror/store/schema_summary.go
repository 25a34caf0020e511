package store

import (
	"fmt"
	"strings"

	"github.com/wardenhq/warden/internal/db"
)

// trailSummaryMigrations is the schema of the claim path's per-item summary
// of its history (component "trail_summary", after every table it
// watches; summary.go), one row per item in ledger_summaries:
//
//   - gen counts every change to what the summary is computed from:
//     triggers on the comment trail, the grant log (all but the lease), the
//     pushes, the epochs and the item rows (created, forgotten) bump it,
//     whoever writes (this version, an older replica, an operator's SQL);
//   - state is the item's gating.TrailSummary as JSON, computed at
//     generation summary_gen (-1: none), under the rules' version, for the
//     item's fence. It is read only while summary_gen is gen, version the
//     rules' and fence the item's.
//
// The writers that can extend a summary exactly write it after their own
// changes, at the generation those left; on PostgreSQL they first take the
// row's lock, which every trigger also takes, so no change comes between
// their read and their write. Generation and summary share a row so that a
// claim's commit writes one page for both.
var trailSummaryMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE ledger_summaries (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	gen BIGINT NOT NULL,
	summary_gen BIGINT NOT NULL DEFAULT -1,
	version BIGINT NOT NULL DEFAULT 0,
	fence BIGINT NOT NULL DEFAULT 0,
	state TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (repo_id, number))`},
	{Version: 2, SQL: summaryTriggersSQLite, Postgres: summaryTriggersPostgres},
}

// summaryBumpSQLite bumps the generation of the item a trigger's row (NEW
// or OLD) belongs to.
const summaryBumpSQLite = `INSERT INTO ledger_summaries (repo_id, number, gen) VALUES (%[1]s.repo_id, %[1]s.number, 1)
		ON CONFLICT (repo_id, number) DO UPDATE SET gen = gen + 1;`

// The watched writes: every column of the grant log but the lease, which
// the summary does not read (a renew bumps nothing).
var summaryTriggersSQLite = func() string {
	var b strings.Builder
	watch := []struct{ name, event, table string }{
		{"trail_ins", "INSERT", "trail_comments"}, {"trail_upd", "UPDATE", "trail_comments"}, {"trail_del", "DELETE", "trail_comments"},
		{"grants_ins", "INSERT", "ledger_grants"},
		{"grants_upd", "UPDATE OF repo_id, number, fence, owner, region, branch, purpose, granted_at, released_at", "ledger_grants"},
		{"grants_del", "DELETE", "ledger_grants"},
		{"pushes_ins", "INSERT", "ledger_pushes"}, {"pushes_upd", "UPDATE", "ledger_pushes"}, {"pushes_del", "DELETE", "ledger_pushes"},
		{"epochs_ins", "INSERT", "item_epochs"}, {"epochs_upd", "UPDATE", "item_epochs"}, {"epochs_del", "DELETE", "item_epochs"},
		{"items_ins", "INSERT", "ledger_items"}, {"items_del", "DELETE", "ledger_items"},
		{"items_upd", "UPDATE OF repo_id, number", "ledger_items"},
	}
	for _, w := range watch {
		fmt.Fprintf(&b, "CREATE TRIGGER ledger_summary_%s AFTER %s ON %s BEGIN\n", w.name, w.event, w.table)
		if !strings.HasPrefix(w.event, "INSERT") {
			fmt.Fprintf(&b, "\t"+summaryBumpSQLite+"\n", "OLD")
		}
		if !strings.HasPrefix(w.event, "DELETE") {
			fmt.Fprintf(&b, "\t"+summaryBumpSQLite+"\n", "NEW")
		}
		b.WriteString("END;\n")
	}
	return b.String()
}()

// summaryTriggersPostgres is the same on PostgreSQL: one trigger function
// (resolving the tables in the schema it was created in) and a trigger per
// watched table.
const summaryTriggersPostgres = `CREATE FUNCTION ledger_summary_bump() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		INSERT INTO ledger_summaries (repo_id, number, gen) VALUES (OLD.repo_id, OLD.number, 1)
			ON CONFLICT (repo_id, number) DO UPDATE SET gen = ledger_summaries.gen + 1;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		INSERT INTO ledger_summaries (repo_id, number, gen) VALUES (NEW.repo_id, NEW.number, 1)
			ON CONFLICT (repo_id, number) DO UPDATE SET gen = ledger_summaries.gen + 1;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER ledger_summary_trail AFTER INSERT OR UPDATE OR DELETE ON trail_comments FOR EACH ROW EXECUTE FUNCTION ledger_summary_bump();
CREATE TRIGGER ledger_summary_grants AFTER INSERT OR DELETE OR UPDATE OF repo_id, number, fence, owner, region, branch, purpose, granted_at, released_at
	ON ledger_grants FOR EACH ROW EXECUTE FUNCTION ledger_summary_bump();
CREATE TRIGGER ledger_summary_pushes AFTER INSERT OR UPDATE OR DELETE ON ledger_pushes FOR EACH ROW EXECUTE FUNCTION ledger_summary_bump();
CREATE TRIGGER ledger_summary_epochs AFTER INSERT OR UPDATE OR DELETE ON item_epochs FOR EACH ROW EXECUTE FUNCTION ledger_summary_bump();
CREATE TRIGGER ledger_summary_items AFTER INSERT OR DELETE OR UPDATE OF repo_id, number ON ledger_items FOR EACH ROW EXECUTE FUNCTION ledger_summary_bump()`
