package harness

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

func markerAt() string { return time.Now().UTC().Format("2006-01-02T15:04:05Z") }

func claimMarker(id, owner string, fence int64) string {
	return fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s region=local fence=%d at=%s -->", id, owner, fence, markerAt())
}

func (e *Env) release(t *testing.T, token, id string, fence int64) {
	t.Helper()
	var rel store.ReleaseResult
	if _, err := e.API(context.Background(), token, http.MethodPost, "/items/"+id+"/release", map[string]any{"fencingToken": fence}, &rel); err != nil || !rel.Released {
		t.Fatalf("release %s: %+v %v", id, rel, err)
	}
}

// attemptCycle claims id for owner, posts the claim marker as agent, and
// releases; it returns the marker comment.
func (e *Env) attemptCycle(t *testing.T, token, owner string, agent *ghsim.Actor, id string) *ghsim.Comment {
	t.Helper()
	fence := granted(t, e.claim(t, token, id, map[string]any{"owner": owner, "leaseSeconds": 600}))
	n, _ := gating.ParseID(id)
	c, err := agent.Comment(e.Repo, n, claimMarker(id, owner, fence))
	if err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	e.release(t, token, id, fence)
	return c
}

func (s readySet) defects(id, code string) []gating.Defect {
	var out []gating.Defect
	for _, d := range s.Defects {
		if string(d.Item) == id && d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

func (s readySet) attempts(id string) int {
	for _, r := range s.Ready {
		if r.Item == id {
			return r.Attempts
		}
	}
	return -1
}

func noTrailDefects(t *testing.T, s readySet, id string, codes ...string) {
	t.Helper()
	for _, c := range codes {
		if ds := s.defects(id, c); len(ds) > 0 {
			t.Errorf("%s: unexpected %s: %+v", id, c, ds)
		}
	}
}

// TestTrailPoisonedAfterThreeCustodyChanges: three claims by changing owners,
// each announced by its marker, make the item poisoned, and warden parks it.
func TestTrailPoisonedAfterThreeCustodyChanges(t *testing.T) {
	e := New(t, Options{})
	worker := e.Sim.As("worker-7[bot]")
	pmBot := e.Sim.As("pm-agent[bot]")
	id := e.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P1"})
	e.MustSettle(t)

	e.attemptCycle(t, WorkerToken, "worker-7/a", worker, id)
	e.attemptCycle(t, PMToken, "pm/b", pmBot, id)
	s := e.mustReady(t)
	if got := s.attempts(id); got != 2 {
		t.Fatalf("after two custody changes: attempts %d, ready %+v", got, s)
	}
	e.attemptCycle(t, WorkerToken, "worker-7/c", worker, id)
	e.MustSettle(t)
	// The third release leaves it poisoned, and warden parks it at once
	// (the release hook; the timer pass is the backstop).
	s = e.mustReady(t)
	if r := s.exclusion(id); r != gating.ExParked {
		t.Fatalf("%s excluded as %q, want parked: %+v", id, r, s.Excluded)
	}
	if len(s.defects(id, "poisoned")) != 0 {
		t.Fatalf("a parked item is no longer reported poisoned: %+v", s.Defects)
	}
	noTrailDefects(t, s, id, gating.CodeClaimedUnmarked, gating.CodeUnbackedMarker, gating.CodeForgedMarker, gating.CodeMalformedMarker)
}

// TestTrailForgedEditedDeleted: a marker by an outsider is forged and counts
// nothing; an edited marker counts as first posted and is reported; a
// deleted one still counts and is reported.
func TestTrailForgedEditedDeleted(t *testing.T) {
	e := New(t, Options{})
	worker := e.Sim.As("worker-7[bot]")
	mallory := e.Person("mallory", "read")
	forged := e.create(t, HumanToken, "Forged", []string{"priority:P1"})
	edited := e.create(t, HumanToken, "Edited", []string{"priority:P1"})
	deleted := e.create(t, HumanToken, "Deleted", []string{"priority:P1"})
	e.MustSettle(t)

	// (b) forged.
	e.attemptCycle(t, WorkerToken, "worker-7/a", worker, forged)
	n, _ := gating.ParseID(forged)
	if _, err := mallory.Comment(e.Repo, n, claimMarker(forged, "mallory/x", 2)); err != nil {
		t.Fatal(err)
	}
	// (c) edited.
	c := e.attemptCycle(t, WorkerToken, "worker-7/a", worker, edited)
	if _, err := worker.EditComment(e.Repo, c.ID, claimMarker(edited, "worker-7/zzz", 9)); err != nil {
		t.Fatal(err)
	}
	// (d) deleted.
	d := e.attemptCycle(t, WorkerToken, "worker-7/a", worker, deleted)
	if err := worker.DeleteComment(e.Repo, d.ID); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)

	s := e.mustReady(t)
	for _, id := range []string{forged, edited, deleted} {
		if got := s.attempts(id); got != 1 {
			t.Errorf("%s: attempts %d, want 1 (ready %v, excluded %+v)", id, got, s.ids(), s.Excluded)
		}
		noTrailDefects(t, s, id, gating.CodeClaimedUnmarked, gating.CodeUnbackedMarker)
	}
	if len(s.defects(forged, gating.CodeForgedMarker)) != 1 {
		t.Errorf("forged: defects %+v", s.Defects)
	}
	if len(s.defects(edited, gating.CodeMarkerEdited)) != 1 {
		t.Errorf("edited: defects %+v", s.Defects)
	}
	if len(s.defects(deleted, gating.CodeMarkerDeleted)) != 1 {
		t.Errorf("deleted: defects %+v", s.Defects)
	}
	noTrailDefects(t, s, forged, gating.CodeUndeclaredAgent)
	rep := e.mustReport(t)
	found := false
	for _, d := range rep.Defects {
		found = found || string(d.Item) == forged && d.Code == gating.CodeForgedMarker
	}
	if !found {
		t.Errorf("report lacks forged-marker: %+v", rep.Defects)
	}
}
