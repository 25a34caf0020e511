package agentapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// refusalCase is one request and the refusal (or answer) it must get: the
// status, the reason, the field at fault, what the detail must say and
// what it must not.
type refusalCase struct {
	name, method, path, token string
	body                      any
	status                    int
	reason, field             string
	says, never               []string
}

// checkRefusal sends c and checks the answer, reporting on t (a subtest's:
// every case runs even when one fails).
func (f *fixture) checkRefusal(t *testing.T, c refusalCase) resp {
	t.Helper()
	r := f.call(c.method, c.path, c.token, c.body)
	if r.status != c.status {
		t.Errorf("status %d, want %d: %s", r.status, c.status, r.raw)
	}
	if c.reason == "" {
		return r
	}
	if r.str("reason") != c.reason || int(r.num("status")) != c.status || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("want a %d %q problem: %s", c.status, c.reason, r.raw)
	}
	if r.str("field") != c.field {
		t.Errorf("the problem names field %q, want %q: %s", r.str("field"), c.field, r.raw)
	}
	d := r.str("detail")
	for _, s := range c.says {
		if !strings.Contains(d, s) {
			t.Errorf("detail %q does not say %q", d, s)
		}
	}
	for _, s := range c.never {
		if strings.Contains(d, s) {
			t.Errorf("detail %q says %q, which is not true here", d, s)
		}
	}
	return r
}

