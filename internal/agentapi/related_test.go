package agentapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/wardenhq/warden/gating"
)

func anchor(p string) gating.Link { return gating.Link{Rel: gating.AnchoredTo, Target: p} }

// TestRelatedRadius: GET /related answers the items whose anchoredTo radius
// overlaps an item's (or an anchor's), each with the anchor pairs shared
// and its claim state, by the rule step 7 of the ready set applies: a
// directory covers what is below it, "a/b" never covers "a/bc", "." covers
// everything.
func TestRelatedRadius(t *testing.T) {
	f := newFixture(t)
	f.seed(1, nil, anchor("src/wal"))
	f.seed(2, nil, anchor("src/wal/batch.go"), anchor("docs/wal.md"))
	f.seed(3, nil, anchor("src/walrus.go"))
	f.seed(4, nil)
	f.seed(5, nil, anchor("."))
	f.seed(10, []string{"state:parked", "ruling-owner:alice", "ruling-topic:scope"}, anchor("src/wal/"))
	f.must(f.call("POST", "items/issue-2/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 60}), http.StatusOK)

	type want struct {
		item   string
		shared string // "mine>theirs;…"
		flight bool
		state  string
	}
	cases := []struct {
		name     string
		query    string
		anchors  []string
		related  []want
		inFlight []string
	}{
		{"an item's radius", "item=issue-1", []string{"src/wal"}, []want{
			{"issue-2", "src/wal>src/wal/batch.go", true, ""},
			{"issue-5", "src/wal>.", false, ""},
			{"issue-10", "src/wal>src/wal/", false, "parked"},
		}, []string{"issue-2"}},
		{"a file anchor", "anchor=src/wal/batch.go", []string{"src/wal/batch.go"}, []want{
			{"issue-1", "src/wal/batch.go>src/wal", false, ""},
			{"issue-2", "src/wal/batch.go>src/wal/batch.go", true, ""},
			{"issue-5", "src/wal/batch.go>.", false, ""},
			{"issue-10", "src/wal/batch.go>src/wal/", false, "parked"},
		}, []string{"issue-2"}},
		{"two anchors, one item sharing both", "anchor=docs&anchor=src/walrus.go", []string{"docs", "src/walrus.go"}, []want{
			{"issue-2", "docs>docs/wal.md", true, ""},
			{"issue-3", "src/walrus.go>src/walrus.go", false, ""},
			{"issue-5", "docs>.;src/walrus.go>.", false, ""},
		}, []string{"issue-2"}},
		{"an item without anchors", "item=issue-4", []string{}, nil, nil},
		{"the whole repository", "item=issue-5", []string{"."}, []want{
			{"issue-1", ".>src/wal", false, ""},
			{"issue-2", ".>docs/wal.md;.>src/wal/batch.go", true, ""},
			{"issue-3", ".>src/walrus.go", false, ""},
			{"issue-10", ".>src/wal/", false, "parked"},
		}, []string{"issue-2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.must(f.call("GET", "related?"+c.query, tokWorker2, nil), http.StatusOK)
			var got Related
			if err := json.Unmarshal(r.raw, &got); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Anchors) != fmt.Sprint(c.anchors) {
				t.Errorf("anchors %v, want %v", got.Anchors, c.anchors)
			}
			if len(got.Related) != len(c.related) {
				t.Fatalf("related %s, want %d items", r.raw, len(c.related))
			}
			for i, w := range c.related {
				g := got.Related[i]
				shared := ""
				for j, s := range g.Shared {
					if j > 0 {
						shared += ";"
					}
					shared += s.Anchor + ">" + s.Overlaps
				}
				if string(g.Item) != w.item || shared != w.shared || g.InFlight != w.flight || g.State != w.state {
					t.Errorf("related[%d] = %s %q inFlight=%v state=%q, want %s %q %v %q", i, g.Item, shared, g.InFlight, g.State, w.item, w.shared, w.flight, w.state)
				}
				if w.flight && g.ClaimState != gating.StateHeld {
					t.Errorf("%s claimState %q, want held", g.Item, g.ClaimState)
				}
			}
			if fmt.Sprint(got.InFlight) != fmt.Sprint(c.inFlight) && !(len(got.InFlight) == 0 && len(c.inFlight) == 0) {
				t.Errorf("inFlight %v, want %v", got.InFlight, c.inFlight)
			}
			if got.InFlight == nil || got.Related == nil {
				t.Errorf("lists must be present, never null: %s", r.raw)
			}
		})
	}

	refusals := []struct {
		name, query string
		status      int
		reason      string
		field       string
	}{
		{"nothing named", "", 422, ReasonInvalidRequest, "item"},
		{"both named", "item=issue-1&anchor=src", 422, ReasonInvalidRequest, "anchor"},
		{"an absolute anchor", "anchor=" + url.QueryEscape("/etc/passwd"), 422, ReasonInvalidRequest, "anchor"},
		{"an anchor climbing out", "anchor=" + url.QueryEscape("../x"), 422, ReasonInvalidRequest, "anchor"},
		{"a malformed item", "item=issue-0", 422, ReasonInvalidRequest, "item"},
		{"no such item", "item=issue-99", 404, ReasonMissing, ""},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			if c.field != "" {
				f.problemIs(f.call("GET", "related?"+c.query, tokWorker2, nil), c.status, c.reason, c.field)
			} else {
				f.problemIs(f.call("GET", "related?"+c.query, tokWorker2, nil), c.status, c.reason)
			}
		})
	}
	f.problemIs(f.call("GET", "/repos/acme/app/related?item=issue-1", tokLimited, nil), http.StatusForbidden, ReasonRepoNotAllowed)
}

// TestRegions: GET /regions is the deployment's one region, current, for
// any token; without one it is refused like every route.
func TestRegions(t *testing.T) {
	f := newFixture(t, func(f *fixture) { f.opt.Region = "eu-1" })
	r := f.must(f.call("GET", "/regions", tokWorker1, nil), http.StatusOK)
	var got Regions
	if err := json.Unmarshal(r.raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Current != "eu-1" || len(got.Regions) != 1 || got.Regions[0] != (Region{ID: "eu-1", Current: true}) {
		t.Errorf("regions %s, want eu-1 alone and current", r.raw)
	}
	f.problemIs(f.call("GET", "/regions", "", nil), http.StatusUnauthorized, ReasonUnauthenticated)
}
