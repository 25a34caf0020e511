package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// TestLedgerConformanceSQLite runs the ledger's conformance suite on SQLite.
func TestLedgerConformanceSQLite(t *testing.T) {
	RunConformance(t, openSQLiteLedger)
}

// TestLedgerConformancePostgres runs the same suite on PostgreSQL when
// WARDEN_TEST_POSTGRES holds a URL (each test gets a fresh schema).
func TestLedgerConformancePostgres(t *testing.T) {
	if os.Getenv(dbtest.PostgresEnv) == "" {
		t.Skip("PostgreSQL ledger conformance skipped: set " + dbtest.PostgresEnv + " to a postgres:// URL to run it")
	}
	RunConformance(t, openPostgresLedger)
}

func openPostgresLedger(t *testing.T) *Ledger {
	t.Helper()
	l, err := openLedger(context.Background(), dbtest.Postgres(t), Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func openSQLiteLedger(t *testing.T) *Ledger {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	l, err := openLedger(ctx, d, Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// RunConformance is the ledger's behaviour, for any backend: open returns a
// Ledger over a fresh, empty database. The suite reconfigures it (region
// "local", lease default 30s, ceiling 30m, a controllable clock) over the
// same database, so what open chose for those does not matter.
func RunConformance(t *testing.T, open func(t *testing.T) *Ledger) {
	setup := func(t *testing.T) *env { return newEnv(t, open) }
	t.Run("Repos", func(t *testing.T) { testRepos(t, setup(t)) })
	t.Run("CreateGetList", func(t *testing.T) { testCreateGetList(t, setup(t)) })
	t.Run("Validate", func(t *testing.T) { testValidate(t, setup(t)) })
	t.Run("UpdatePatch", func(t *testing.T) { testUpdatePatch(t, setup(t)) })
	t.Run("Refusals", func(t *testing.T) { testRefusals(t, setup) })
	t.Run("WriteAdmission", func(t *testing.T) { testWriteAdmission(t, setup) })
	t.Run("ClaimFields", func(t *testing.T) { testClaimFields(t, setup(t)) })
	t.Run("ClaimContendedAndLapse", func(t *testing.T) { testClaimContendedAndLapse(t, setup(t)) })
	t.Run("ClaimNotGranted", func(t *testing.T) { testClaimNotGranted(t, setup(t)) })
	t.Run("Clamp", func(t *testing.T) { testClamp(t, setup(t)) })
	t.Run("Renew", func(t *testing.T) { testRenew(t, setup(t)) })
	t.Run("Release", func(t *testing.T) { testRelease(t, setup(t)) })
	t.Run("Status", func(t *testing.T) { testStatus(t, setup(t)) })
	t.Run("MaintenanceByRole", func(t *testing.T) { testMaintenance(t, setup) })
	t.Run("WorkerOwnerPrefix", func(t *testing.T) { testWorkerOwner(t, setup(t)) })
	t.Run("BodyOnlyUnderClaim", func(t *testing.T) { testBodyUnderClaim(t, setup(t)) })
	t.Run("CompletionUnderClaim", func(t *testing.T) { testCompletionUnderClaim(t, setup(t)) })
	t.Run("ForgetAndRecreate", func(t *testing.T) { testForget(t, setup(t)) })
	t.Run("BoundedWait", func(t *testing.T) { testBoundedWait(t, setup) })
	t.Run("Race", func(t *testing.T) { testRace(t, setup(t)) })
	t.Run("ClaimReadiness", func(t *testing.T) { testClaimReadiness(t, setup) })
	t.Run("Quarantine", func(t *testing.T) { testQuarantine(t, setup) })
	t.Run("ActivityEvidence", func(t *testing.T) { testActivityEvidence(t, setup) })
}

// ---- harness ----

type env struct {
	t     *testing.T
	ctx   context.Context
	l     *Ledger
	clock *clock.Manual
	repo  int64
}

var (
	pm     = Actor{Role: gating.RolePM, Name: "pm"}
	human  = Actor{Role: gating.RoleHuman, Name: "alice"}
	warden = Actor{Role: gating.RoleWarden, Name: "warden"}
	worker = Actor{Role: gating.RoleWorker, Name: "w1"}
)

const testRegion = "local"

func testConfig(c *clock.Manual, region string) Config {
	return Config{Region: region, LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute, Quarantine: time.Hour, Now: c.Now}
}

// reconfigure returns a second Ledger over l's database with another
// configuration (and its own wait queues).
func reconfigure(t *testing.T, l *Ledger, cfg Config) *Ledger {
	t.Helper()
	nl, err := newLedger(l.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return nl
}

func newEnv(t *testing.T, open func(t *testing.T) *Ledger) *env {
	t.Helper()
	clock := clock.New(time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC))
	e := &env{t: t, ctx: context.Background(), clock: clock, repo: 42}
	e.l = reconfigure(t, open(t), testConfig(clock, testRegion))
	if err := e.l.PutRepo(e.ctx, Repo{ID: e.repo, FullName: "Acme/Widgets", Installation: 7, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// tags returns the five mandatory tags, with extra added (an extra with a
// single-valued prefix replaces the default one).
func tags(extra ...string) []string {
	base := map[string]string{"priority": "priority:P1", "phase": "phase:implementation",
		"homeRegion": "homeRegion:" + testRegion, "baseBranch": "baseBranch:feat/epic"}
	out := []string{"backlog"}
	for _, x := range extra {
		if p, _, ok := strings.Cut(x, ":"); ok {
			if _, fixed := base[p]; fixed {
				delete(base, p)
			}
		}
	}
	for _, v := range base {
		out = append(out, v)
	}
	return append(out, extra...)
}

func blockedBy(n int) gating.Link {
	return gating.Link{Rel: gating.BlockedBy, Target: string(gating.IDFor(n))}
}
func partOf(n int) gating.Link {
	return gating.Link{Rel: gating.PartOf, Target: string(gating.IDFor(n))}
}
func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }
func str(s string) *string   { return &s }

func (e *env) create(n int, tg []string, links ...gating.Link) Item {
	e.t.Helper()
	it, err := e.l.Create(e.ctx, e.repo, NewItem{Number: n, Title: fmt.Sprintf("item %d", n), Body: "Spec: #" + fmt.Sprint(n),
		Author: "backlog-pm", Provenance: "test", Tags: tg, Links: links}, pm, WriteOptions{})
	if err != nil {
		e.t.Fatalf("create issue-%d: %v", n, err)
	}
	e.admit(n)
	return it
}

// admit makes issue n admitted as the claim rules read it: a recorded human
// admission act, and issue labels without the admission label (without
// either, the ledger fails closed: awaiting-admission).
func (e *env) admit(n int) {
	e.t.Helper()
	if err := (&Acts{db: e.l.db}).RecordAdmission(e.ctx, e.repo, n, Admission{By: "alice", At: e.clock.Now(), How: "test"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.l.RecordIssueState(e.ctx, e.repo, n, IssueState{State: IssueOpen, Labels: []string{"backlog"}, UpdatedAt: e.clock.Now()}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) item(n int) Item {
	e.t.Helper()
	it, err := e.l.Get(e.ctx, e.repo, gating.IDFor(n))
	if err != nil {
		e.t.Fatalf("get issue-%d: %v", n, err)
	}
	return it
}

func (e *env) claim(n int, owner string, lease float64) ClaimResult {
	e.t.Helper()
	r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(n), ClaimRequest{Owner: owner, LeaseSeconds: f64(lease)}, pm)
	if err != nil || !r.Granted {
		e.t.Fatalf("claim issue-%d for %s: %+v, %v", n, owner, r, err)
	}
	return r
}

func (e *env) release(n int, token int64) {
	e.t.Helper()
	r, err := e.l.Release(e.ctx, e.repo, gating.IDFor(n), token, pm)
	if err != nil || !r.Released {
		e.t.Fatalf("release issue-%d token %d: %+v, %v", n, token, r, err)
	}
}

func (e *env) status(n int) ClaimStatus {
	e.t.Helper()
	s, err := e.l.Status(e.ctx, e.repo, gating.IDFor(n))
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// dump is the whole ledger state of the test repository: every item, its
// grant log and its claim status.
func (e *env) dump() string {
	e.t.Helper()
	var b strings.Builder
	after := 0
	for {
		page, err := e.l.List(e.ctx, e.repo, after, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, it := range page {
			g, err := e.l.Grants(e.ctx, e.repo, it.ID)
			if err != nil {
				e.t.Fatal(err)
			}
			grant := it.Grant
			it.Grant = nil
			fmt.Fprintf(&b, "%+v\n%+v %+v\n%s\n", it, grant, g, fmtStatus(e.status(it.ID.Number())))
			after = it.ID.Number()
		}
	}
	return b.String()
}

func fmtStatus(s ClaimStatus) string {
	d := func(p any) string {
		v := reflect.ValueOf(p)
		if v.IsNil() {
			return "null"
		}
		return fmt.Sprint(v.Elem().Interface())
	}
	return fmt.Sprintf("exists=%v claimed=%v held=%v state=%q fence=%s released=%s owner=%s region=%s lease=%s",
		s.Exists, s.Claimed, s.IsHeld, s.State, d(s.FencingToken), d(s.ReleasedFencingToken), d(s.Owner), d(s.Region), d(s.LeaseExpiresAtUtc))
}

func wantRefusal(t *testing.T, err error, reason string) {
	t.Helper()
	var r *gating.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("got %v (%T), want a refusal %q", err, err, reason)
	}
	if r.Reason != reason {
		t.Fatalf("refusal %q (%s), want %q", r.Reason, r.Detail, reason)
	}
	if r.Detail == "" {
		t.Fatalf("refusal %q names nothing", reason)
	}
}

func wantVerdict(t *testing.T, err error, v gating.Verdict) {
	t.Helper()
	var fe *FenceError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v (%T), want a FenceError %s", err, err, v)
	}
	if fe.Verdict != v {
		t.Fatalf("verdict %s (%v), want %s", fe.Verdict, fe, v)
	}
	if !strings.Contains(fe.Error(), string(v)) {
		t.Fatalf("FenceError %q does not name %s", fe.Error(), v)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// wantResult compares a claim result field by field (nil = JSON null).
func wantResult(t *testing.T, got ClaimResult, want map[string]any) {
	t.Helper()
	have := map[string]any{
		"key": got.Key, "granted": got.Granted, "fencingToken": deref(got.FencingToken), "owner": deref(got.Owner),
		"region": deref(got.Region), "leaseExpiresAtUtc": deref(got.LeaseExpiresAtUtc), "leaseSeconds": deref(got.LeaseSeconds),
		"previousLeaseExpiresAtUtc": deref(got.PreviousLeaseExpiresAtUtc), "leaseShortened": deref(got.LeaseShortened),
		"reason": deref(got.Reason),
	}
	for k, w := range want {
		if !reflect.DeepEqual(have[k], w) {
			t.Errorf("%s = %#v, want %#v", k, have[k], w)
		}
	}
	for k, h := range have {
		if _, ok := want[k]; !ok && k != "key" && k != "granted" && h != nil {
			t.Errorf("%s = %#v, want null", k, h)
		}
	}
}

// ---- repositories ----

func testRepos(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	r, err := l.Repo(ctx, "acme/WIDGETS")
	if err != nil || r.ID != e.repo || r.FullName != "Acme/Widgets" || r.DefaultBranch != "main" || r.Installation != 7 {
		t.Fatalf("Repo(case-insensitive) = %+v, %v", r, err)
	}
	if r, err := l.RepoByID(ctx, e.repo); err != nil || r.FullName != "Acme/Widgets" {
		t.Fatalf("RepoByID = %+v, %v", r, err)
	}
	e.create(1, tags())
	// A rename: upsert by id.
	if err := l.PutRepo(ctx, Repo{ID: e.repo, FullName: "acme/gadgets", Installation: 7, DefaultBranch: "trunk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Repo(ctx, "acme/widgets"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old name after rename: %v, want ErrNotFound", err)
	}
	if r, err := l.Repo(ctx, "ACME/gadgets"); err != nil || r.ID != e.repo || r.DefaultBranch != "trunk" {
		t.Fatalf("new name: %+v, %v", r, err)
	}
	if err := l.PutRepo(ctx, Repo{ID: 7, FullName: "acme/other", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if rs, err := l.Repos(ctx); err != nil || len(rs) != 2 || rs[0].ID != 7 || rs[1].ID != e.repo {
		t.Fatalf("Repos = %+v, %v", rs, err)
	}
	// Removed: not served, items stay, writes refused.
	if err := l.RemoveRepo(ctx, e.repo); err != nil {
		t.Fatal(err)
	}
	if rs, _ := l.Repos(ctx); len(rs) != 1 || rs[0].ID != 7 {
		t.Fatalf("Repos after remove = %+v", rs)
	}
	if _, err := l.Repo(ctx, "acme/gadgets"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed repo by name: %v", err)
	}
	if _, err := l.RepoByID(ctx, e.repo); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed repo by id: %v", err)
	}
	if it := e.item(1); it.ID != "issue-1" {
		t.Fatalf("item lost with its repository: %+v", it)
	}
	if _, err := l.Create(ctx, e.repo, NewItem{Number: 2, Tags: tags()}, pm, WriteOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("create in a removed repo: %v, want ErrNotFound", err)
	}
	if _, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/x"}, pm); !errors.Is(err, ErrNotFound) {
		t.Fatalf("claim in a removed repo: %v, want ErrNotFound", err)
	}
	if err := l.RemoveRepo(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove unknown repo: %v", err)
	}
	// Served again.
	if err := l.PutRepo(ctx, Repo{ID: e.repo, FullName: "acme/gadgets", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RepoByID(ctx, e.repo); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Repo{{ID: 0, FullName: "a/b"}, {ID: 1, FullName: "nobody"}, {ID: 1, FullName: "a/b/c"}, {ID: 1, FullName: "a /b"}} {
		wantRefusal(t, l.PutRepo(ctx, bad), ReasonInvalidRequest)
	}
}

// ---- items ----

func testCreateGetList(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(10, tags())
	in := NewItem{Number: 11, Title: "t", Body: "Spec: #11", Author: "a", Provenance: "p",
		Tags:  append(tags("zeta", "alpha"), "zeta"),
		Links: []gating.Link{{Rel: gating.Related, Target: "issue-10"}, blockedBy(10), {Rel: gating.AnchoredTo, Target: "src/a.go"}, blockedBy(10)}}
	it, err := l.Create(ctx, e.repo, in, human, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantTags := []string{"alpha", "backlog", "baseBranch:feat/epic", "homeRegion:local", "phase:implementation", "priority:P1", "zeta"}
	wantLinks := []gating.Link{blockedBy(10), {Rel: gating.AnchoredTo, Target: "src/a.go"}, {Rel: gating.Related, Target: "issue-10"}}
	if it.ID != "issue-11" || !it.CreatedAt.Equal(e.clock.Now()) || !reflect.DeepEqual(it.Tags, wantTags) || !reflect.DeepEqual(it.Links, wantLinks) {
		t.Fatalf("created %+v", it)
	}
	got := e.item(11)
	if !reflect.DeepEqual(got, it) {
		t.Fatalf("Get = %+v\nCreate returned %+v", got, it)
	}
	if got.Fence != (gating.Fence{}) || got.Grant != nil || got.RepoID != e.repo {
		t.Fatalf("a new item carries claim state: %+v", got)
	}
	if _, err := l.Create(ctx, e.repo, in, pm, WriteOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if _, err := l.Get(ctx, e.repo, "issue-99"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	if _, err := l.Get(ctx, e.repo+1, "issue-10"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get in another repo: %v", err)
	}
	_, err = l.Get(ctx, e.repo, "issue-010")
	wantRefusal(t, err, ReasonInvalidRequest)
	for n := 1; n <= 25; n++ {
		if n != 10 && n != 11 {
			e.create(n, tags())
		}
	}
	var seen []int
	after := 0
	for {
		page, err := l.List(ctx, e.repo, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 7 {
			t.Fatalf("page of %d", len(page))
		}
		for _, it := range page {
			seen = append(seen, it.ID.Number())
			if len(it.Tags) < 5 {
				t.Fatalf("listed without tags: %+v", it)
			}
		}
		after = page[len(page)-1].ID.Number()
	}
	if len(seen) != 25 || !sort.IntsAreSorted(seen) || seen[0] != 1 || seen[24] != 25 {
		t.Fatalf("listed %v", seen)
	}
	if page, _ := l.List(ctx, e.repo, 10, 1); len(page) != 1 || !reflect.DeepEqual(page[0], it) {
		t.Fatalf("List(10, 1) = %+v, want issue-11 as Get sees it", page)
	}
	for _, lim := range []int{0, -1, 1001} {
		_, err := l.List(ctx, e.repo, 0, lim)
		wantRefusal(t, err, ReasonInvalidRequest)
	}
	if page, err := l.List(ctx, e.repo, 0, 1000); err != nil || len(page) != 25 {
		t.Fatalf("List limit 1000: %d, %v", len(page), err)
	}
}

func testValidate(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	before := e.dump()
	// Before the issue exists (number 0) and with a number.
	for _, n := range []int{0, 2} {
		if err := l.Validate(ctx, e.repo, NewItem{Number: n, Title: "x", Tags: tags(), Links: []gating.Link{blockedBy(1)}}, pm, WriteOptions{}); err != nil {
			t.Fatalf("Validate #%d: %v", n, err)
		}
	}
	if err := l.Validate(ctx, e.repo, NewItem{Number: 1, Tags: tags()}, pm, WriteOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("Validate existing: %v", err)
	}
	wantRefusal(t, l.Validate(ctx, e.repo, NewItem{Tags: tags(), Links: []gating.Link{blockedBy(5)}}, pm, WriteOptions{}), "dangling-blocker")
	wantRefusal(t, l.Validate(ctx, e.repo, NewItem{Tags: tags()}, worker, WriteOptions{}), ReasonRoleNotAllowed)
	wantRefusal(t, l.Validate(ctx, e.repo, NewItem{Tags: tags("priority:P9")}, pm, WriteOptions{}), "invalid-priority")
	if err := l.Validate(ctx, 999, NewItem{Tags: tags()}, pm, WriteOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Validate in an unknown repo: %v", err)
	}
	_, err := l.Create(ctx, e.repo, NewItem{Number: 0, Tags: tags()}, pm, WriteOptions{})
	wantRefusal(t, err, ReasonInvalidRequest)
	if after := e.dump(); after != before {
		t.Fatalf("Validate wrote:\n%s\nwas\n%s", after, before)
	}
	if _, err := l.Get(ctx, e.repo, "issue-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Validate created issue-2: %v", err)
	}
}

func testUpdatePatch(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	e.create(2, tags())
	e.create(3, tags("old", "keep"), blockedBy(1), gating.Link{Rel: gating.Related, Target: "issue-2"})
	e.clock.Advance(time.Minute)
	it, err := l.Update(ctx, e.repo, "issue-3", Patch{
		Title: str("new title"), Provenance: str("moved"),
		AddTags: []string{"new", "keep"}, RemoveTags: []string{"old", "absent"},
		AddLinks:    []gating.Link{blockedBy(2), {Rel: gating.AnchoredTo, Target: "docs/x.md"}},
		RemoveLinks: []gating.Link{{Rel: gating.Related, Target: "issue-2"}},
	}, pm, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := e.item(3)
	if !reflect.DeepEqual(it, want) {
		t.Fatalf("Update returned %+v\nGet says %+v", it, want)
	}
	if it.Title != "new title" || it.Provenance != "moved" || it.Author != "backlog-pm" || it.Body != "Spec: #3" {
		t.Fatalf("scalars: %+v", it)
	}
	if !reflect.DeepEqual(it.Tags, []string{"backlog", "baseBranch:feat/epic", "homeRegion:local", "keep", "new", "phase:implementation", "priority:P1"}) {
		t.Fatalf("tags: %v", it.Tags)
	}
	if !reflect.DeepEqual(it.Links, []gating.Link{blockedBy(1), blockedBy(2), {Rel: gating.AnchoredTo, Target: "docs/x.md"}}) {
		t.Fatalf("links: %v", it.Links)
	}
	if !it.UpdatedAt.Equal(e.clock.Now()) || it.CreatedAt.Equal(it.UpdatedAt) {
		t.Fatalf("times: created %v updated %v", it.CreatedAt, it.UpdatedAt)
	}
	// A tag both removed and added stays (old − remove + add).
	it, err = l.Update(ctx, e.repo, "issue-3", Patch{AddTags: []string{"new"}, RemoveTags: []string{"new"}}, pm, WriteOptions{})
	if err != nil || !it.Snapshot().HasTag("new") {
		t.Fatalf("remove+add: %v %v", it.Tags, err)
	}
	// Warden may do what a pm may: remove a blockedBy edge, change phase:.
	if _, err := l.Update(ctx, e.repo, "issue-3", Patch{RemoveLinks: []gating.Link{blockedBy(2)},
		AddTags: []string{"phase:research"}, RemoveTags: []string{"phase:implementation"}}, warden, WriteOptions{}); err != nil {
		t.Fatalf("warden as pm: %v", err)
	}
	if _, err := l.Update(ctx, e.repo, "issue-99", Patch{Title: str("x")}, pm, WriteOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
}

// ---- refusals: each names its reason and writes nothing ----

func testRefusals(t *testing.T, setup func(*testing.T) *env) {
	parked := tags("state:parked", "ruling-owner:pm", "ruling-topic:scope")
	cases := []struct {
		name   string
		prep   func(e *env)
		do     func(e *env) error
		reason string // a *gating.Refusal's Reason
	}{
		{"create by a worker", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags()}, worker, WriteOptions{})
			return err
		}, ReasonRoleNotAllowed},
		{"create by an unknown role", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags()}, Actor{Role: "admin", Name: "x"}, WriteOptions{})
			return err
		}, ReasonRoleNotAllowed},
		{"create without mandatory tags", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: []string{"backlog", "priority:P1"}}, pm, WriteOptions{})
			return err
		}, "missing-mandatory-tag"},
		{"create with two priorities", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: append(tags(), "priority:P2")}, pm, WriteOptions{})
			return err
		}, "duplicate-attribute-tag"},
		{"create with an unknown state", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags("state:done")}, pm, WriteOptions{})
			return err
		}, "unknown-state"},
		{"create with execution state on phase", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags("phase:review")}, pm, WriteOptions{})
			return err
		}, "phase-carries-state"},
		{"create with a tag holding a space", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags("two words")}, pm, WriteOptions{})
			return err
		}, "invalid-tag"},
		{"create with a tag that is not UTF-8", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags("bad\xff")}, pm, WriteOptions{})
			return err
		}, "invalid-tag"},
		{"create with an unknown relation", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags(), Links: []gating.Link{{Rel: "dependsOn", Target: "issue-1"}}}, pm, WriteOptions{})
			return err
		}, "invalid-link"},
		{"create with a NUL in a claims link", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags(), Links: []gating.Link{{Rel: gating.Claims, Target: "run\x00"}}}, pm, WriteOptions{})
			return err
		}, "invalid-link"},
		{"create with a NUL in the title", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Title: "a\x00b", Tags: tags()}, pm, WriteOptions{})
			return err
		}, ReasonInvalidField},
		{"create blockedBy a missing item", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags(), Links: []gating.Link{blockedBy(77)}}, pm, WriteOptions{})
			return err
		}, "dangling-blocker"},
		{"create blockedBy a parked item", func(e *env) { e.create(1, parked) }, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags(), Links: []gating.Link{blockedBy(1)}}, pm, WriteOptions{})
			return err
		}, "stalled-by-parked"},
		{"create completed without proof", nil, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags("state:complete")}, pm, WriteOptions{})
			return err
		}, "completion-unproven"},
		{"create an epic member on the default branch", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Create(e.ctx, e.repo, NewItem{Number: 5, Tags: tags("baseBranch:main"), Links: []gating.Link{partOf(1)}}, pm, WriteOptions{})
			return err
		}, "epic-child-on-main"},
		{"update closing a cycle", func(e *env) {
			e.create(1, tags())
			e.create(2, tags(), blockedBy(1))
			e.create(3, tags(), blockedBy(2))
		}, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{AddLinks: []gating.Link{blockedBy(3)}}, pm, WriteOptions{})
			return err
		}, "cycle"},
		{"update parking without a route", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{AddTags: []string{"state:parked"}}, pm, WriteOptions{})
			return err
		}, "park-without-route"},
		{"update unparking by a pm", func(e *env) { e.create(1, parked) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{RemoveTags: []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}}, pm, WriteOptions{})
			return err
		}, "HumanActRequired"},
		{"update changing phase as a human", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{AddTags: []string{"phase:research"}, RemoveTags: []string{"phase:implementation"}}, human, WriteOptions{})
			return err
		}, "HumanActRequired"},
		{"update: a worker removing a blockedBy edge", func(e *env) {
			e.create(1, tags())
			e.create(2, tags())
			e.claim(2, "w1/run", 60) // claimable: the edge comes after the claim
			if _, err := e.l.Update(e.ctx, e.repo, "issue-2", Patch{AddLinks: []gating.Link{blockedBy(1)}, FencingToken: i64(1)}, pm, WriteOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-2", Patch{RemoveLinks: []gating.Link{blockedBy(1)}, FencingToken: i64(1)}, worker, WriteOptions{})
			return err
		}, "HumanActRequired"},
		{"update: completion with an open PR", func(e *env) { e.create(1, tags("pr:7")); e.claim(1, "pm/merge", 60) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{AddTags: []string{"state:complete"}, FencingToken: i64(1)}, pm,
				WriteOptions{CompletionReason: "complete-with-open-pr", CompletionDetail: "PR #7 is open"})
			return err
		}, "complete-with-open-pr"},
		{"update: a worker without a claim", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{Title: str("x")}, worker, WriteOptions{})
			return err
		}, ReasonOwnerNotAllowed},
		{"update: a worker under another's claim", func(e *env) { e.create(1, tags()); e.claim(1, "w2/run", 60) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "issue-1", Patch{Title: str("x"), FencingToken: i64(1)}, worker, WriteOptions{})
			return err
		}, ReasonOwnerNotAllowed},
		{"update: a malformed item id", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Update(e.ctx, e.repo, "1", Patch{Title: str("x")}, pm, WriteOptions{})
			return err
		}, ReasonInvalidRequest},
		{"forget with dependents", func(e *env) { e.create(1, tags()); e.create(2, tags(), blockedBy(1)) }, func(e *env) error {
			return e.l.Forget(e.ctx, e.repo, "issue-1", nil, pm)
		}, "has-dependents"},
		{"forget by a worker", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			return e.l.Forget(e.ctx, e.repo, "issue-1", nil, worker)
		}, ReasonRoleNotAllowed},
		{"maintenance claim by a worker", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "w1/x", Purpose: "maintenance"}, worker)
			return err
		}, ReasonRoleNotAllowed},
		{"claim with an unknown purpose", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/x", Purpose: "repair"}, pm)
			return err
		}, ReasonInvalidRequest},
		{"claim with an owner holding a space", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm x"}, pm)
			return err
		}, ReasonInvalidRequest},
		{"claim with an empty owner", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{}, pm)
			return err
		}, ReasonInvalidRequest},
		{"claim with a 201-character owner", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: strings.Repeat("é", 201)}, pm)
			return err
		}, ReasonInvalidRequest},
		{"claim by a worker under another name", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "w10/run"}, worker)
			return err
		}, ReasonOwnerNotAllowed},
		{"claim waiting more than 60 s", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/x", MaxWaitSeconds: f64(61)}, pm)
			return err
		}, ReasonInvalidRequest},
		{"claim with a NaN lease", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/x", LeaseSeconds: f64(math.NaN())}, pm)
			return err
		}, ReasonInvalidRequest},
		{"claim with a negative lease", func(e *env) { e.create(1, tags()) }, func(e *env) error {
			_, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/x", LeaseSeconds: f64(-5)}, pm)
			return err
		}, ReasonInvalidRequest},
		{"renew with an infinite lease", func(e *env) { e.create(1, tags()); e.claim(1, "pm/x", 60) }, func(e *env) error {
			_, err := e.l.Renew(e.ctx, e.repo, "issue-1", 1, f64(math.Inf(1)), pm)
			return err
		}, ReasonInvalidRequest},
		{"renew by a worker of another's claim", func(e *env) { e.create(1, tags()); e.claim(1, "pm/x", 60) }, func(e *env) error {
			_, err := e.l.Renew(e.ctx, e.repo, "issue-1", 1, f64(60), worker)
			return err
		}, ReasonOwnerNotAllowed},
		{"release by a worker of another's claim", func(e *env) { e.create(1, tags()); e.claim(1, "pm/x", 60) }, func(e *env) error {
			_, err := e.l.Release(e.ctx, e.repo, "issue-1", 1, worker)
			return err
		}, ReasonOwnerNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			if c.prep != nil {
				c.prep(e)
			}
			before := e.dump()
			wantRefusal(t, c.do(e), c.reason)
			if after := e.dump(); after != before {
				t.Fatalf("a refusal wrote:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// ---- the write-admission table, verdict by verdict ----

func testWriteAdmission(t *testing.T, setup func(*testing.T) *env) {
	type state int
	const (
		never state = iota
		live
		released   // claim 1 released
		superseded // claim 1 released, claim 2 live
	)
	cases := []struct {
		name    string
		state   state
		token   *int64
		foreign bool // written through a ledger of another region
		want    gating.Verdict
	}{
		{"never claimed, no token", never, nil, false, gating.Accepted},
		{"never claimed, any token", never, i64(9), false, gating.Accepted},
		{"claim live, no token", live, nil, false, gating.ClaimRequired},
		{"claim released, no token", released, nil, false, gating.Accepted},
		{"live, below the high-water mark", superseded, i64(1), false, gating.StaleToken},
		{"released, below the high-water mark", released, i64(0), false, gating.StaleToken},
		{"live, above the high-water mark", live, i64(2), false, gating.UnissuedToken},
		{"released, above the high-water mark", released, i64(5), false, gating.UnissuedToken},
		{"released, at the high-water mark", released, i64(1), false, gating.ClaimReleased},
		{"live, current token, other region", live, i64(1), true, gating.ForeignRegion},
		{"live, current token, same region", live, i64(1), false, gating.Accepted},
	}
	for _, c := range cases {
		for _, op := range []string{"update", "forget"} {
			t.Run(op+": "+c.name, func(t *testing.T) {
				e := setup(t)
				e.create(1, tags())
				switch c.state {
				case live:
					e.claim(1, "pm/a", 60)
				case released:
					e.release(1, *e.claim(1, "pm/a", 60).FencingToken)
				case superseded:
					e.release(1, *e.claim(1, "pm/a", 60).FencingToken)
					e.claim(1, "pm/b", 60)
				}
				l := e.l
				if c.foreign {
					l = reconfigure(t, e.l, testConfig(e.clock, "elsewhere"))
				}
				before := e.dump()
				var err error
				if op == "update" {
					_, err = l.Update(e.ctx, e.repo, "issue-1", Patch{Title: str("changed"), FencingToken: c.token}, pm, WriteOptions{})
				} else {
					err = l.Forget(e.ctx, e.repo, "issue-1", c.token, pm)
				}
				if c.want == gating.Accepted {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				wantVerdict(t, err, c.want)
				if after := e.dump(); after != before {
					t.Fatalf("a refused write wrote:\n%s\nwas\n%s", after, before)
				}
			})
		}
	}
}

// ---- claims ----

func testClaimFields(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	now := e.clock.Now()
	r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/run-1", LeaseSeconds: f64(120), Branch: "feat/epic-issue-1"}, pm)
	if err != nil {
		t.Fatal(err)
	}
	exp := Timestamp(now.Add(120 * time.Second))
	wantResult(t, r, map[string]any{"key": "issue-1", "granted": true, "fencingToken": int64(1), "owner": "pm/run-1",
		"region": testRegion, "leaseExpiresAtUtc": exp, "leaseSeconds": 120.0})
	if !strings.HasSuffix(exp, "Z") || !strings.Contains(exp, ".6780000Z") {
		t.Fatalf("timestamp %q is not round-trip UTC", exp)
	}
	st := e.status(1)
	if got := fmtStatus(st); got != fmt.Sprintf(`exists=true claimed=true held=true state="held" fence=1 released=null owner=pm/run-1 region=local lease=%s`, exp) {
		t.Fatalf("status %s", got)
	}
	if st.Key != "issue-1" {
		t.Fatalf("status key %q", st.Key)
	}
	gs, err := l.Grants(ctx, e.repo, "issue-1")
	if err != nil || len(gs) != 1 {
		t.Fatalf("grants %+v, %v", gs, err)
	}
	g := gs[0]
	if g.Fence != 1 || g.Owner != "pm/run-1" || g.Region != testRegion || g.Branch != "feat/epic-issue-1" || g.Purpose != "" ||
		!g.GrantedAt.Equal(now.Truncate(time.Millisecond)) || !g.LeaseExpiresAt.Equal(now.Add(120*time.Second)) || g.ReleasedAt != nil {
		t.Fatalf("grant %+v", g)
	}
	it := e.item(1)
	if it.Fence != (gating.Fence{Token: 1, Released: 0, Region: testRegion}) || it.Grant == nil || *it.Grant != g {
		t.Fatalf("item claim state %+v %+v", it.Fence, it.Grant)
	}
	// Released, then claimed again: the fence moves up by one, the released
	// mark stays where the release put it.
	e.release(1, 1)
	r2 := e.claim(1, "pm/run-2", 60)
	if *r2.FencingToken != 2 {
		t.Fatalf("second grant fence %d", *r2.FencingToken)
	}
	st = e.status(1)
	if !st.Claimed || *st.FencingToken != 2 || *st.ReleasedFencingToken != 1 || *st.Owner != "pm/run-2" {
		t.Fatalf("after re-claim: %s", fmtStatus(st))
	}
	if gs, _ := l.Grants(ctx, e.repo, "issue-1"); len(gs) != 2 || gs[0].Fence != 1 || gs[0].ReleasedAt == nil || gs[1].Fence != 2 || gs[1].ReleasedAt != nil {
		t.Fatalf("grant log %+v", gs)
	}
}

func testClaimContendedAndLapse(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	e.claim(1, "pm/a", 60)
	for _, owner := range []string{"pm/b", "pm/a"} { // the same owner too: the lock is held
		before := e.dump()
		r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: owner, LeaseSeconds: f64(60)}, pm)
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, map[string]any{"key": "issue-1", "granted": false, "reason": ReasonContended})
		if after := e.dump(); after != before {
			t.Fatalf("contended claim wrote:\n%s", after)
		}
	}
	// The lease lapses: claimed (the durable fence) but not held.
	e.clock.Advance(61 * time.Second)
	st := e.status(1)
	if got := fmtStatus(st); got != `exists=true claimed=true held=false state="lapsed" fence=1 released=null owner=pm/a region=local lease=null` {
		t.Fatalf("lapsed status %s", got)
	}
	// A lapsed claim is quarantined: not claimable by another owner while
	// its holder's last evidence of work (here: the grant) is within the
	// quarantine; nothing is written.
	before := e.dump()
	nr, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/b", LeaseSeconds: f64(60)}, pm)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, nr, map[string]any{"key": "issue-1", "granted": false, "reason": ReasonNotReady})
	if nr.Exclusion == nil || *nr.Exclusion != gating.ExLapsed {
		t.Fatalf("exclusion %v, want lapsed", nr.Exclusion)
	}
	if after := e.dump(); after != before {
		t.Fatalf("a not-ready claim wrote:\n%s", after)
	}
	// After the quarantine the claim is abandoned and claimable by anyone,
	// with a strictly higher fence; the released mark is untouched.
	e.clock.Advance(time.Hour)
	if st := e.status(1); st.State != "abandoned" || st.IsHeld || !st.Claimed {
		t.Fatalf("after the quarantine: %s", fmtStatus(st))
	}
	r := e.claim(1, "pm/b", 60)
	if *r.FencingToken != 2 || *r.Owner != "pm/b" {
		t.Fatalf("re-claim after lapse %+v", r)
	}
	st = e.status(1)
	if *st.FencingToken != 2 || st.ReleasedFencingToken != nil || *st.Owner != "pm/b" || st.State != "held" {
		t.Fatalf("after takeover: %s", fmtStatus(st))
	}
	// At the exact expiry instant the lease is over.
	e.clock.Advance(60 * time.Second)
	if st := e.status(1); st.IsHeld || st.State != "lapsed" {
		t.Fatalf("at expiry: %s", fmtStatus(st))
	}
}

func testClaimNotGranted(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	r, err := l.Claim(ctx, e.repo, "issue-9", ClaimRequest{Owner: "pm/x"}, pm)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, map[string]any{"key": "issue-9", "granted": false, "reason": ReasonMissing})
	// Missing also for a waiting claim, at once.
	start := time.Now()
	r, err = l.Claim(ctx, e.repo, "issue-9", ClaimRequest{Owner: "pm/x", MaxWaitSeconds: f64(5)}, pm)
	if err != nil || r.Granted || *r.Reason != ReasonMissing || time.Since(start) > 2*time.Second {
		t.Fatalf("waiting claim on a missing item: %+v %v after %v", r, err, time.Since(start))
	}
	e.create(2, tags("homeRegion:elsewhere"))
	before := e.dump()
	r, err = l.Claim(ctx, e.repo, "issue-2", ClaimRequest{Owner: "pm/x"}, pm)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, map[string]any{"key": "issue-2", "granted": false, "reason": ReasonForeignRegion})
	if after := e.dump(); after != before {
		t.Fatalf("ForeignRegion wrote:\n%s", after)
	}
	// The same item is claimable by the ledger of its home region.
	there := reconfigure(t, l, testConfig(e.clock, "elsewhere"))
	r, err = there.Claim(ctx, e.repo, "issue-2", ClaimRequest{Owner: "pm/x"}, pm)
	if err != nil || !r.Granted || *r.Region != "elsewhere" {
		t.Fatalf("claim in the home region: %+v %v", r, err)
	}
	// ... and its holder cannot write here (the fence's region is not ours).
	_, err = l.Update(ctx, e.repo, "issue-2", Patch{Title: str("x"), FencingToken: r.FencingToken}, pm, WriteOptions{})
	wantVerdict(t, err, gating.ForeignRegion)
}