// TestFenceRefusalsSayWhatIsTrue: every refusal on a fencing token keeps the
// contract's reason and says what is actually true of the item's claim —
// never claimed, released, held, abandoned, superseded — with no "fence 0"
// and no "live claim" where there is none.
func TestFenceRefusalsSayWhatIsTrue(t *testing.T) {
	f := newFixture(t)
	for n := 1; n <= 5; n++ {
		f.seed(n, nil)
	}
	claim := func(n int, tok, owner string, lease float64) int64 {
		t.Helper()
		c := f.must(f.call("POST", fmt.Sprintf("items/issue-%d/claim", n), tok, map[string]any{"owner": owner, "leaseSeconds": lease}), 200)
		if c.body["granted"] != true {
			t.Fatalf("claim of issue-%d: %s", n, c.raw)
		}
		return int64(c.num("fencingToken"))
	}
	release := func(n int, tok string, fence int64) {
		t.Helper()
		if r := f.must(f.call("POST", fmt.Sprintf("items/issue-%d/release", n), tok, map[string]any{"fencingToken": fence}), 200); r.body["released"] != true {
			t.Fatalf("release of issue-%d: %s", n, r.raw)
		}
	}
	// issue-5: claimed, then its lease ran out with no evidence of work for
	// the whole quarantine (abandoned, not released).
	claim(5, tokWorker1, "w1/a", 60)
	f.clock.Advance(2 * time.Hour)
	// issue-1: never claimed. issue-2: held. issue-3: claimed and released.
	// issue-4: released by w1, then claimed by w2 (fence 2).
	claim(2, tokWorker1, "w1/a", 600)
	release(3, tokWorker1, claim(3, tokWorker1, "w1/a", 600))
	release(4, tokWorker1, claim(4, tokWorker1, "w1/a", 600))
	if fence := claim(4, tokWorker2, "w2/a", 600); fence != 2 {
		t.Fatalf("issue-4's second claim is fence %d, want 2", fence)
	}
	complete := func(token any) map[string]any {
		m := map[string]any{"addTags": []string{"state:complete", "pr:77"}}
		if token != nil {
			m["fencingToken"] = token
		}
		return m
	}
	tech := []string{"fence 0", "refused (fence", "no token refused"}
	for _, c := range []refusalCase{
		{name: "completion of a never-claimed item", method: "PATCH", path: "items/issue-1", token: tokPM, body: complete(nil),
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-1 has never been claimed", "state:complete", "no claim to write under", "claim the item first", "maintenance claim"},
			never: append([]string{"live claim", "is under", "present its fencing token"}, tech...)},
		{name: "completion of a never-claimed item with a made-up token", method: "PATCH", path: "items/issue-1", token: tokPM, body: complete(1),
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-1 has never been claimed", "fencing token 1 was never issued", "claim the item first"},
			never: append([]string{"live claim", "is under"}, tech...)},
		{name: "resume block of a never-claimed item", method: "PATCH", path: "items/issue-1", token: tokHuman, body: map[string]any{"body": "lastLocation: x"},
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-1 has never been claimed", "the resume block (body)", "claim the item first"},
			never: append([]string{"live claim", "maintenance", "state:complete"}, tech...)},
		{name: "completion after the claim was released, no token", method: "PATCH", path: "items/issue-3", token: tokPM, body: complete(nil),
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-3's last claim, at fence 1 by w1/a, was released", "no claim holds the item now", "claim the item again"},
			never: append([]string{"is under", "never been claimed"}, tech...)},
		{name: "completion under a released claim's token", method: "PATCH", path: "items/issue-3", token: tokPM, body: complete(1),
			status: 409, reason: string(gating.ClaimReleased),
			says:  []string{"fencing token 1 belongs to the claim at fence 1 by w1/a, which was released", "claim the item again"},
			never: tech},
		{name: "a write without a token to a held item", method: "PATCH", path: "items/issue-2", token: tokPM, body: map[string]any{"title": "x"},
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-2 is under the claim at fence 1 by w1/a (held until ", "presents no fencing token", "this write needs that claim's fencing token"},
			never: append([]string{"never been claimed", "released"}, tech...)},
		{name: "a write without a token to an abandoned claim", method: "PATCH", path: "items/issue-5", token: tokPM, body: map[string]any{"title": "x"},
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-5 is under the claim at fence 1 by w1/a, abandoned", "never released", "a new claim supersedes"},
			never: append([]string{"held", "never been claimed"}, tech...)},
		{name: "a stale token", method: "PATCH", path: "items/issue-4", token: tokPM, body: map[string]any{"title": "x", "fencingToken": 1},
			status: 409, reason: string(gating.StaleToken),
			says:  []string{"fencing token 1 is older than issue-4's current fence 2", "w2/a", "held until"},
			never: tech},
		{name: "a token never issued", method: "PATCH", path: "items/issue-2", token: tokPM, body: map[string]any{"title": "x", "fencingToken": 9},
			status: 409, reason: string(gating.UnissuedToken),
			says:  []string{"fencing token 9 was never issued for issue-2", "at fence 1 by w1/a"},
			never: tech},
		{name: "a fencing token of 0", method: "PATCH", path: "items/issue-1", token: tokPM, body: map[string]any{"title": "x", "fencingToken": 0},
			status: 422, reason: ReasonInvalidRequest, field: "fencingToken",
			says: []string{"fencingToken 0 is no fencing token", "from 1 upwards"}},
		{name: "a renew with a fencing token of 0", method: "POST", path: "items/issue-2/renew", token: tokWorker1, body: map[string]any{"fencingToken": 0},
			status: 422, reason: ReasonInvalidRequest, field: "fencingToken",
			says: []string{"fencingToken 0 is no fencing token"}, never: []string{"leave fencingToken out"}},
		{name: "forgetting a held item without its token", method: "DELETE", path: "items/issue-2", token: tokPM,
			status: 409, reason: string(gating.ClaimRequired),
			says:  []string{"issue-2 is under the claim at fence 1 by w1/a", "forgetting issue-2 needs that claim's fencing token"},
			never: tech},
		{name: "forgetting with a query token of 0", method: "DELETE", path: "items/issue-2?fencingToken=0", token: tokPM,
			status: 422, reason: ReasonInvalidRequest, field: "fencingToken",
			says: []string{"fencingToken 0 is no fencing token"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.checkRefusal(t, c)
			if c.status != 409 {
				return
			}
			if r.str("item") == "" {
				t.Errorf("the problem does not name the item: %s", r.raw)
			}
			// A never-claimed item has no fence: currentFencingToken is left
			// out rather than given as 0.
			if strings.Contains(c.name, "never-claimed") {
				if _, ok := r.body["currentFencingToken"]; ok {
					t.Errorf("a never-claimed item's refusal gives currentFencingToken: %s", r.raw)
				}
			} else if r.num("currentFencingToken") < 1 {
				t.Errorf("currentFencingToken missing: %s", r.raw)
			}
			body, _ := c.body.(map[string]any)
			if tok, ok := body["fencingToken"]; ok && r.num("presentedFencingToken") != float64(tok.(int)) {
				t.Errorf("presentedFencingToken %v, want %v: %s", r.body["presentedFencingToken"], tok, r.raw)
			}
		})
	}
	// Nothing was written by any of them.
	if g := f.must(f.call("GET", "items/issue-1", tokPM, nil), 200); strings.Contains(string(g.raw), "state:complete") || g.str("body") != "" {
		t.Fatalf("a refused write was written: %s", g.raw)
	}
}

// TestClaimOwnerNeedsARunName: an owner is a name, "/" and a run name; an
// empty, blank or malformed run name is refused on every claim route
// (ordinary and maintenance), naming the owner and what is wrong, and
// nothing is granted.
func TestClaimOwnerNeedsARunName(t *testing.T) {
	f := newFixture(t)
	n := 100
	for _, c := range []refusalCase{
		{name: "worker, empty run name", token: tokWorker1, body: map[string]any{"owner": "w1/"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "w1/"`, "run name", "is empty", `"w1/run-1"`}},
		{name: "worker, blank run name", token: tokWorker1, body: map[string]any{"owner": "w1/ "},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "w1/ "`, "only white space"}},
		{name: "worker, tab run name", token: tokWorker1, body: map[string]any{"owner": "w1/\t"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{"only white space"}},
		{name: "worker, run name with a space", token: tokWorker1, body: map[string]any{"owner": "w1/run 1"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "w1/run 1"`, "white space"}},
		{name: "worker, run name after a double slash", token: tokWorker1, body: map[string]any{"owner": "w1//x"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "w1//x"`, "empty part"}},
		{name: "worker, run name with a trailing slash", token: tokWorker1, body: map[string]any{"owner": "w1/x/"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "w1/x/"`, "empty part"}},
		{name: "worker, run name of punctuation", token: tokWorker1, body: map[string]any{"owner": "w1/-x"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "w1/-x"`, "does not begin with a letter or a digit"}},
		{name: "pm maintenance claim, empty run name", token: tokPM, body: map[string]any{"owner": "pm/", "purpose": "maintenance"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "pm/"`, "is empty"}},
		{name: "human, empty run name", token: tokHuman, body: map[string]any{"owner": "alice/"},
			status: 422, reason: ReasonInvalidRequest, field: "owner", says: []string{`owner "alice/"`, "is empty"}},
		{name: "worker, another token's owner", token: tokWorker1, body: map[string]any{"owner": "w2/run-1"},
			status: 403, reason: ReasonOwnerNotAllowed, says: []string{`"w1/"`, `"w2/run-1"`}},
		{name: "worker, its own owner", token: tokWorker1, body: map[string]any{"owner": "w1/run-1"}, status: 200},
		{name: "pm, an owner with no run part", token: tokPM, body: map[string]any{"owner": "pm"}, status: 200},
		{name: "pm maintenance claim, its own owner", token: tokPM, body: map[string]any{"owner": "pm/repair", "purpose": "maintenance"}, status: 200},
	} {
		n++
		f.seed(n, nil)
		c.method, c.path = "POST", fmt.Sprintf("items/issue-%d/claim", n)
		t.Run(c.name, func(t *testing.T) {
			r := f.checkRefusal(t, c)
			st := f.must(f.call("GET", fmt.Sprintf("items/issue-%d/claim", n), tokPM, nil), 200)
			if granted := c.status == 200; (r.body["granted"] == true) != granted || (st.body["claimed"] == true) != granted {
				t.Errorf("claimed %v after %s, want %v", st.body["claimed"], r.raw, granted)
			}
		})
	}
}

// TestEdgesArePMs: blockedBy, partOf, integrates and informs are edges, a
// pm power (CONTRACT.md §4): a worker adds none and removes none, even
// under its own live claim (HumanActRequired, naming the edge and the
// roles that may); it may still write anchoredTo and related links under
// its claim, and a pm or human edits edges.
func TestEdgesArePMs(t *testing.T) {
	f := newFixture(t)
	for n := 10; n <= 13; n++ {
		f.seed(n, nil)
	}
	c := f.must(f.call("POST", "items/issue-10/claim", tokWorker1, map[string]any{"owner": "w1/a", "leaseSeconds": 600}), 200)
	fence := int64(c.num("fencingToken"))
	link := func(rel, target string) []any { return []any{map[string]any{"rel": rel, "target": target}} }
	add := func(rel, target string) map[string]any {
		return map[string]any{"addLinks": link(rel, target), "fencingToken": fence}
	}
	remove := func(rel, target string) map[string]any {
		return map[string]any{"removeLinks": link(rel, target), "fencingToken": fence}
	}
	// The pm's edges under the worker's claim, for the removals below.
	f.must(f.call("PATCH", "items/issue-10", tokPM, map[string]any{"addLinks": append(link("blockedBy", "issue-12"), link("informs", "issue-13")...), "fencingToken": fence}), 200)

	human := string(gating.RoleHuman)
	for _, c := range []refusalCase{
		{name: "worker adds blockedBy", token: tokWorker1, body: add("blockedBy", "issue-11"), status: 403, reason: ReasonHumanAct,
			says: []string{"adding the blockedBy edge from issue-10 to issue-11", "needs a pm or " + human + " token", "worker"}},
		{name: "worker adds blockedBy by protocol key", token: tokWorker1, body: add("blockedBy", "repo/app/mem/backlog/issue-11"), status: 403, reason: ReasonHumanAct,
			says: []string{"blockedBy edge from issue-10 to issue-11"}},
		{name: "worker adds partOf", token: tokWorker1, body: add("partOf", "issue-11"), status: 403, reason: ReasonHumanAct,
			says: []string{"adding the partOf edge from issue-10 to issue-11", "pm or human"}},
		{name: "worker adds integrates", token: tokWorker1, body: add("integrates", "issue-11"), status: 403, reason: ReasonHumanAct,
			says: []string{"adding the integrates edge", "pm or human"}},
		{name: "worker adds informs", token: tokWorker1, body: add("informs", "issue-11"), status: 403, reason: ReasonHumanAct,
			says: []string{"adding the informs edge", "pm or human"}},
		{name: "worker removes blockedBy", token: tokWorker1, body: remove("blockedBy", "issue-12"), status: 403, reason: ReasonHumanAct,
			says: []string{"removing the blockedBy edge from issue-10 to issue-12", "pm or human", "edge-removed"}},
		{name: "worker removes informs", token: tokWorker1, body: remove("informs", "issue-13"), status: 403, reason: ReasonHumanAct,
			says: []string{"removing the informs edge from issue-10 to issue-13", "pm or human"}, never: []string{"edge-removed"}},
		{name: "worker adds an edge among allowed links", token: tokWorker1,
			body:   map[string]any{"addLinks": append(link("anchoredTo", "docs/a.md"), link("blockedBy", "issue-11")...), "fencingToken": fence},
			status: 403, reason: ReasonHumanAct, says: []string{"blockedBy edge from issue-10 to issue-11"}},
		{name: "worker adds anchoredTo under its claim", token: tokWorker1, body: add("anchoredTo", "docs/a.md"), status: 200},
		{name: "worker adds related under its claim", token: tokWorker1, body: add("related", "issue-11"), status: 200},
		{name: "pm adds blockedBy", token: tokPM, body: add("blockedBy", "issue-11"), status: 200},
		{name: "human removes informs", token: tokHuman, body: remove("informs", "issue-13"), status: 200},
	} {
		c.method, c.path = "PATCH", "items/issue-10"
		t.Run(c.name, func(t *testing.T) {
			before := f.must(f.call("GET", "items/issue-10", tokPM, nil), 200)
			f.checkRefusal(t, c)
			if c.status != 200 {
				if after := f.must(f.call("GET", "items/issue-10", tokPM, nil), 200); fmt.Sprint(after.body["links"]) != fmt.Sprint(before.body["links"]) {
					t.Errorf("a refused edge edit changed the links: %v, then %v", before.body["links"], after.body["links"])
				}
			}
		})
	}
}

// TestFenceDetailOfEveryState covers the claim states the HTTP test cannot
// reach cheaply (lapsed, a claim of another region, a status that could not
// be read or moved on since the refusal): each says only what is true.
func TestFenceDetailOfEveryState(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	live := func(state string) *store.ClaimStatus {
		return &store.ClaimStatus{Exists: true, Claimed: true, State: state, FencingToken: i64(3), Owner: str("w1/a"), Region: str("eu")}
	}
	for _, c := range []struct {
		name      string
		fe        store.FenceError
		presented *int64
		st        *store.ClaimStatus
		region    string
		says      []string
		never     []string
	}{
		{name: "lapsed, no token", fe: store.FenceError{Verdict: gating.ClaimRequired, Item: "issue-7", Current: 3}, st: live("lapsed"),
			says: []string{"issue-7 is under the claim at fence 3 by w1/a (lapsed", "quarantined", "this write needs that claim's fencing token"}, never: []string{"held"}},
		{name: "another region", fe: store.FenceError{Verdict: gating.ForeignRegion, Item: "issue-7", Current: 3, Presented: i64(3)}, st: live("held"), region: "us",
			says: []string{"fencing token 3 belongs to the claim at fence 3 by w1/a, taken in region eu", "this replica serves region us"}},
		{name: "another region, nothing known", fe: store.FenceError{Verdict: gating.ForeignRegion, Item: "issue-7", Current: 3, Presented: i64(3)},
			says: []string{"taken in another region", "this replica serves another region"}},
		{name: "status unreadable", fe: store.FenceError{Verdict: gating.ClaimRequired, Item: "issue-7", Current: 3},
			says: []string{"fence is 3", "GET /items/issue-7/claim"}, never: []string{"never been claimed", "released", "w1/a"}},
		{name: "status moved on since the refusal", fe: store.FenceError{Verdict: gating.ClaimRequired, Item: "issue-7", Current: 2}, st: live("held"),
			says: []string{"fence is 2"}, never: []string{"fence 3", "w1/a"}},
		{name: "a token the refusal carries wins", fe: store.FenceError{Verdict: gating.StaleToken, Item: "issue-7", Current: 3, Presented: i64(1)}, presented: i64(2), st: live("held"),
			says: []string{"fencing token 1 is older than issue-7's current fence 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := fenceDetail(&c.fe, c.presented, c.st, "this write", c.region)
			for _, s := range c.says {
				if !strings.Contains(d, s) {
					t.Errorf("detail %q does not say %q", d, s)
				}
			}
			for _, s := range c.never {
				if strings.Contains(d, s) {
					t.Errorf("detail %q says %q", d, s)
				}
			}
		})
	}
}
