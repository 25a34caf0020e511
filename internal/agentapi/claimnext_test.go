package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// The claims as the agents need them (CONTRACT.md §11): requestId on
// claim, renew and release; POST /ready/claim; leaseDefaulted; the
// per-owner cap; grantedAt.

// withOwnerCap reopens the fixture's ledger with max_claims_per_owner n in
// the repository's settings.
func withOwnerCap(n int) func(*fixture) {
	return func(f *fixture) {
		st, err := store.Open(context.Background(), f.db, store.Config{Region: "local", LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute,
			Quarantine: time.Hour, Now: f.clock.Now, Settings: func(context.Context, store.Repo) gating.Settings {
				s := gating.DefaultSettings()
				s.MaxClaimsPerOwner = n
				return s
			}})
		if err != nil {
			f.t.Fatal(err)
		}
		f.ledger, f.acts = st.Ledger, st.Acts
		f.store = &flakyStore{Ledger: f.ledger}
		f.opt.Admissions = f.acts
	}
}

// post sends a JSON POST from any goroutine (no t.Fatal): the status and
// the decoded answer.
func (f *fixture) post(path, token string, body any) (int, map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest("POST", f.api.URL+"/api/v1/repos/acme/app/"+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return res.StatusCode, nil, fmt.Errorf("%s: %w", raw, err)
	}
	return res.StatusCode, out, nil
}

func TestClaimRequestID(t *testing.T) {
	type step struct {
		name   string
		path   string // under items/
		token  string
		body   map[string]any
		status int
		check  func(t *testing.T, r resp, first resp)
		before func(f *fixture)
	}
	same := func(t *testing.T, r, first resp) {
		t.Helper()
		if r.body["granted"] != true || r.body["replayed"] != true || r.num("fencingToken") != first.num("fencingToken") ||
			r.str("leaseExpiresAtUtc") != first.str("leaseExpiresAtUtc") || r.num("leaseSeconds") != first.num("leaseSeconds") {
			t.Fatalf("resend %s, want the first grant %s", r.raw, first.raw)
		}
	}
	reused := func(t *testing.T, r, _ resp) {
		t.Helper()
		if r.str("reason") != ReasonKeyReused || !strings.Contains(r.str("detail"), "another request") {
			t.Fatalf("reuse %s", r.raw)
		}
	}
	claim := map[string]any{"owner": "w1/run-1", "leaseSeconds": 60, "requestId": "9b2c1d7e-0000-4000-8000-000000000001"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range claim {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a resend returns the same grant", []step{
			{name: "resend after 5s", path: "issue-1/claim", token: tokWorker1, body: claim, status: 200, check: same,
				before: func(f *fixture) { f.clock.Advance(5 * time.Second) }},
			{name: "and again", path: "issue-1/claim", token: tokWorker1, body: claim, status: 200, check: same},
			{name: "without the id: contended", path: "issue-1/claim", token: tokWorker1, body: with("requestId", nil), status: 200,
				check: func(t *testing.T, r, _ resp) {
					if r.str("reason") != "contended" || r.body["replayed"] != nil {
						t.Fatalf("%s", r.raw)
					}
				}},
		}},
		{"a different body is refused", []step{
			{name: "another lease", path: "issue-1/claim", token: tokWorker1, body: with("leaseSeconds", 61), status: 422, check: reused},
			{name: "another owner", path: "issue-1/claim", token: tokWorker1, body: with("owner", "w1/run-2"), status: 422, check: reused},
			{name: "another item", path: "issue-2/claim", token: tokWorker1, body: claim, status: 422, check: reused},
			{name: "a branch", path: "issue-1/claim", token: tokWorker1, body: with("branch", "feat/x"), status: 422, check: reused},
			{name: "a renew", path: "issue-1/renew", token: tokWorker1, body: map[string]any{"fencingToken": 1, "leaseSeconds": 60, "requestId": claim["requestId"]},
				status: 422, check: reused},
			{name: "another token's id is its own", path: "issue-2/claim", token: tokWorker2,
				body: map[string]any{"owner": "w2/run-1", "leaseSeconds": 60, "requestId": claim["requestId"]}, status: 200,
				check: func(t *testing.T, r, _ resp) {
					if r.body["granted"] != true || r.body["replayed"] != nil {
						t.Fatalf("%s", r.raw)
					}
				}},
		}},
		{"expired: the old grant is not handed out again", []step{
			{name: "resend after the lease", path: "issue-1/claim", token: tokWorker1, body: claim, status: 200,
				before: func(f *fixture) { f.clock.Advance(2 * time.Minute) },
				check: func(t *testing.T, r, first resp) {
					if r.body["granted"] != true || r.body["replayed"] != nil || r.num("fencingToken") != first.num("fencingToken")+1 {
						t.Fatalf("resend after the lease %s, want a new grant (fence %v+1)", r.raw, first.num("fencingToken"))
					}
				}},
		}},
		{"hostile ids", []step{
			{name: "empty", path: "issue-2/claim", token: tokWorker1, body: with("requestId", ""), status: 422},
			{name: "spaces", path: "issue-2/claim", token: tokWorker1, body: with("requestId", "a b"), status: 422},
			{name: "too long", path: "issue-2/claim", token: tokWorker1, body: with("requestId", strings.Repeat("a", 129)), status: 422},
			{name: "control", path: "issue-2/claim", token: tokWorker1, body: with("requestId", "a\u0000b"), status: 422},
			{name: "unicode", path: "issue-2/claim", token: tokWorker1, body: with("requestId", "идентификатор"), status: 422},
			{name: "a number", path: "issue-2/claim", token: tokWorker1, body: with("requestId", 7), status: 422},
			{name: "longest", path: "issue-2/claim", token: tokWorker1, body: with("requestId", strings.Repeat("a", 128)), status: 200},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(1, nil)
			f.seed(2, nil)
			first := f.must(f.call("POST", "items/issue-1/claim", tokWorker1, claim), 200)
			if first.body["granted"] != true || first.body["replayed"] != nil {
				t.Fatalf("first send %s", first.raw)
			}
			for _, s := range c.steps {
				if s.before != nil {
					s.before(f)
				}
				r := f.call("POST", "items/"+s.path, s.token, s.body)
				if r.status != s.status {
					t.Fatalf("%s: status %d, want %d: %s", s.name, r.status, s.status, r.raw)
				}
				if s.status == 422 && s.check == nil {
					f.problemIs(r, 422, ReasonInvalidRequest, "requestId")
				}
				if s.check != nil {
					s.check(t, r, first)
				}
			}
		})
	}
}

