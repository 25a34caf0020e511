package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wardenhq/warden/internal/db"
)

// TestSchemaAppliedOnce: Open migrates every component of the one schema
// list once (acts included, which two openers used to migrate), opening
// again applies nothing more, and the components are the list's, in order.
func TestSchemaAppliedOnce(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "warden.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	seen := map[string]bool{}
	steps := 0
	for _, c := range schema {
		if seen[c.component] {
			t.Fatalf("component %q is listed twice", c.component)
		}
		seen[c.component] = true
		steps += len(c.steps)
	}
	for i := 0; i < 2; i++ {
		if _, err := Open(ctx, d, Config{Region: "local"}); err != nil {
			t.Fatalf("open %d: %v", i+1, err)
		}
	}
	rows, err := d.Read.QueryContext(ctx, `SELECT component, COUNT(*) FROM schema_migrations GROUP BY component`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got, total := map[string]int{}, 0
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			t.Fatal(err)
		}
		got[c], total = n, total+n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range schema {
		if got[c.component] != len(c.steps) {
			t.Errorf("component %s: %d steps recorded, want %d", c.component, got[c.component], len(c.steps))
		}
	}
	if total != steps || len(got) != len(schema) {
		t.Errorf("%d steps of %d components recorded, want %d of %d: %v", total, len(got), steps, len(schema), got)
	}
}

// TestSchemaContinuesAnOlderDatabase: a database an older warden migrated
// component by component, stopping short of the latest steps, is brought
// up to date by Open, keeping its rows.
func TestSchemaContinuesAnOlderDatabase(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "warden.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The older warden: the ledger whole, every other component but its
	// last step (as far as it has more than one).
	for _, c := range schema {
		n := len(c.steps)
		if n > 1 && c.component != "ledger" {
			n--
		}
		if err := d.Migrate(ctx, c.component, c.steps[:n]); err != nil {
			t.Fatalf("older %s: %v", c.component, err)
		}
	}
	older, err := newLedger(d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if err := older.PutRepo(ctx, Repo{ID: 1, FullName: "acme/app", Installation: 7, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	st, err := Open(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Ledger.RepoByID(ctx, 1)
	if err != nil || r.FullName != "acme/app" {
		t.Fatalf("the older database's repository: %+v %v", r, err)
	}
	var n int
	if err := d.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, c := range schema {
		want += len(c.steps)
	}
	if n != want {
		t.Fatalf("%d steps recorded after Open, want all %d", n, want)
	}
}
