package harness

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// anchorRecall is GET /items/{id}'s anchor fields.
type anchorRecall struct {
	Stale         bool          `json:"stale"`
	StaleLinks    []gating.Link `json:"staleLinks"`
	DanglingLinks []gating.Link `json:"danglingLinks"`
}

func (x *e2e) anchorRecall(t *testing.T, id string) anchorRecall {
	t.Helper()
	var r anchorRecall
	if code, err := x.API(context.Background(), WorkerToken, http.MethodGet, "/items/"+id, nil, &r); err != nil || code != http.StatusOK {
		t.Fatalf("GET /items/%s: %d %v", id, code, err)
	}
	return r
}

func targets(ls []gating.Link) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.Target)
	}
	return out
}

// wantAnchors checks recall's stale and dangling anchors of id and the
// ready set's stale-anchor findings (one per stale anchor); a stale item
// stays ready (the defect is reported, not an exclusion).
func (x *e2e) wantAnchors(t *testing.T, what, id string, stale, dangling []string) {
	t.Helper()
	r := x.anchorRecall(t, id)
	if stale == nil {
		stale = []string{}
	}
	if dangling == nil {
		dangling = []string{}
	}
	if got := targets(r.StaleLinks); !slices.Equal(got, stale) || r.Stale != (len(stale) > 0) {
		t.Errorf("%s: %s stale %v staleLinks %v, want %v", what, id, r.Stale, got, stale)
	}
	var dl []string
	for _, l := range r.DanglingLinks {
		if l.Rel == gating.AnchoredTo {
			dl = append(dl, l.Target)
		}
	}
	if dl == nil {
		dl = []string{}
	}
	if !slices.Equal(dl, dangling) {
		t.Errorf("%s: %s danglingLinks %v, want %v", what, id, dl, dangling)
	}
	s := x.mustReady(t)
	if n := s.codes(id)["stale-anchor"]; n != len(stale) {
		t.Errorf("%s: GET /ready reports %d stale-anchor for %s, want %d (defects %+v)", what, n, id, len(stale), s.Defects)
	}
	if !s.has(id) {
		t.Errorf("%s: %s left the ready set (%s); a stale anchor is reported, not excluded", what, id, s.exclusion(id))
	}
}

func (x *e2e) push(t *testing.T, branch string, files map[string]string, msg string) string {
	t.Helper()
	sha, err := x.dev().Push(x.Repo, branch, "", files, msg)
	if err != nil {
		t.Fatalf("push %s: %v", branch, err)
	}
	x.MustSettle(t)
	return sha
}

func anchorLink(p string) map[string]string {
	return map[string]string{"rel": "anchoredTo", "target": p}
}