func testClamp(t *testing.T, e *env) {
	cases := []struct {
		name  string
		lease *float64
		want  float64
	}{
		{"omitted: the default", nil, 30},
		{"zero: the default", f64(0), 30},
		{"ten hours: the ceiling", f64(36000), 1800},
		{"just over the ceiling", f64(1800.5), 1800},
		{"within", f64(90.5), 90.5},
		{"under a second: one second", f64(0.2), 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := i + 1
			e.create(n, tags())
			r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(n), ClaimRequest{Owner: "pm/x", LeaseSeconds: c.lease}, pm)
			if err != nil || !r.Granted {
				t.Fatalf("%+v %v", r, err)
			}
			if *r.LeaseSeconds != c.want {
				t.Fatalf("leaseSeconds %v, want %v", *r.LeaseSeconds, c.want)
			}
			want := Timestamp(e.clock.Now().Add(time.Duration(c.want * float64(time.Second))))
			if *r.LeaseExpiresAtUtc != want {
				t.Fatalf("leaseExpiresAtUtc %s, want %s", *r.LeaseExpiresAtUtc, want)
			}
			// Renew clamps the same way.
			rr, err := e.l.Renew(e.ctx, e.repo, gating.IDFor(n), *r.FencingToken, c.lease, pm)
			if err != nil || !rr.Granted || *rr.LeaseSeconds != c.want {
				t.Fatalf("renew %+v %v", rr, err)
			}
		})
	}
}