func TestRenewReleaseRequestID(t *testing.T) {
	f := newFixture(t)
	f.seed(1, nil)
	c := f.must(f.call("POST", "items/issue-1/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 60}), 200)
	tok := c.num("fencingToken")
	f.clock.Advance(10 * time.Second)
	renew := map[string]any{"fencingToken": tok, "leaseSeconds": 600, "requestId": "renew-1"}
	rn := f.must(f.call("POST", "items/issue-1/renew", tokWorker1, renew), 200)
	f.clock.Advance(10 * time.Second)
	again := f.must(f.call("POST", "items/issue-1/renew", tokWorker1, renew), 200)
	if again.body["replayed"] != true || again.str("leaseExpiresAtUtc") != rn.str("leaseExpiresAtUtc") {
		t.Fatalf("renew resend %s, want %s", again.raw, rn.raw)
	}
	release := map[string]any{"fencingToken": tok, "requestId": "release-1"}
	rel := f.must(f.call("POST", "items/issue-1/release", tokWorker1, release), 200)
	if rel.body["released"] != true {
		t.Fatalf("release %s", rel.raw)
	}
	// The resend of a release that released: released again, not stale.
	rel2 := f.must(f.call("POST", "items/issue-1/release", tokWorker1, release), 200)
	if rel2.body["released"] != true || rel2.body["replayed"] != true || rel2.body["reason"] != nil {
		t.Fatalf("release resend %s", rel2.raw)
	}
	f.problemIs(f.call("POST", "items/issue-1/release", tokWorker1, map[string]any{"fencingToken": tok + 1, "requestId": "release-1"}), 422, ReasonKeyReused)
	f.problemIs(f.call("POST", "items/issue-1/renew", tokWorker1, map[string]any{"fencingToken": tok, "requestId": "bad id"}), 422, ReasonInvalidRequest, "requestId")
}

func TestLeaseDefaulted(t *testing.T) {
	f := newFixture(t)
	f.seed(1, nil)
	f.seed(2, nil)
	d := f.must(f.call("POST", "items/issue-1/claim", tokWorker1, map[string]any{"owner": "w1/run-1"}), 200)
	if d.body["granted"] != true || d.body["leaseDefaulted"] != true || d.num("leaseSeconds") != 30 {
		t.Fatalf("claim without leaseSeconds %s", d.raw)
	}
	x := f.must(f.call("POST", "items/issue-2/claim", tokWorker1, map[string]any{"owner": "w1/run-2", "leaseSeconds": 600}), 200)
	if x.body["leaseDefaulted"] != false {
		t.Fatalf("claim with leaseSeconds %s", x.raw)
	}
	rep := f.must(f.call("GET", "report", tokPM, nil), 200)
	var report gating.Report
	if err := json.Unmarshal(rep.raw, &report); err != nil {
		t.Fatal(err)
	}
	flagged := map[gating.ItemID]bool{}
	for _, e := range report.InFlight {
		flagged[e.Item] = e.LeaseDefaulted
	}
	if !flagged["issue-1"] || flagged["issue-2"] || len(report.Lines) != 1 || report.Lines[0].Code != gating.CodeLeaseDefaulted ||
		report.Lines[0].Item != "issue-1" || !strings.Contains(report.Lines[0].Detail, "w1/run-1") {
		t.Fatalf("report in flight %+v lines %+v", report.InFlight, report.Lines)
	}
	// A renew without leaseSeconds defaults it (and says so); one with it
	// clears the line.
	rn := f.must(f.call("POST", "items/issue-2/renew", tokWorker1, map[string]any{"fencingToken": x.num("fencingToken")}), 200)
	if rn.body["leaseDefaulted"] != true || rn.body["leaseShortened"] != true {
		t.Fatalf("renew without leaseSeconds %s", rn.raw)
	}
	f.must(f.call("POST", "items/issue-1/renew", tokWorker1, map[string]any{"fencingToken": d.num("fencingToken"), "leaseSeconds": 600}), 200)
	rep = f.must(f.call("GET", "report", tokPM, nil), 200)
	lines := rep.body["lines"].([]any)
	if len(lines) != 1 || lines[0].(map[string]any)["item"] != "issue-2" || !strings.Contains(lines[0].(map[string]any)["detail"].(string), "last renewed") {
		t.Fatalf("lines after the renews %s", rep.raw)
	}
}

func TestClaimStatusGrantedAt(t *testing.T) {
	f := newFixture(t)
	f.seed(1, nil)
	if st := f.must(f.call("GET", "items/issue-1/claim", tokWorker1, nil), 200); st.body["grantedAt"] != nil {
		t.Fatalf("never claimed %s", st.raw)
	}
	at := store.Timestamp(f.clock.Now().Truncate(time.Millisecond))
	c := f.must(f.call("POST", "items/issue-1/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 60}), 200)
	f.clock.Advance(30 * time.Second)
	f.must(f.call("POST", "items/issue-1/renew", tokWorker1, map[string]any{"fencingToken": c.num("fencingToken"), "leaseSeconds": 60}), 200)
	st := f.must(f.call("GET", "items/issue-1/claim", tokWorker1, nil), 200)
	if st.str("grantedAt") != at || st.str("state") != "held" {
		t.Fatalf("status %s, want grantedAt %s (the grant's time, not the renew's)", st.raw, at)
	}
}

func TestOwnerCapOnClaim(t *testing.T) {
	f := newFixture(t, withOwnerCap(2))
	for n := 1; n <= 4; n++ {
		f.seed(n, nil)
	}
	for _, c := range []struct {
		item, token, owner string
		granted            bool
	}{
		{"issue-1", tokWorker1, "w1/run-1", true},
		{"issue-2", tokWorker1, "w1/run-2", true},
		{"issue-3", tokWorker1, "w1/run-3", false}, // a new run name does not lift the cap
		{"issue-3", tokWorker2, "w2/run-1", true},  // another agent
		{"issue-4", tokPM, "w1/on-behalf", false},  // the owner, not the token, is capped
	} {
		r := f.must(f.call("POST", "items/"+c.item+"/claim", c.token, map[string]any{"owner": c.owner, "leaseSeconds": 60}), 200)
		if c.granted && r.body["granted"] != true {
			t.Fatalf("%s for %s: %s", c.item, c.owner, r.raw)
		}
		if !c.granted && (r.body["granted"] != false || r.str("reason") != "not-ready" || r.str("exclusion") != gating.ExOwnerCap) {
			t.Fatalf("%s for %s: %s, want not-ready owner-cap", c.item, c.owner, r.raw)
		}
	}
	// /ready/claim refuses at once: the owner is the same for every candidate.
	r := f.must(f.call("POST", "ready/claim", tokWorker1, map[string]any{"owner": "w1/run-9", "leaseSeconds": 60}), 200)
	if r.body["granted"] != false || r.str("reason") != "not-ready" || r.str("exclusion") != gating.ExOwnerCap || len(r.body["tried"].([]any)) != 1 {
		t.Fatalf("/ready/claim over the cap %s", r.raw)
	}
}

func TestClaimNext(t *testing.T) {
	anchored := func(p string) gating.Link { return gating.Link{Rel: gating.AnchoredTo, Target: p} }
	type want struct {
		granted   bool
		item      string // when granted
		reason    string
		exclusion string
		excluded  map[string]float64
	}
	cases := []struct {
		name  string
		setup func(f *fixture)
		body  map[string]any
		want  []want // successive calls
	}{
		{"the best item: priority first", func(f *fixture) {
			f.seed(1, []string{"priority:P2"})
			f.seed(2, []string{"priority:P0"})
		}, nil, []want{{granted: true, item: "issue-2"}, {granted: true, item: "issue-1"},
			{reason: "not-ready", excluded: map[string]float64{gating.ExHeld: 2}}}},
		{"disjointness: an item overlapping work in flight comes after a disjoint one", func(f *fixture) {
			f.seed(1, nil, anchored("src/a.go"))
			f.seed(2, []string{"priority:P0"}, anchored("src/a.go"))
			f.seed(3, []string{"priority:P3"})
			f.must(f.call("POST", "items/issue-1/claim", tokWorker2, map[string]any{"owner": "w2/run-1", "leaseSeconds": 600}), 200)
		}, nil, []want{{granted: true, item: "issue-3"}, {granted: true, item: "issue-2"}}},
		{"resources: an item whose resource is in use is never a candidate", func(f *fixture) {
			f.seed(1, []string{"resource:gpu"})
			f.seed(2, []string{"resource:gpu", "priority:P0"})
			f.must(f.call("POST", "items/issue-1/claim", tokWorker2, map[string]any{"owner": "w2/run-1", "leaseSeconds": 600}), 200)
		}, nil, []want{{reason: "not-ready", excluded: map[string]float64{gating.ExHeld: 1, gating.ExResourceBusy: 1}}}},
		{"nothing ready: why", func(f *fixture) {
			f.seed(1, nil)
			f.seed(2, nil, gating.Link{Rel: gating.BlockedBy, Target: "issue-1"})
			f.seed(3, []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"})
			f.must(f.call("POST", "items/issue-1/claim", tokWorker2, map[string]any{"owner": "w2/run-1", "leaseSeconds": 600}), 200)
		}, nil, []want{{reason: "not-ready", excluded: map[string]float64{gating.ExHeld: 1, gating.ExBlocked: 1, gating.ExParked: 1}}}},
		{"an empty backlog", func(f *fixture) {}, nil, []want{{reason: "not-ready", excluded: map[string]float64{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.setup(f)
			for i, w := range c.want {
				body := c.body
				if body == nil {
					body = map[string]any{"owner": fmt.Sprintf("w1/run-%d", i), "leaseSeconds": 600}
				}
				r := f.must(f.call("POST", "ready/claim", tokWorker1, body), 200)
				if w.granted {
					if r.body["granted"] != true || r.str("item") != w.item || r.str("key") != w.item || r.str("owner") != body["owner"] ||
						r.num("leaseSeconds") != 600 || r.body["leaseDefaulted"] != false || r.body["excluded"] == nil {
						t.Fatalf("call %d: %s, want %s granted", i, r.raw, w.item)
					}
					continue
				}
				if r.body["granted"] != false || r.str("reason") != w.reason || r.str("exclusion") != w.exclusion || r.str("item") != "" ||
					r.body["fencingToken"] != nil || r.num("readyCount") != 0 {
					t.Fatalf("call %d: %s, want %s", i, r.raw, w.reason)
				}
				got := map[string]float64{}
				for k, v := range r.body["excluded"].(map[string]any) {
					got[k] = v.(float64)
				}
				for k, v := range w.excluded {
					if got[k] != v {
						t.Fatalf("call %d: excluded %v, want %v: %s", i, got, w.excluded, r.raw)
					}
				}
			}
		})
	}
}

// TestClaimNextConcurrent: claimants calling at once each get their own
// item, and none is given an item another holds.
func TestClaimNextConcurrent(t *testing.T) {
	f := newFixture(t)
	const items, claimants = 6, 8
	for n := 1; n <= items; n++ {
		f.seed(n, nil)
	}
	var wg sync.WaitGroup
	out := make([]map[string]any, claimants)
	errs := make([]error, claimants)
	for i := range claimants {
		wg.Go(func() {
			tok, owner := tokWorker1, fmt.Sprintf("w1/run-%d", i)
			if i%2 == 1 {
				tok, owner = tokWorker2, fmt.Sprintf("w2/run-%d", i)
			}
			var status int
			status, out[i], errs[i] = f.post("ready/claim", tok, map[string]any{"owner": owner, "leaseSeconds": 600, "requestId": fmt.Sprintf("next-%d", i)})
			if errs[i] == nil && status != 200 {
				errs[i] = fmt.Errorf("status %d: %v", status, out[i])
			}
		})
	}
	wg.Wait()
	got := map[string]string{}
	refused := 0
	for i := range claimants {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if out[i]["granted"] != true {
			refused++
			if r := out[i]["reason"]; r != "contended" && r != "not-ready" {
				t.Fatalf("claimant %d: %v", i, out[i])
			}
			continue
		}
		item := out[i]["item"].(string)
		if prev, dup := got[item]; dup {
			t.Fatalf("%s granted to %s and to %s", item, prev, out[i]["owner"])
		}
		got[item] = out[i]["owner"].(string)
	}
	if len(got) != items || refused != claimants-items {
		t.Fatalf("%d items granted, %d refused: %v", len(got), refused, got)
	}
	// Each grant is the one the ledger holds.
	for item, owner := range got {
		if st := f.must(f.call("GET", "items/"+item+"/claim", tokPM, nil), 200); st.str("owner") != owner || st.str("state") != "held" {
			t.Fatalf("%s: %s, want held by %s", item, st.raw, owner)
		}
	}
}

func TestClaimNextRequestID(t *testing.T) {
	f := newFixture(t)
	f.seed(1, nil)
	f.seed(2, nil)
	body := map[string]any{"owner": "w1/run-1", "leaseSeconds": 120, "requestId": "next-1"}
	first := f.must(f.call("POST", "ready/claim", tokWorker1, body), 200)
	if first.body["granted"] != true {
		t.Fatalf("first %s", first.raw)
	}
	// The resend (the first answer was lost) answers the same grant, not
	// a second item.
	again := f.must(f.call("POST", "ready/claim", tokWorker1, body), 200)
	if again.body["replayed"] != true || again.str("item") != first.str("item") || again.num("fencingToken") != first.num("fencingToken") ||
		again.str("leaseExpiresAtUtc") != first.str("leaseExpiresAtUtc") {
		t.Fatalf("resend %s, want %s", again.raw, first.raw)
	}
	other := f.call("POST", "ready/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 60, "requestId": "next-1"})
	f.problemIs(other, 422, ReasonKeyReused)
	// A fresh id claims the next item.
	next := f.must(f.call("POST", "ready/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 120, "requestId": "next-2"}), 200)
	if next.body["granted"] != true || next.str("item") == first.str("item") {
		t.Fatalf("a fresh id %s", next.raw)
	}
	items := []string{first.str("item"), next.str("item")}
	slices.Sort(items)
	if !slices.Equal(items, []string{"issue-1", "issue-2"}) {
		t.Fatalf("items %v", items)
	}
}

func TestClaimNextRequest(t *testing.T) {
	f := newFixture(t)
	f.seed(1, nil)
	for _, c := range []struct {
		name   string
		token  string
		body   any
		status int
		reason string
		field  string
	}{
		{"no lease", tokWorker1, map[string]any{"owner": "w1/run-1"}, 422, ReasonInvalidRequest, "leaseSeconds"},
		{"a zero lease", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 0}, 422, ReasonInvalidRequest, "leaseSeconds"},
		{"no owner", tokWorker1, map[string]any{"leaseSeconds": 60}, 422, ReasonInvalidRequest, "owner"},
		{"a branch", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 60, "branch": "x"}, 422, ReasonInvalidRequest, "branch"},
		{"a bad id", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 60, "requestId": "x y"}, 422, ReasonInvalidRequest, "requestId"},
		{"another's owner", tokWorker1, map[string]any{"owner": "w2/run-1", "leaseSeconds": 60}, 403, ReasonOwnerNotAllowed, ""},
		{"no token", "", map[string]any{"owner": "w1/run-1", "leaseSeconds": 60}, 401, ReasonUnauthenticated, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.call("POST", "ready/claim", c.token, c.body)
			if c.field != "" {
				f.problemIs(r, c.status, c.reason, c.field)
			} else {
				f.problemIs(r, c.status, c.reason)
			}
		})
	}
	if st := f.must(f.call("GET", "items/issue-1/claim", tokPM, nil), 200); st.body["claimed"] != false {
		t.Fatalf("a refused request claimed: %s", st.raw)
	}
}
