package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/mirror/store"
)

// readySet is GET /ready's answer as a client reads it.
type readySet struct {
	Ready []struct {
		Item     string   `json:"item"`
		Priority string   `json:"priority"`
		Overlaps []string `json:"overlaps"`
		ID       string   `json:"id"`
		Title    string   `json:"title"`
		Tags     []string `json:"tags"`
		Attempts int      `json:"attempts"`
	} `json:"ready"`
	Excluded   []gating.Exclusion `json:"excluded"`
	Defects    []gating.Defect    `json:"defects"`
	Alarms     []string           `json:"alarms"`
	ReadyCount int                `json:"readyCount"`
}

func (s readySet) ids() []string {
	out := []string{}
	for _, r := range s.Ready {
		out = append(out, r.Item)
	}
	return out
}

func (s readySet) exclusion(id string) string {
	for _, x := range s.Excluded {
		if string(x.Item) == id {
			return x.Reason
		}
	}
	return ""
}

func (e *Env) mustReady(t *testing.T) readySet {
	t.Helper()
	var s readySet
	if code, err := e.API(context.Background(), WorkerToken, http.MethodGet, "/ready", nil, &s); err != nil || code != http.StatusOK {
		t.Fatalf("GET /ready: %d %v", code, err)
	}
	return s
}

func (e *Env) mustReport(t *testing.T) gating.Report {
	t.Helper()
	var r gating.Report
	if code, err := e.API(context.Background(), WorkerToken, http.MethodGet, "/report", nil, &r); err != nil || code != http.StatusOK {
		t.Fatalf("GET /report: %d %v", code, err)
	}
	return r
}

// claim asks for a claim and returns the answer (a refusal is an answer).
func (e *Env) claim(t *testing.T, token, id string, body map[string]any) store.ClaimResult {
	t.Helper()
	var r store.ClaimResult
	if code, err := e.API(context.Background(), token, http.MethodPost, "/items/"+id+"/claim", body, &r); err != nil || code != http.StatusOK {
		t.Fatalf("claim %s: %d %v", id, code, err)
	}
	return r
}

func notReady(t *testing.T, r store.ClaimResult, exclusion string) {
	t.Helper()
	if r.Granted || r.Reason == nil || *r.Reason != store.ReasonNotReady || r.Exclusion == nil || *r.Exclusion != exclusion {
		b, _ := json.Marshal(r)
		t.Fatalf("claim answered %s, want granted false, reason not-ready, exclusion %s", b, exclusion)
	}
}

func granted(t *testing.T, r store.ClaimResult) int64 {
	t.Helper()
	if !r.Granted || r.FencingToken == nil {
		b, _ := json.Marshal(r)
		t.Fatalf("claim not granted: %s", b)
	}
	return *r.FencingToken
}

// create makes an item through the API with token and returns its id.
func (e *Env) create(t *testing.T, token, title string, tags []string, links ...map[string]string) string {
	t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	body := map[string]any{"title": title, "specification": "What must be true: " + title, "tags": tags}
	if len(links) > 0 {
		body["links"] = links
	}
	if code, err := e.API(context.Background(), token, http.MethodPost, "/items", body, &out); err != nil || code != http.StatusCreated {
		t.Fatalf("create %q: %d %v", title, code, err)
	}
	return out.ID
}