func testRenew(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	t0 := e.clock.Now()
	e.claim(1, "pm/a", 600)
	e.clock.Advance(10 * time.Second)
	// Longer: not shortened.
	r, err := l.Renew(ctx, e.repo, "issue-1", 1, f64(900), pm)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, map[string]any{"key": "issue-1", "granted": true, "fencingToken": int64(1), "owner": "pm/a", "region": testRegion,
		"leaseExpiresAtUtc": Timestamp(e.clock.Now().Add(900 * time.Second)), "leaseSeconds": 900.0,
		"previousLeaseExpiresAtUtc": Timestamp(t0.Add(600 * time.Second)), "leaseShortened": false})
	// Omitted: the default (30 s), which cuts a long lease down. The trap is
	// reported, not prevented.
	e.clock.Advance(5 * time.Second)
	r, err = l.Renew(ctx, e.repo, "issue-1", 1, nil, pm)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, map[string]any{"key": "issue-1", "granted": true, "fencingToken": int64(1), "owner": "pm/a", "region": testRegion,
		"leaseExpiresAtUtc": Timestamp(e.clock.Now().Add(30 * time.Second)), "leaseSeconds": 30.0,
		"previousLeaseExpiresAtUtc": Timestamp(t0.Add(910 * time.Second)), "leaseShortened": true})
	if st := e.status(1); *st.LeaseExpiresAtUtc != Timestamp(e.clock.Now().Add(30*time.Second)) || *st.FencingToken != 1 {
		t.Fatalf("status after renew %s", fmtStatus(st))
	}
	// Equal expiry: not shortened.
	r, _ = l.Renew(ctx, e.repo, "issue-1", 1, f64(30), pm)
	if !r.Granted || *r.LeaseShortened || *r.PreviousLeaseExpiresAtUtc != *r.LeaseExpiresAtUtc {
		t.Fatalf("equal renew %+v", r)
	}
	superseded := map[string]any{"key": "issue-1", "granted": false, "reason": ReasonSuperseded}
	for _, tok := range []int64{0, 2, -1} { // not the current fence
		before := e.dump()
		r, err := l.Renew(ctx, e.repo, "issue-1", tok, f64(60), pm)
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, superseded)
		if e.dump() != before {
			t.Fatalf("a superseded renew wrote")
		}
	}
	// Lapsed, with nobody waiting: superseded; nothing changes.
	e.clock.Advance(31 * time.Second)
	before := e.dump()
	r, err = l.Renew(ctx, e.repo, "issue-1", 1, f64(60), pm)
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, r, superseded)
	if e.dump() != before {
		t.Fatal("a lapsed renew wrote")
	}
	// The record still accepts the lapsed holder's token until another claim.
	if _, err := l.Update(ctx, e.repo, "issue-1", Patch{Title: str("by the lapsed holder"), FencingToken: i64(1)}, pm, WriteOptions{}); err != nil {
		t.Fatalf("lapsed holder's write: %v", err)
	}
	// Released: superseded. (Another owner may claim once the lapsed
	// claim's quarantine is over.)
	e.clock.Advance(time.Hour)
	r2 := e.claim(1, "pm/b", 60)
	e.release(1, *r2.FencingToken)
	r, _ = l.Renew(ctx, e.repo, "issue-1", *r2.FencingToken, f64(60), pm)
	wantResult(t, r, superseded)
	// Never claimed: superseded; missing: missing.
	e.create(2, tags())
	r, _ = l.Renew(ctx, e.repo, "issue-2", 1, f64(60), pm)
	wantResult(t, r, map[string]any{"key": "issue-2", "granted": false, "reason": ReasonSuperseded})
	r, _ = l.Renew(ctx, e.repo, "issue-3", 1, f64(60), pm)
	wantResult(t, r, map[string]any{"key": "issue-3", "granted": false, "reason": ReasonMissing})
}

