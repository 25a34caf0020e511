package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/mirror"
)

// world is what a warden shows of one repository, with what only the
// ledger holds left out (when an item was made and how: createdAt,
// updatedAt, provenance; when its current claim was granted: grantedAt,
// which for warden's own maintenance claims is when that warden made
// them), so two wardens over one GitHub can be compared.
type world struct {
	Ready    any            // GET /ready
	Report   any            // GET /report
	Items    map[string]any // GET /items/{id} of every item
	Checks   map[string]int // backlog check runs per head
	Comments map[int]int    // warden's comments per issue
}

// observe reads what warden x shows of the repository now.
func (x *e2e) observe(t *testing.T) world {
	t.Helper()
	ctx := context.Background()
	w := world{Items: map[string]any{}, Comments: map[int]int{}}
	get := func(path string, out any) {
		t.Helper()
		if code, err := x.API(ctx, WorkerToken, http.MethodGet, path, nil, out); err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, code, err)
		}
	}
	get("/ready", &w.Ready)
	get("/report", &w.Report)
	var ids []string
	var nums []int
	x.Sim.Locked(func() {
		for n, is := range x.Repo.Issues {
			nums = append(nums, n)
			if !is.IsPull {
				ids = append(ids, idOf(n))
			}
		}
	})
	for _, n := range nums {
		for _, c := range x.comments(n) {
			if c.Login == x.Sim.BotLogin() {
				w.Comments[n]++
			}
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		var it any
		code, err := x.API(ctx, WorkerToken, http.MethodGet, "/items/"+id, nil, &it)
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusOK {
			w.Items[id] = it
		}
	}
	w.Checks = x.allBacklogRuns()
	strip(w.Ready)
	strip(w.Report)
	for _, it := range w.Items {
		strip(it)
	}
	return w
}

// strip removes, everywhere in v, the fields only the ledger holds.
func strip(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"createdAt", "updatedAt", "provenance", "grantedAt"} {
			delete(v, k)
		}
		for _, e := range v {
			strip(e)
		}
	case []any:
		for _, e := range v {
			strip(e)
		}
	}
}

// diffWorlds names the parts of two worlds that differ.
func diffWorlds(a, b world) []string {
	var out []string
	show := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			bx, _ := json.MarshalIndent(x, "", " ")
			by, _ := json.MarshalIndent(y, "", " ")
			out = append(out, fmt.Sprintf("%s:\nlive:\n%s\nstarted over:\n%s", name, bx, by))
		}
	}
	show("GET /ready", a.Ready, b.Ready)
	show("GET /report", a.Report, b.Report)
	for id := range a.Items {
		show("GET /items/"+id, a.Items[id], b.Items[id])
	}
	for id := range b.Items {
		if _, ok := a.Items[id]; !ok {
			show("GET /items/"+id, nil, b.Items[id])
		}
	}
	show("backlog check runs per head", a.Checks, b.Checks)
	show("warden's comments per issue", a.Comments, b.Comments)
	return out
}

// converge runs a warden's passes until one completes and adopts nothing
// more: the timer pass and reconcile passes, each flushed.
func (x *e2e) converge(t *testing.T) {
	t.Helper()
	for i := 0; i < 10; i++ {
		r := x.passFlush(t)
		x.MustSweep(t)
		x.flush(t)
		if r.Complete && r.Adopted == 0 && r.Unadopted == 0 {
			return
		}
	}
	t.Fatal("no pass converged in 10")
}

// TestStartFromNothing: a repository with history (items admitted and
// gated, three custody changes with real markers on one, a human park on
// another, an open and a merged pull request) seen live by one warden; then
// a warden started on an empty database with no deliveries at all (the
// delivery log expired) converges, by its own passes, to what the live
// warden shows: the ready set, the report, the parks, the attempts and the
// check runs, without a second comment or check run on GitHub. Then the
// same again with the database deleted mid-way.
func TestStartFromNothing(t *testing.T) {
	x := newE2E(t)
	x.MustSettle(t)
	maria := x.Person("maria", "maintain")
	x.Sim.SetRole(x.Repo, "builder[bot]", "write")
	agent := x.Sim.As("builder[bot]")
	issue := func(title string, labels ...string) int {
		t.Helper()
		is, err := maria.OpenIssue(x.Repo, title, "What must be true: "+title, labels...)
		if err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		return is.Number
	}
	admitted := issue("Admitted by its maker", lblItem)
	gated := x.openWithLabelsAs(t, "reader", "read", "Gated: opened by a reader", lblItem)
	// A custody change as the protocol has it: the claim announced by its
	// marker, the release by an outcome marker (what the ledger alone
	// knows, the grant log, is not on GitHub).
	attempt := func(n int, owner string, fence int64) {
		t.Helper()
		x.say(t, agent, n, x.marker(idOf(n), owner, fence))
		x.MustSettle(t)
		x.say(t, agent, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=released -->", idOf(n), owner, fence))
		x.MustSettle(t)
		x.release(t, WorkerToken, idOf(n), fence)
		x.MustSettle(t)
	}
	custody := issue("Three custody changes", lblItem)
	for i := 1; i <= 3; i++ {
		owner := fmt.Sprintf("worker-7/a%d", i)
		attempt(custody, owner, x.claimFor(t, WorkerToken, idOf(custody), owner, 600))
	}
	parked := issue("Parked by a maintainer", lblItem)
	if _, err := maria.AddLabels(x.Repo, parked, lblParked); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.say(t, maria, parked, "Park question: which storage engine do we keep?")
	merged := issue("Delivered by a merged pull request", lblItem)
	x.MustSettle(t)
	f := x.claimBranch(t, WorkerToken, idOf(merged), "worker-7/m", "feat/merged", 600)
	x.say(t, agent, merged, x.marker(idOf(merged), "worker-7/m", f))
	p := x.branchPR(t, "feat/merged", "main", "main", "Closes #"+fmt.Sprint(merged))
	x.merge(t, p.N)
	x.MustSettle(t)
	x.say(t, agent, merged, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=worker-7/m fence=%d result=released -->", idOf(merged), f))
	x.MustSettle(t)
	x.release(t, WorkerToken, idOf(merged), f)
	x.branchPR(t, "feat/open", "main", "main", "Part of the work on #"+fmt.Sprint(admitted))
	x.MustSettle(t)
	x.MustSweep(t)
	x.converge(t)
	live := x.observe(t)
	if len(live.Items) != 5 {
		t.Fatalf("the live warden has %d items, want 5 (gated #%d among them)", len(live.Items), gated)
	}

	startOver := func(name string) {
		t.Helper()
		x.Sim.ExpireDeliveryLog()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := x.StartOver(ctx, name); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
	}
	compare := func(name string) {
		t.Helper()
		if d := diffWorlds(live, x.observe(t)); len(d) > 0 {
			t.Fatalf("a warden started over on %s differs from the live one:\n%s", name, strings.Join(d, "\n\n"))
		}
	}
	startOver("fresh.db")
	x.converge(t)
	compare("fresh.db")

	// Deleted mid-way: a warden that began adopting on a new database (its
	// pass stopped by its budget) is replaced by one on another new one.
	startOver("half.db")
	if r := x.pass(t, mirror.ReconcileOptions{Budget: 4}); r.Complete {
		t.Fatalf("a pass with a budget of 4 completed: %+v", r)
	}
	startOver("fresh-again.db")
	x.converge(t)
	compare("fresh-again.db")
}
