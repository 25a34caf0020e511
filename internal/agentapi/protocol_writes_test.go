package agentapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// parkSpy is a WriteObserver that also hears parks and anchor writes.
type parkSpy struct {
	mu      sync.Mutex
	parks   []string // "issue-N fence question"
	anchors []string // "issue-N path"
}

func (s *parkSpy) AfterClaim(context.Context, store.Repo, gating.ItemID, store.ClaimResult, string) {}
func (s *parkSpy) AfterRelease(context.Context, store.Repo, gating.ItemID)                          {}
func (s *parkSpy) AfterUpdate(context.Context, store.Repo, store.Item, store.Item, store.Actor)     {}

func (s *parkSpy) AfterPark(_ context.Context, _ store.Repo, it store.Item, fence int64, _ store.Actor, question string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parks = append(s.parks, string(it.ID)+" "+strings.TrimSpace(question))
	_ = fence
}

func (s *parkSpy) AnchorsWritten(_ context.Context, _ store.Repo, it store.Item, added, _ []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range added {
		s.anchors = append(s.anchors, string(it.ID)+" "+p)
	}
	return nil
}

// TestWorkerParkNamesItsQuestion: a worker's park (addTags state:parked)
// needs its ruling route and a question in the write; each missing part is
// named, nothing is written, and a complete park is handed to the mirror
// with its question (the park comment). A pm's park may omit it.
func TestWorkerParkNamesItsQuestion(t *testing.T) {
	spy := &parkSpy{}
	f := newFixture(t, func(f *fixture) { f.opt.Writes = spy })
	f.seed(40, nil)
	c := f.must(f.call("POST", "items/issue-40/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "leaseSeconds": 120}), 200)
	tok := c.num("fencingToken")

	cases := []struct {
		name    string
		body    map[string]any
		reason  string
		missing []string
	}{
		{"no route, no question", map[string]any{"addTags": []string{"state:parked"}}, "park-without-route", []string{"ruling-owner", "ruling-topic", "question"}},
		{"route, no question", map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}}, "park-without-question", []string{"question"}},
		{"route, blank question", map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}, "question": "  \n"}, "park-without-question", []string{"question"}},
		{"question, no topic", map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm"}, "question": "Which queue?"}, "park-without-route", []string{"ruling-topic"}},
	}
	for _, tc := range cases {
		tc.body["fencingToken"] = tok
		r := f.call("PATCH", "items/issue-40", tokWorker1, tc.body)
		if r.status != 409 || r.str("reason") != tc.reason {
			t.Fatalf("%s: %d %s, want 409 %s", tc.name, r.status, r.raw, tc.reason)
		}
		var got []string
		for _, v := range r.body["rejected"].([]any) {
			got = append(got, v.(string))
		}
		if !slices.Equal(got, tc.missing) {
			t.Errorf("%s: rejected %v, want %v", tc.name, got, tc.missing)
		}
		for _, m := range tc.missing {
			if !strings.Contains(r.str("detail"), m) {
				t.Errorf("%s: the detail does not name the missing %s: %s", tc.name, m, r.str("detail"))
			}
		}
		if it, _ := f.ledger.Get(context.Background(), f.mrepo.ID, "issue-40"); it.HasTag("state:parked") {
			t.Fatalf("%s: the refused park was written: %v", tc.name, it.Tags)
		}
	}
	// A question without a park is malformed.
	f.problemIs(f.call("PATCH", "items/issue-40", tokWorker1, map[string]any{"addTags": []string{"priority:P1"}, "question": "q?", "fencingToken": tok}), 422, ReasonInvalidRequest, "question")

	q := "Should the queue be Redis or Postgres? The spec names both."
	f.must(f.call("PATCH", "items/issue-40", tokWorker1, map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:queue-choice"},
		"question": q, "fencingToken": tok}), 200)
	if want := []string{"issue-40 " + q}; !slices.Equal(spy.parks, want) {
		t.Errorf("parks heard %v, want %v", spy.parks, want)
	}

	// A pm's park needs no question (and hands none on).
	f.seed(41, nil)
	f.must(f.call("PATCH", "items/issue-41", tokPM, map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}}), 200)
	if len(spy.parks) != 1 {
		t.Errorf("a pm's park without a question was handed on: %v", spy.parks)
	}
}

// TestClaimsEdgesRefusedOnItems: a claims link belongs to a per-run worker
// record, never an item: refused at create, at adopt and on PATCH, with
// nothing written; removing one (a legacy edge) is allowed to be asked.
func TestClaimsEdgesRefusedOnItems(t *testing.T) {
	f := newFixture(t)
	claims := []any{map[string]any{"rel": "claims", "target": "repo/app/mem/runs/r-1"}}
	before := f.issueCount()
	f.problemIs(f.call("POST", "items", tokPM, map[string]any{"title": "t", "specification": "s", "links": claims}), 422, gating.CodeClaimsOnItem, "links[0].rel")
	if f.issueCount() != before {
		t.Error("a create refused for its claims link opened an issue")
	}
	f.seed(50, nil)
	r := f.call("PATCH", "items/issue-50", tokPM, map[string]any{"addLinks": claims})
	f.problemIs(r, 422, gating.CodeClaimsOnItem, "addLinks[0].rel")
	if !strings.Contains(r.str("detail"), "per-run") {
		t.Errorf("the refusal does not say where claims belongs: %s", r.str("detail"))
	}
	if it, _ := f.ledger.Get(context.Background(), f.mrepo.ID, "issue-50"); len(it.Links) != 0 {
		t.Errorf("the refused claims link was written: %v", it.Links)
	}
	f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": 1, "links": claims}), 422, gating.CodeClaimsOnItem, "links[0].rel")
	if r := f.call("PATCH", "items/issue-50", tokPM, map[string]any{"removeLinks": claims}); r.str("reason") == gating.CodeClaimsOnItem {
		t.Errorf("removing a claims link was refused as claims-on-item: %s", r.raw)
	}
}

// TestCreateChecksItsAnchors: the anchoredTo links an item is made with are
// handed to the anchor writer at once, as a PATCH's are.
func TestCreateChecksItsAnchors(t *testing.T) {
	spy := &parkSpy{}
	f := newFixture(t, func(f *fixture) { f.opt.Writes = spy })
	r := f.must(f.call("POST", "items", tokPM, map[string]any{"title": "t", "specification": "s",
		"links": []any{map[string]any{"rel": "anchoredTo", "target": "src/missing.go"}}}), 201)
	want := []string{r.str("id") + " src/missing.go"}
	if !slices.Equal(spy.anchors, want) {
		t.Errorf("anchors written at create %v, want %v", spy.anchors, want)
	}
}