func testRelease(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	want := func(r ReleaseResult, err error, released bool, token int64, reason string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var gotReason string
		if r.Reason != nil {
			gotReason = *r.Reason
		}
		if r.Released != released || r.FencingToken != token || gotReason != reason || (reason == "") != (r.Reason == nil) {
			t.Fatalf("release = %+v (reason %q), want released=%v token=%d reason=%q", r, gotReason, released, token, reason)
		}
	}
	r, err := l.Release(ctx, e.repo, "issue-1", 1, pm)
	want(r, err, false, 1, ReasonMissing)
	e.create(1, tags())
	r, err = l.Release(ctx, e.repo, "issue-1", 1, pm)
	want(r, err, false, 1, ReasonUnclaimed)
	e.claim(1, "pm/a", 60)
	e.release(1, 1)
	e.claim(1, "pm/b", 60) // fence 2
	for _, tok := range []int64{1, 3, 0} {
		before := e.dump()
		r, err := l.Release(ctx, e.repo, "issue-1", tok, pm)
		want(r, err, false, tok, ReasonStale)
		if e.dump() != before {
			t.Fatal("a stale release wrote")
		}
	}
	// Lapsed but current: honoured.
	e.clock.Advance(2 * time.Minute)
	r, err = l.Release(ctx, e.repo, "issue-1", 2, pm)
	want(r, err, true, 2, "")
	if r.Key != "issue-1" {
		t.Fatalf("key %q", r.Key)
	}
	st := e.status(1)
	if got := fmtStatus(st); got != `exists=true claimed=false held=false state="released" fence=2 released=2 owner=pm/b region=local lease=null` {
		t.Fatalf("after release: %s", got)
	}
	gs, _ := l.Grants(ctx, e.repo, "issue-1")
	if gs[1].ReleasedAt == nil || !gs[1].ReleasedAt.Equal(e.clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("grant log release time %+v", gs[1])
	}
	// Twice: stale.
	r, err = l.Release(ctx, e.repo, "issue-1", 2, pm)
	want(r, err, false, 2, ReasonStale)
}

