package mirror

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror/store"
)

// env is a real store on a fresh SQLite database with one served
// repository, for the handlers' tests.
type env struct {
	t     *testing.T
	ctx   context.Context
	l     *store.Ledger
	acts  *store.Acts
	clock *clock.Manual
	repo  int64
}

const testRegion = "local"

var pm = store.Actor{Role: gating.RolePM, Name: "pm"}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "warden.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	clock := clock.New(time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC))
	st, err := store.Open(ctx, d, store.Config{Region: testRegion, LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute,
		Quarantine: time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, l: st.Ledger, acts: st.Acts, clock: clock, repo: 42}
	if err := e.l.PutRepo(ctx, store.Repo{ID: e.repo, FullName: "Acme/Widgets", Installation: 7, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// openLedger opens the store over d and returns its ledger.
func openLedger(ctx context.Context, d *db.DB, cfg store.Config) (*store.Ledger, error) {
	s, err := store.Open(ctx, d, cfg)
	if err != nil {
		return nil, err
	}
	return s.Ledger, nil
}

// tags are the five mandatory tags.
func tags() []string {
	return []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:" + testRegion, "baseBranch:feat/epic"}
}

// create makes item n and admits it (a recorded human admission, labels
// without the admission label).
func (e *env) create(n int, tg []string) store.Item {
	e.t.Helper()
	it, err := e.l.Create(e.ctx, e.repo, store.NewItem{Number: n, Title: fmt.Sprintf("item %d", n), Body: "Spec: #" + fmt.Sprint(n),
		Author: "backlog-pm", Provenance: "test", Tags: tg}, pm, store.WriteOptions{})
	if err != nil {
		e.t.Fatalf("create issue-%d: %v", n, err)
	}
	if err := e.acts.RecordAdmission(e.ctx, e.repo, n, store.Admission{By: "alice", At: e.clock.Now(), How: "test"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.l.RecordIssueState(e.ctx, e.repo, n, store.IssueState{State: store.IssueOpen, Labels: []string{"backlog"}, UpdatedAt: e.clock.Now()}); err != nil {
		e.t.Fatal(err)
	}
	return it
}

func (e *env) claim(n int, owner string, lease float64) store.ClaimResult {
	e.t.Helper()
	r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(n), store.ClaimRequest{Owner: owner, LeaseSeconds: &lease}, pm)
	if err != nil || !r.Granted {
		e.t.Fatalf("claim issue-%d for %s: %+v, %v", n, owner, r, err)
	}
	return r
}

// testStore opens the store over d (migrating it).
func testStore(t testing.TB, d *db.DB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), d, store.Config{Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