// TestReadyAdmission: an item an agent makes awaits a human's admission and
// is neither ready nor claimable; one a maintainer makes is admitted at
// creation, ready and claimable. warden reads the admission label from the
// issue state its deliveries recorded, without a GitHub call.
func TestReadyAdmission(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	agent := e.Sim.As("worker-7[bot]")
	e.Sim.SetRole(e.Repo, "worker-7[bot]", "write")
	alice := e.Person("alice", "maintain")

	byPM := e.create(t, PMToken, "Shard the claim table", []string{"priority:P1"})
	byAgent, err := agent.OpenIssue(e.Repo, "Proposed by an agent", "spec", "backlog")
	if err != nil {
		t.Fatal(err)
	}
	byAlice, err := alice.OpenIssue(e.Repo, "Filed by a maintainer", "spec", "backlog")
	if err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	agentID, aliceID := string(gating.IDFor(byAgent.Number)), string(gating.IDFor(byAlice.Number))

	// The issue state warden recorded from the deliveries (and the API's own
	// answer): the agent's issue carries the admission label warden added.
	repo, _ := e.Service.Ledger.Repo(ctx, "acme/app")
	st, err := e.Service.Ledger.IssueState(ctx, repo.ID, byAgent.Number)
	if err != nil || st == nil || !st.HasLabel("needs-specification") || !st.HasLabel("backlog") || st.State != "open" {
		t.Fatalf("recorded state of the agent's issue: %+v %v", st, err)
	}

	s := e.mustReady(t)
	if !slices.Equal(s.ids(), []string{aliceID}) || s.ReadyCount != 1 {
		t.Fatalf("ready %v (%d), want only %s", s.ids(), s.ReadyCount, aliceID)
	}
	for _, id := range []string{byPM, agentID} {
		if r := s.exclusion(id); r != gating.ExAwaitingAdmission {
			t.Errorf("%s excluded as %q, want awaiting-admission: %+v", id, r, s.Excluded)
		}
		notReady(t, e.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/run-1"}), gating.ExAwaitingAdmission)
	}
	// A maintenance claim skips readiness (and is no attempt).
	m := e.claim(t, PMToken, byPM, map[string]any{"owner": "pm/repair", "purpose": "maintenance"})
	tok := granted(t, m)
	var rel store.ReleaseResult
	if _, err := e.API(ctx, PMToken, http.MethodPost, "/items/"+byPM+"/release", map[string]any{"fencingToken": tok}, &rel); err != nil || !rel.Released {
		t.Fatalf("release: %+v %v", rel, err)
	}
	// The maintainer's item is ready and claimable.
	if s.Ready[0].ID != aliceID || s.Ready[0].Title != "Filed by a maintainer" || s.Ready[0].Priority != "P2" || s.Ready[0].Attempts != 0 {
		t.Fatalf("ready entry %+v", s.Ready[0])
	}
	granted(t, e.claim(t, WorkerToken, aliceID, map[string]any{"owner": "worker-7/run-1", "leaseSeconds": 600}))
	if s := e.mustReady(t); len(s.Ready) != 0 || s.exclusion(aliceID) != gating.ExHeld {
		t.Fatalf("after the claim: ready %v, %s excluded as %q", s.ids(), aliceID, s.exclusion(aliceID))
	}
	rep := e.mustReport(t)
	if len(rep.AwaitingAdmission) != 2 || len(rep.InFlight) != 1 || string(rep.InFlight[0].Item) != aliceID ||
		rep.InFlight[0].Owner != "worker-7/run-1" || rep.InFlight[0].State != gating.StateHeld {
		t.Fatalf("report %+v", rep)
	}
}

// TestReadyBlockedDependent: a dependent is excluded (blocked) and refused
// while its blocker is live, and ready and claimable once the blocker is
// complete.
func TestReadyBlockedDependent(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	blocker := e.create(t, HumanToken, "Batch WAL writes", []string{"priority:P2"})
	dependent := e.create(t, HumanToken, "Use the batched WAL", []string{"priority:P0"}, map[string]string{"rel": "blockedBy", "target": blocker})
	e.MustSettle(t)

	s := e.mustReady(t)
	if !slices.Equal(s.ids(), []string{blocker}) || s.exclusion(dependent) != gating.ExBlocked {
		t.Fatalf("ready %v, excluded %+v", s.ids(), s.Excluded)
	}
	notReady(t, e.claim(t, WorkerToken, dependent, map[string]any{"owner": "worker-7/run-1"}), gating.ExBlocked)
	rep := e.mustReport(t)
	if len(rep.Blocked) != 1 || string(rep.Blocked[0].Item) != dependent || len(rep.Blocked[0].WaitingOn) != 1 || string(rep.Blocked[0].WaitingOn[0]) != blocker {
		t.Fatalf("report blocked %+v", rep.Blocked)
	}

	// The blocker is claimed and completed (the merged PR's proof is the
	// API's business; here the ledger is told it was proven).
	tok := granted(t, e.claim(t, WorkerToken, blocker, map[string]any{"owner": "worker-7/run-1", "leaseSeconds": 600}))
	repo, _ := e.Service.Ledger.Repo(ctx, "acme/app")
	if _, err := e.Service.Ledger.Update(ctx, repo.ID, gating.ItemID(blocker), store.Patch{AddTags: []string{"state:complete"}, FencingToken: &tok},
		store.Actor{Role: gating.RoleWorker, Name: "worker-7"}, store.WriteOptions{CompletionProven: true}); err != nil {
		t.Fatal(err)
	}
	s = e.mustReady(t)
	if !slices.Equal(s.ids(), []string{dependent}) || s.exclusion(blocker) != gating.ExComplete {
		t.Fatalf("after completion: ready %v, excluded %+v", s.ids(), s.Excluded)
	}
	granted(t, e.claim(t, WorkerToken, dependent, map[string]any{"owner": "worker-7/run-2"}))
}

// TestLapsedClaimQuarantine: a lapsed claim refuses other owners (lapsed)
// while its holder shows evidence of work — here a push to the claim's
// branch, which moves the quarantine's end — lets its own holder re-claim
// (a clean re-claim: the fence moves, no attempt), and becomes claimable by
// others once the quarantine after the last evidence is over.
func TestLapsedClaimQuarantine(t *testing.T) {
	const quarantine = 3 * time.Second
	e := New(t, Options{Settings: func(s *config.Settings) {
		s.LeaseDefault, s.LeaseMax, s.Quarantine = time.Second, time.Minute, quarantine
	}})
	ctx := context.Background()
	pushed := e.create(t, HumanToken, "Pushed to while lapsed", []string{"priority:P1"})
	reclaimed := e.create(t, HumanToken, "Re-claimed by its holder", []string{"priority:P1"})
	e.MustSettle(t)

	c := e.claim(t, WorkerToken, pushed, map[string]any{"owner": "worker-7/run-1", "branch": "feat/pushed"})
	tok := granted(t, c)
	if *c.LeaseSeconds != 1 {
		t.Fatalf("lease %v, want the 1s default", *c.LeaseSeconds)
	}
	grantedAt := mustTime(t, *c.LeaseExpiresAtUtc).Add(-time.Second)
	c2 := e.claim(t, WorkerToken, reclaimed, map[string]any{"owner": "worker-7/run-2"})
	tok2 := granted(t, c2)
	sleepUntil(grantedAt.Add(1200 * time.Millisecond))

	// Lapsed: quarantined for everyone but the holder.
	notReady(t, e.claim(t, PMToken, pushed, map[string]any{"owner": "pm/other"}), gating.ExLapsed)
	notReady(t, e.claim(t, PMToken, reclaimed, map[string]any{"owner": "pm/other"}), gating.ExLapsed)
	if st := e.status(t, pushed); st.State != "lapsed" || st.IsHeld || !st.Claimed {
		t.Fatalf("status %+v", st)
	}
	// The holder of the other item comes back: a clean re-claim.
	r := e.claim(t, WorkerToken, reclaimed, map[string]any{"owner": "worker-7/run-2", "leaseSeconds": 600})
	if got := granted(t, r); got != tok2+1 {
		t.Fatalf("re-claim fence %d, want %d (it increments)", got, tok2+1)
	}

	// A push to the lapsed claim's branch is evidence of work.
	sleepUntil(grantedAt.Add(2200 * time.Millisecond))
	if _, err := e.Person("worker-7-human", "write").Push(e.Repo, "feat/pushed", "", map[string]string{"wal.go": "package wal\n"}, "wip"); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	recs, _ := e.Service.Inbox.List(ctx, false, 1000)
	found := false
	for _, rec := range recs {
		if rec.Event == "push" && strings.Contains(rec.Outcome, "evidence of work for "+pushed) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no push delivery counted as evidence for %s", pushed)
	}
	rep := e.mustReport(t)
	var ends time.Time
	for _, l := range rep.Lapsed {
		if string(l.Item) == pushed {
			ends = l.QuarantineEndsAtUtc
		}
	}
	if !ends.After(grantedAt.Add(quarantine + time.Second)) {
		t.Fatalf("the push did not move the quarantine's end: %v (granted %v): %+v", ends, grantedAt, rep.Lapsed)
	}
	// Past the quarantine the grant alone would give, still quarantined.
	sleepUntil(grantedAt.Add(quarantine + 300*time.Millisecond))
	if time.Now().Before(ends) {
		notReady(t, e.claim(t, PMToken, pushed, map[string]any{"owner": "pm/other"}), gating.ExLapsed)
	}
	// The clean re-claim is in the report; it was no attempt.
	if len(rep.CleanReclaims) != 1 || string(rep.CleanReclaims[0].Item) != reclaimed || rep.CleanReclaims[0].Owner != "worker-7/run-2" ||
		rep.CleanReclaims[0].PriorFence != tok2 || rep.CleanReclaims[0].Fence != tok2+1 {
		t.Fatalf("clean re-claims %+v", rep.CleanReclaims)
	}
	if d := e.detail(t, reclaimed); d.Attempts != 1 || d.Claim.State != "held" {
		t.Fatalf("re-claimed item: attempts %d, claim %+v", d.Attempts, d.Claim)
	}

	// After the quarantine that followed the push: abandoned, claimable by
	// another owner (a takeover: a second attempt).
	sleepUntil(ends.Add(100 * time.Millisecond))
	if st := e.status(t, pushed); st.State != "abandoned" {
		t.Fatalf("after the quarantine: %+v", st)
	}
	if got := granted(t, e.claim(t, PMToken, pushed, map[string]any{"owner": "pm/other", "leaseSeconds": 60})); got != tok+1 {
		t.Fatalf("takeover fence %d, want %d", got, tok+1)
	}
	if d := e.detail(t, pushed); d.Attempts != 2 || d.Claim.State != "held" || *d.Claim.Owner != "pm/other" {
		t.Fatalf("after the takeover: attempts %d, claim %+v", d.Attempts, d.Claim)
	}
}

// TestReadyAndReportShapes: the fields of GET /ready and GET /report, and
// the limit.
func TestReadyAndReportShapes(t *testing.T) {
	e := New(t, Options{})
	ctx := context.Background()
	for i := range 3 {
		e.create(t, HumanToken, fmt.Sprintf("item %d", i), []string{"priority:P" + fmt.Sprint(2-i)})
	}
	e.create(t, PMToken, "awaiting", nil)
	e.MustSettle(t)
	raw := func(path string) map[string]any {
		var m map[string]any
		if code, err := e.API(ctx, WorkerToken, http.MethodGet, path, nil, &m); err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, code, err)
		}
		return m
	}
	keys := func(m map[string]any) []string {
		out := []string{}
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	ready := raw("/ready?limit=2")
	if got := keys(ready); !slices.Equal(got, []string{"alarms", "defects", "excluded", "ready", "readyCount"}) {
		t.Fatalf("GET /ready keys %v", got)
	}
	list := ready["ready"].([]any)
	if len(list) != 2 || ready["readyCount"] != 3.0 {
		t.Fatalf("limit 2: %d entries of %v", len(list), ready["readyCount"])
	}
	first := list[0].(map[string]any)
	for _, k := range []string{"item", "priority", "overlaps", "id", "number", "title", "body", "tags", "links", "createdAt", "attempts"} {
		if _, ok := first[k]; !ok {
			t.Errorf("a ready entry lacks %q: %v", k, first)
		}
	}
	if first["item"] != "issue-3" || first["priority"] != "P0" {
		t.Fatalf("first ready %v, want issue-3 (P0)", first)
	}
	ex := ready["excluded"].([]any)
	if len(ex) != 1 || ex[0].(map[string]any)["reason"] != gating.ExAwaitingAdmission || ex[0].(map[string]any)["detail"] == "" {
		t.Fatalf("excluded %v", ex)
	}
	var p map[string]any
	if code, _ := e.API(ctx, WorkerToken, http.MethodGet, "/ready?limit=0", nil, &p); code != http.StatusUnprocessableEntity || p["reason"] != "invalid-request" {
		t.Fatalf("limit 0: %d %v", code, p)
	}
	report := raw("/report")
	want := []string{"awaitingAdmission", "blocked", "cleanReclaims", "defects", "inFlight", "lapsed", "lines", "parked", "ready", "stalled", "summary"}
	if got := keys(report); !slices.Equal(got, want) {
		t.Fatalf("GET /report keys %v, want %v", got, want)
	}
	for _, k := range want {
		if k != "summary" && report[k] == nil {
			t.Errorf("report %s is null, want a list", k)
		}
	}
	sum := report["summary"].(map[string]any)
	if sum["items"] != 4.0 || sum["ready"] != 3.0 || sum["awaitingAdmission"] != 1.0 {
		t.Fatalf("summary %v", sum)
	}
	// Item recall carries the claim state and the attempts.
	id := first["item"].(string)
	granted(t, e.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/a", "leaseSeconds": 60}))
	if d := e.detail(t, id); d.Attempts != 1 || d.Claim.State != "held" {
		t.Fatalf("detail: attempts %d, claim %+v", d.Attempts, d.Claim)
	}
}

type itemDetail struct {
	Attempts int               `json:"attempts"`
	Claim    store.ClaimStatus `json:"claim"`
}

func (e *Env) detail(t *testing.T, id string) itemDetail {
	t.Helper()
	var d itemDetail
	if code, err := e.API(context.Background(), WorkerToken, http.MethodGet, "/items/"+id, nil, &d); err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s: %d %v", id, code, err)
	}
	return d
}

func (e *Env) status(t *testing.T, id string) store.ClaimStatus {
	t.Helper()
	var st store.ClaimStatus
	if code, err := e.API(context.Background(), WorkerToken, http.MethodGet, "/items/"+id+"/claim", nil, &st); err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s/claim: %d %v", id, code, err)
	}
	return st
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}