func testStatus(t *testing.T, e *env) {
	st, err := e.l.Status(e.ctx, e.repo, "issue-5")
	if err != nil || st.Exists || st.Key != "issue-5" {
		t.Fatalf("missing: %+v %v", st, err)
	}
	if got := fmtStatus(st); got != `exists=false claimed=false held=false state="" fence=null released=null owner=null region=null lease=null` {
		t.Fatalf("missing: %s", got)
	}
	e.create(5, tags())
	if got := fmtStatus(e.status(5)); got != `exists=true claimed=false held=false state="" fence=null released=null owner=null region=null lease=null` {
		t.Fatalf("never claimed: %s", got)
	}
	_, err = e.l.Status(e.ctx, e.repo, "issue-")
	wantRefusal(t, err, ReasonInvalidRequest)
}

func testMaintenance(t *testing.T, setup func(*testing.T) *env) {
	for _, c := range []struct {
		actor Actor
		owner string
		ok    bool
	}{{pm, "pm/fix", true}, {human, "alice/fix", true}, {warden, "warden/park", true}, {worker, "w1/fix", false}} {
		t.Run(string(c.actor.Role), func(t *testing.T) {
			e := setup(t)
			e.create(1, tags())
			r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: c.owner, Purpose: "maintenance", LeaseSeconds: f64(60)}, c.actor)
			if !c.ok {
				wantRefusal(t, err, ReasonRoleNotAllowed)
				if st := e.status(1); st.FencingToken != nil {
					t.Fatalf("refused maintenance claim left a fence: %s", fmtStatus(st))
				}
				return
			}
			if err != nil || !r.Granted {
				t.Fatalf("%+v %v", r, err)
			}
			gs, _ := e.l.Grants(e.ctx, e.repo, "issue-1")
			if len(gs) != 1 || gs[0].Purpose != "maintenance" || gs[0].Owner != c.owner {
				t.Fatalf("grant log %+v", gs)
			}
		})
	}
}