// TestE2EAnchors: pushes to the base branch mark anchored items stale
// from the payload's file lists (a modification, a rename, deletions down
// to a dangling directory anchor), a force-push is compared, a push to a
// branch no item is based on costs no GitHub call and changes nothing, and
// writing the link again re-validates it.
func TestE2EAnchors(t *testing.T) {
	x := newE2E(t)
	x.MustSettle(t)
	base := x.push(t, "main", map[string]string{
		"src/wal.go": "package src // v1", "src/log.go": "package src", "docs/a.md": "# a",
		"lib/x.go": "package lib", "lib/y.go": "package lib",
	}, "seed")

	wal := x.create(t, HumanToken, "Rewrite the WAL", []string{"priority:P1"}, anchorLink("src/wal.go"))
	lib := x.create(t, HumanToken, "Tidy lib", []string{"priority:P1"}, anchorLink("lib/"))
	doc := x.create(t, HumanToken, "Document a", []string{"priority:P1"}, anchorLink("docs/a.md"))
	epic := x.create(t, HumanToken, "On a side branch", []string{"priority:P2", "baseBranch:side"}, anchorLink("src/wal.go"))
	x.MustSettle(t)
	if s := x.mustReady(t); !s.has(wal) || !s.has(lib) || !s.has(doc) {
		t.Fatalf("the items are not ready: %+v", s)
	}
	x.wantAnchors(t, "fresh", wal, nil, nil)

	// A push that touches no anchor records them (first reads) and marks nothing.
	x.push(t, "main", map[string]string{"src/log.go": "package src // v2"}, "log")
	for _, id := range []string{wal, lib, doc} {
		x.wantAnchors(t, "unrelated push", id, nil, nil)
	}
	// A second such push reads nothing: the anchors are recorded.
	before := x.Sim.Calls(x.Inst.ID)
	x.push(t, "main", map[string]string{"src/log.go": "package src // v3"}, "log again")
	if after := x.Sim.Calls(x.Inst.ID); after.Reads != before.Reads || after.Writes != before.Writes {
		t.Errorf("a push touching no anchor made GitHub calls: %+v -> %+v", before, after)
	}

	// A modification of the anchored file.
	x.push(t, "main", map[string]string{"src/wal.go": "package src // v2"}, "wal v2")
	x.wantAnchors(t, "modified", wal, []string{"src/wal.go"}, nil)
	x.wantAnchors(t, "other base branch", epic, nil, nil)
	x.wantAnchors(t, "not touched", doc, nil, nil)

	// A rename away from the anchored file: stale, and nothing left there.
	if _, err := x.dev().Rename(x.Repo, "main", "docs/a.md", "docs/b.md", "rename"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.wantAnchors(t, "renamed", doc, []string{"docs/a.md"}, []string{"docs/a.md"})

	// A directory anchor: one file deleted (stale, not dangling), then the last.
	x.push(t, "main", map[string]string{"lib/x.go": ""}, "drop x")
	x.wantAnchors(t, "one file of the directory deleted", lib, []string{"lib/"}, nil)
	x.push(t, "main", map[string]string{"lib/y.go": ""}, "drop y")
	x.wantAnchors(t, "the directory emptied", lib, []string{"lib/"}, []string{"lib/"})

	// A push to a branch no item is based on: no GitHub call, nothing changes.
	x.MustSettle(t)
	before = x.Sim.Calls(x.Inst.ID)
	if _, err := x.dev().Push(x.Repo, "scratch", "", map[string]string{"src/wal.go": "package src // scratch"}, "scratch"); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if after := x.Sim.Calls(x.Inst.ID); after.Reads != before.Reads || after.Writes != before.Writes {
		t.Errorf("a push to a branch no item uses made GitHub calls: %+v -> %+v", before, after)
	}
	x.wantAnchors(t, "push to scratch", epic, nil, nil)

	// Re-validation: writing the link again clears it (and records the new blob).
	for _, id := range []string{wal, doc} {
		a := anchorLink(map[string]string{wal: "src/wal.go", doc: "docs/a.md"}[id])
		if code, out := x.patchItem(t, PMToken, id, map[string]any{"removeLinks": []any{a}, "addLinks": []any{a}}); code != http.StatusOK {
			t.Fatalf("re-validate %s: %d %v", id, code, out)
		}
	}
	x.wantAnchors(t, "re-validated", wal, nil, nil)
	// docs/a.md is still gone: writing the link again finds nothing there.
	x.wantAnchors(t, "re-validated onto nothing", doc, []string{"docs/a.md"}, []string{"docs/a.md"})
	if code, out := x.patchItem(t, PMToken, doc, map[string]any{"removeLinks": []any{anchorLink("docs/a.md")}, "addLinks": []any{anchorLink("docs/b.md")}}); code != http.StatusOK {
		t.Fatalf("point %s at docs/b.md: %d %v", doc, code, out)
	}
	x.wantAnchors(t, "pointed at the renamed file", doc, nil, nil)

	// A force-push back to the seed commit: nothing is listed in the
	// payload, so warden compares; src/wal.go went back to v1: stale.
	before = x.Sim.Calls(x.Inst.ID)
	if err := x.dev().ForcePush(x.Repo, "main", base); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if after := x.Sim.Calls(x.Inst.ID); after.Reads == before.Reads {
		t.Error("a force-push made no compare")
	}
	x.wantAnchors(t, "force-pushed", wal, []string{"src/wal.go"}, nil)
	r := x.mustReady(t)
	for _, d := range r.Defects {
		if d.Code == "stale-anchor" && string(d.Item) == wal && !strings.Contains(d.Detail, "force-pushed") {
			t.Errorf("the force-push's finding does not say so: %s", d.Detail)
		}
	}
}