func testWorkerOwner(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	for _, owner := range []string{"w1", "w10/run", "w2/run", "/run"} {
		_, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: owner}, worker)
		wantRefusal(t, err, ReasonOwnerNotAllowed)
	}
	_, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "/run"}, Actor{Role: gating.RoleWorker})
	wantRefusal(t, err, ReasonOwnerNotAllowed)
	r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "w1/run-7", LeaseSeconds: f64(60)}, worker)
	if err != nil || !r.Granted {
		t.Fatalf("worker's own claim: %+v %v", r, err)
	}
	tok := *r.FencingToken
	it, err := l.Update(ctx, e.repo, "issue-1", Patch{Body: str("lastLocation: feat/x@abc; resumeNote: seam wired"), FencingToken: &tok}, worker, WriteOptions{})
	if err != nil || it.Body != "lastLocation: feat/x@abc; resumeNote: seam wired" {
		t.Fatalf("worker's fenced write: %v", err)
	}
	if rr, err := l.Renew(ctx, e.repo, "issue-1", tok, f64(60), worker); err != nil || !rr.Granted {
		t.Fatalf("worker renew: %+v %v", rr, err)
	}
	other := Actor{Role: gating.RoleWorker, Name: "w2"}
	_, err = l.Update(ctx, e.repo, "issue-1", Patch{Title: str("x"), FencingToken: &tok}, other, WriteOptions{})
	wantRefusal(t, err, ReasonOwnerNotAllowed)
	if rel, err := l.Release(ctx, e.repo, "issue-1", tok, worker); err != nil || !rel.Released {
		t.Fatalf("worker release: %+v %v", rel, err)
	}
	// After release, a worker has no live claim to write under.
	_, err = l.Update(ctx, e.repo, "issue-1", Patch{Title: str("x")}, worker, WriteOptions{})
	wantRefusal(t, err, ReasonOwnerNotAllowed)
}

func testBodyUnderClaim(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	body := func(tok *int64) func() error {
		return func() error {
			_, err := l.Update(ctx, e.repo, "issue-1", Patch{Body: str("resume"), FencingToken: tok}, pm, WriteOptions{})
			return err
		}
	}
	check := func(write func() error, v gating.Verdict) {
		t.Helper()
		before := e.dump()
		wantVerdict(t, write(), v)
		if e.dump() != before {
			t.Fatal("wrote")
		}
	}
	check(body(nil), gating.ClaimRequired)    // never claimed
	check(body(i64(3)), gating.ClaimRequired) // never claimed, a made-up token
	if e.item(1).Body != "Spec: #1" {
		t.Fatal("body changed without a claim")
	}
	// Other fields need no claim while none is live.
	if _, err := l.Update(ctx, e.repo, "issue-1", Patch{Title: str("t")}, pm, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.claim(1, "pm/a", 60)
	check(body(nil), gating.ClaimRequired)
	check(body(i64(2)), gating.UnissuedToken)
	if err := body(i64(1))(); err != nil {
		t.Fatalf("body under the claim: %v", err)
	}
	e.release(1, 1)
	check(body(nil), gating.ClaimRequired)
	check(body(i64(1)), gating.ClaimReleased)
	if e.item(1).Body != "resume" {
		t.Fatal("body lost")
	}
}

func testCompletionUnderClaim(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags("pr:3"))
	proven := WriteOptions{CompletionProven: true}
	_, err := l.Update(ctx, e.repo, "issue-1", Patch{AddTags: []string{"state:complete"}}, pm, proven)
	wantVerdict(t, err, gating.ClaimRequired)
	r := e.claim(1, "pm/merge", 60)
	_, err = l.Update(ctx, e.repo, "issue-1", Patch{AddTags: []string{"state:complete"}, FencingToken: r.FencingToken}, pm, WriteOptions{})
	wantRefusal(t, err, "completion-unproven")
	it, err := l.Update(ctx, e.repo, "issue-1", Patch{AddTags: []string{"state:complete"}, FencingToken: r.FencingToken}, pm, proven)
	if err != nil || !it.Snapshot().HasTag("state:complete") {
		t.Fatalf("proven completion under the claim: %v", err)
	}
	// Adopting a directly-deployed item: born complete, no claim history.
	it, err = l.Create(ctx, e.repo, NewItem{Number: 2, Tags: tags("state:complete", "pr:9", "direct-deployment")}, pm, proven)
	if err != nil || it.Fence.Token != 0 {
		t.Fatalf("adopt: %+v %v", it, err)
	}
}

func testForget(t *testing.T, e *env) {
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	e.create(2, tags(), blockedBy(1))
	if err := l.Forget(ctx, e.repo, "issue-3", nil, pm); !errors.Is(err, ErrNotFound) {
		t.Fatalf("forget missing: %v", err)
	}
	// Dependent first (pm may remove its own edge by forgetting the item).
	if err := l.Forget(ctx, e.repo, "issue-2", nil, pm); err != nil {
		t.Fatal(err)
	}
	r := e.claim(1, "pm/a", 60)
	if err := l.Forget(ctx, e.repo, "issue-1", r.FencingToken, human); err != nil {
		t.Fatalf("forget under the claim: %v", err)
	}
	if _, err := l.Get(ctx, e.repo, "issue-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("forgotten item: %v", err)
	}
	if st := e.status(1); st.Exists {
		t.Fatalf("forgotten status %s", fmtStatus(st))
	}
	if c, _ := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/b"}, pm); c.Granted || *c.Reason != ReasonMissing {
		t.Fatalf("claim a forgotten item: %+v", c)
	}
	// Re-created under the same number: the high-water mark survives, so the
	// old token is below it and the next grant is higher than any before.
	it := e.create(1, tags())
	if it.Fence.Token != 1 || it.Fence.Released != 1 || it.Fence.Claimed() {
		t.Fatalf("re-created fence %+v", it.Fence)
	}
	_, err := l.Update(ctx, e.repo, "issue-1", Patch{Title: str("x"), FencingToken: i64(1)}, pm, WriteOptions{})
	wantVerdict(t, err, gating.ClaimReleased)
	if c := e.claim(1, "pm/b", 60); *c.FencingToken != 2 {
		t.Fatalf("fence after re-creation %d", *c.FencingToken)
	}
}

// ---- bounded wait ----

// waitQueued waits (real time) until n claimants wait on the item.
func waitQueued(t *testing.T, e *env, num, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.l.queued(itemKey{e.repo, num}) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", e.l.queued(itemKey{e.repo, num}), n)
		}
		time.Sleep(time.Millisecond)
	}
}

type claimOutcome struct {
	r   ClaimResult
	err error
	at  time.Time
}

func (e *env) claimAsync(n int, owner string, wait float64) chan claimOutcome {
	ch := make(chan claimOutcome, 1)
	go func() {
		r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(n), ClaimRequest{Owner: owner, LeaseSeconds: f64(60), MaxWaitSeconds: f64(wait)}, pm)
		ch <- claimOutcome{r, err, time.Now()}
	}()
	return ch
}

func testBoundedWait(t *testing.T, setup func(*testing.T) *env) {
	t.Run("granted when the holder releases", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.claim(1, "pm/holder", 60)
		ch := e.claimAsync(1, "pm/waiter", 10)
		waitQueued(t, e, 1, 1)
		start := time.Now()
		e.release(1, 1)
		o := <-ch
		if o.err != nil || !o.r.Granted || *o.r.FencingToken != 2 || *o.r.Owner != "pm/waiter" {
			t.Fatalf("%+v %v", o.r, o.err)
		}
		if d := o.at.Sub(start); d > time.Second {
			t.Fatalf("woken %v after the release", d)
		}
	})
	t.Run("a lapse ends the wait: the item is quarantined", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.claim(1, "pm/holder", 60)
		ch := e.claimAsync(1, "pm/waiter", 10)
		waitQueued(t, e, 1, 1)
		e.clock.Advance(61 * time.Second)
		o := <-ch
		if o.err != nil || o.r.Granted || *o.r.Reason != ReasonNotReady || *o.r.Exclusion != gating.ExLapsed {
			t.Fatalf("%+v %v", o.r, o.err)
		}
	})
	t.Run("granted when the lapsed claim is abandoned", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.claim(1, "pm/holder", 60)
		ch := e.claimAsync(1, "pm/waiter", 10)
		waitQueued(t, e, 1, 1)
		e.clock.Advance(61*time.Second + time.Hour)
		o := <-ch
		if o.err != nil || !o.r.Granted || *o.r.FencingToken != 2 {
			t.Fatalf("%+v %v", o.r, o.err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.claim(1, "pm/holder", 60)
		before := e.dump()
		start := time.Now()
		r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/waiter", MaxWaitSeconds: f64(0.25)}, pm)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, map[string]any{"key": "issue-1", "granted": false, "reason": ReasonTimeout})
		if took < 250*time.Millisecond || took > 3*time.Second {
			t.Fatalf("waited %v for 0.25 s", took)
		}
		if e.dump() != before {
			t.Fatal("a timed-out claim wrote")
		}
		if q := e.l.queued(itemKey{e.repo, 1}); q != 0 {
			t.Fatalf("%d left in the queue", q)
		}
	})
	t.Run("two waiters in arrival order", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.claim(1, "pm/holder", 60)
		first := e.claimAsync(1, "pm/first", 10)
		waitQueued(t, e, 1, 1)
		second := e.claimAsync(1, "pm/second", 10)
		waitQueued(t, e, 1, 2)
		e.release(1, 1)
		o1 := <-first
		if o1.err != nil || !o1.r.Granted || *o1.r.Owner != "pm/first" || *o1.r.FencingToken != 2 {
			t.Fatalf("first: %+v %v", o1.r, o1.err)
		}
		select {
		case o := <-second:
			t.Fatalf("second served while first holds: %+v", o.r)
		case <-time.After(150 * time.Millisecond):
		}
		e.release(1, 2)
		o2 := <-second
		if o2.err != nil || !o2.r.Granted || *o2.r.Owner != "pm/second" || *o2.r.FencingToken != 3 {
			t.Fatalf("second: %+v %v", o2.r, o2.err)
		}
	})
	t.Run("a claim that does not wait yields to the queue", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.create(2, tags())
		e.claim(1, "pm/holder", 60)
		ch := e.claimAsync(1, "pm/waiter", 10)
		waitQueued(t, e, 1, 1)
		// Abandon the holder's claim while the waiter sleeps between polls;
		// a barging claim must not take what the waiter is owed.
		e.clock.Advance(61*time.Second + time.Hour)
		r, err := e.l.Claim(e.ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/barger"}, pm)
		if err != nil {
			t.Fatal(err)
		}
		o := <-ch
		if o.err != nil || !o.r.Granted || *o.r.Owner != "pm/waiter" {
			t.Fatalf("waiter: %+v %v", o.r, o.err)
		}
		if r.Granted {
			t.Fatalf("barger granted %+v while a claimant waited", r)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		e := setup(t)
		e.create(1, tags())
		e.claim(1, "pm/holder", 60)
		ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
		defer cancel()
		_, err := e.l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: "pm/w", MaxWaitSeconds: f64(10)}, pm)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		if q := e.l.queued(itemKey{e.repo, 1}); q != 0 {
			t.Fatalf("%d left in the queue", q)
		}
	})
}

// ---- races ----

func testRace(t *testing.T, e *env) {
	// Hundreds of custody changes on one item: raise the poison threshold
	// (it would otherwise be poisoned after three).
	cfg := testConfig(e.clock, testRegion)
	cfg.Settings = func(context.Context, Repo) gating.Settings {
		s := gating.DefaultSettings()
		s.PoisonThreshold = 1 << 30
		return s
	}
	e.l = reconfigure(t, e.l, cfg)
	ctx, l := e.ctx, e.l
	e.create(1, tags())
	const racers = 50
	var wg sync.WaitGroup
	results := make([]ClaimResult, racers)
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: fmt.Sprintf("pm/r%d", i), LeaseSeconds: f64(60)}, pm)
		}()
	}
	close(start)
	wg.Wait()
	granted := 0
	var token int64
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Granted {
			granted++
			token = *r.FencingToken
		} else if *r.Reason != ReasonContended {
			t.Fatalf("loser's reason %q", *r.Reason)
		}
	}
	if granted != 1 || token != 1 {
		t.Fatalf("%d granted (token %d), want exactly one with token 1", granted, token)
	}
	e.release(1, 1)

	// Repeated claim/renew/release across goroutines, waiting for each other.
	const workers, rounds = 8, 15
	var mu sync.Mutex
	tokens := map[int64]string{}
	wg = sync.WaitGroup{}
	fail := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("pm/worker-%d", w)
			var last int64
			for range rounds {
				r, err := l.Claim(ctx, e.repo, "issue-1", ClaimRequest{Owner: owner, LeaseSeconds: f64(60), MaxWaitSeconds: f64(30)}, pm)
				if err != nil || !r.Granted {
					fail <- fmt.Errorf("%s: %+v %v", owner, r, err)
					return
				}
				tok := *r.FencingToken
				if tok <= last {
					fail <- fmt.Errorf("%s got token %d after %d", owner, tok, last)
					return
				}
				last = tok
				mu.Lock()
				if prev, dup := tokens[tok]; dup {
					mu.Unlock()
					fail <- fmt.Errorf("token %d issued to %s and %s", tok, prev, owner)
					return
				}
				tokens[tok] = owner
				mu.Unlock()
				if rr, err := l.Renew(ctx, e.repo, "issue-1", tok, f64(60), pm); err != nil || !rr.Granted || *rr.FencingToken != tok {
					fail <- fmt.Errorf("%s renew %d: %+v %v", owner, tok, rr, err)
					return
				}
				if rel, err := l.Release(ctx, e.repo, "issue-1", tok, pm); err != nil || !rel.Released {
					fail <- fmt.Errorf("%s release %d: %+v %v", owner, tok, rel, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	if len(tokens) != workers*rounds {
		t.Fatalf("%d tokens, want %d", len(tokens), workers*rounds)
	}
	gs, err := l.Grants(ctx, e.repo, "issue-1")
	if err != nil || len(gs) != workers*rounds+1 {
		t.Fatalf("grant log of %d, %v", len(gs), err)
	}
	for i, g := range gs {
		if g.Fence != int64(i+1) {
			t.Fatalf("grant log fence %d at %d: not strictly increasing by one", g.Fence, i)
		}
		if i > 0 && tokens[g.Fence] != g.Owner {
			t.Fatalf("token %d: log says %s, caller %s", g.Fence, g.Owner, tokens[g.Fence])
		}
		if g.ReleasedAt == nil {
			t.Fatalf("grant %d not released", g.Fence)
		}
	}
	if st := e.status(1); *st.FencingToken != int64(len(gs)) || *st.ReleasedFencingToken != int64(len(gs)) {
		t.Fatalf("final status %s", fmtStatus(st))
	}
}
