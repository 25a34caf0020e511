package harness

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
)

// End-to-end tests of the agent API's writes as GitHub shows them
// (CONTRACT.md §2 post_markers and dry_run, §5, §6, §9): the claim markers
// warden posts, unparking and parking through PATCH, and dry_run.

// workerMarkers is warden's own comments on the issue that start with a
// backlog-worker marker (claim or outcome).
func (x *e2e) workerMarkers(n int) []comment {
	return x.wardenComments(n, "<!-- backlog-worker: ")
}

// markerFields splits a marker's first line into its key=value fields.
func markerFields(line string) map[string]string {
	out := map[string]string{}
	body := strings.TrimSuffix(strings.TrimPrefix(line, "<!-- backlog-worker: claim "), " -->")
	for _, f := range strings.Fields(body) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}

// markerAtRE is a marker's at= value: UTC ISO 8601, whole or fractional
// seconds.
const markerAtRE = `(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)`

// patchItem sends PATCH /items/{id} with token and returns the status and
// the answer (the item, or a problem with its reason).
func (x *e2e) patchItem(t *testing.T, token, id string, body map[string]any) (int, map[string]any) {
	t.Helper()
	var out map[string]any
	code, err := x.API(context.Background(), token, http.MethodPatch, "/items/"+id, body, &out)
	if err != nil {
		t.Fatalf("PATCH /items/%s: %v", id, err)
	}
	return code, out
}

// TestE2EAPIWritesPostMarkers: with post_markers on (a human pushed it),
// warden posts the claim marker for each custody-changing grant it makes,
// as its bot: the plain form for a first claim, the takeover form (with
// prior-owner and prior-fence) for a claim after another owner's lease
// lapsed; none for a maintenance claim, and never an outcome marker. The
// trail then has nothing to report about those grants.
func TestE2EAPIWritesPostMarkers(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.pushSettings(t, x.Person("hana", "write"), "main", "post_markers: true\n")
	id := x.create(t, HumanToken, "Shard the session table", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	at1 := x.clk.Now()
	f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.MustSettle(t)
	ms := x.workerMarkers(n)
	if len(ms) != 1 {
		t.Fatalf("#%d: warden posted %d marker comments for the first claim, want 1: %+v", n, len(ms), x.comments(n))
	}
	re := regexp.MustCompile(fmt.Sprintf(`^<!-- backlog-worker: claim item=%s owner=worker-7/a region=local fence=%d at=%s -->$`, id, f1, markerAtRE))
	line := firstLine(ms[0].Raw)
	if m := re.FindStringSubmatch(line); m == nil {
		t.Errorf("claim marker %q, want the exact form %s", line, re)
	} else if at, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || at.Before(at1.Add(-2*time.Second)) || at.After(at1.Add(2*time.Second)) {
		t.Errorf("claim marker at=%s, want the grant's time (about %s)", m[1], at1.UTC().Format(time.RFC3339))
	}

	// The lease lapses and the quarantine passes: another owner takes over.
	x.clk.Advance(pastQuarantine)
	f2 := x.claimFor(t, PMToken, id, "pm/b", 600)
	x.MustSettle(t)
	ms = x.workerMarkers(n)
	if len(ms) != 2 {
		t.Fatalf("#%d: %d marker comments after the takeover, want 2: %+v", n, len(ms), ms)
	}
	line = firstLine(ms[1].Raw)
	if !strings.HasPrefix(line, fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=pm/b ", id)) || !strings.HasSuffix(line, " -->") {
		t.Errorf("takeover marker %q does not start with the claim prefix for pm/b", line)
	}
	fs := markerFields(line)
	want := map[string]string{"item": id, "owner": "pm/b", "region": "local", "fence": fmt.Sprint(f2),
		"prior-owner": "worker-7/a", "prior-fence": fmt.Sprint(f1)}
	for k, v := range want {
		if fs[k] != v {
			t.Errorf("takeover marker %s=%q, want %q (line %q)", k, fs[k], v, line)
		}
	}
	if _, ok := fs["at"]; !ok || len(fs) != len(want)+1 {
		t.Errorf("takeover marker fields %v, want exactly %v and at", fs, want)
	}

	// Release (no outcome marker), then a maintenance claim (no marker).
	x.release(t, PMToken, id, f2)
	x.MustSettle(t)
	fm := granted(t, x.claim(t, PMToken, id, map[string]any{"owner": "pm/repair", "purpose": "maintenance", "leaseSeconds": 60}))
	x.MustSettle(t)
	x.release(t, PMToken, id, fm)
	x.MustSettle(t)
	x.flush(t)
	if ms := x.workerMarkers(n); len(ms) != 2 {
		t.Errorf("#%d: %d marker comments after a release and a maintenance claim, want still 2: %+v", n, len(ms), ms)
	}

	it := x.mustItem(t, id)
	if it.Attempts != 2 {
		t.Errorf("%s attempts %d, want 2 (the maintenance claim is none)", id, it.Attempts)
	}
	s := x.mustReady(t)
	noTrailDefects(t, s, id, gating.CodeClaimedUnmarked, gating.CodeUnannouncedTakeover, gating.CodeTakeoverMismatch,
		gating.CodeUnbackedMarker, gating.CodeDuplicateClaimMarker, gating.CodeMalformedMarker, gating.CodeForgedMarker)
	x.reportLacks(t, n, gating.CodeClaimedUnmarked, gating.CodeUnannouncedTakeover)
}

// TestE2EAPIWritesNoMarkersByDefault: with post_markers off (the default)
// a claim through the API makes warden post nothing.
func TestE2EAPIWritesNoMarkersByDefault(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Compress the archives", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f := x.claimFor(t, WorkerToken, id, "worker-7/a", 600)
	x.MustSettle(t)
	x.release(t, WorkerToken, id, f)
	x.MustSettle(t)
	if ms := x.workerMarkers(n); len(ms) != 0 {
		t.Errorf("#%d: warden posted markers with post_markers off: %+v", n, ms)
	}
}

// TestE2EAPIWritesHumanUnpark: a human token's PATCH removing state:parked
// and its route from a poison-parked item unparks it on GitHub too (the
// parked label comes off) and starts a new epoch: one more attempt does not
// park it again. A pm token may not do it (HumanActRequired).
func TestE2EAPIWritesHumanUnpark(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	x.custodyChanges(t, id, 3, "u")
	x.mustParkAt(t, id, 3)
	if t.Failed() {
		t.FailNow()
	}
	unpark := map[string]any{"removeTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:poison-threshold"}}

	code, out := x.patchItem(t, PMToken, id, unpark)
	if code < 400 || out["reason"] != "HumanActRequired" {
		t.Errorf("a pm token's unpark answered %d %v, want a refusal with reason HumanActRequired", code, out)
	}
	x.MustSettle(t)
	parkedWith(t, x.mustItem(t, id), "pm", "poison-threshold")

	code, out = x.patchItem(t, HumanToken, id, unpark)
	if code != http.StatusOK {
		t.Fatalf("a human token's unpark answered %d %v", code, out)
	}
	x.MustSettle(t)
	if x.labels(n)[lblParked] {
		t.Errorf("#%d still carries the parked label after a human token unparked it", n)
	}
	notParked(t, x.mustItem(t, id))
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s not ready after the unpark: excluded as %q", id, s.exclusion(id))
	}

	x.cycle(t, WorkerToken, "worker-7/u-after", x.Sim.As("worker-7[bot]"), id)
	x.MustSweep(t)
	x.flush(t)
	notParked(t, x.mustItem(t, id))
	if x.labels(n)[lblParked] {
		t.Errorf("#%d parked again after one attempt in the new epoch", n)
	}
	if pcs := x.parkComments(n); len(pcs) != 1 {
		t.Errorf("#%d has %d park comments, want the first one only", n, len(pcs))
	}
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s not ready after one attempt in the new epoch: excluded as %q", id, s.exclusion(id))
	}
	x.reportLacks(t, n, mirror.CodeAgentRemovedPark)
}

// TestE2EAPIWritesPMPark: a pm token's PATCH adding state:parked with its
// route parks the item, and the parked label follows on GitHub; the label
// warden adds is no park-label-without-tag.
func TestE2EAPIWritesPMPark(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Replace the job queue", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:queue-choice"}})
	if code != http.StatusOK {
		t.Fatalf("a pm token's park answered %d %v", code, out)
	}
	x.MustSettle(t)
	x.flush(t)
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d lacks the parked label after a pm token parked it: %v", n, x.labels(n))
	}
	parkedWith(t, x.mustItem(t, id), "pm", "queue-choice")
	s := x.mustReady(t)
	if s.has(id) || s.exclusion(id) != gating.ExParked {
		t.Errorf("%s: excluded as %q, want parked", id, s.exclusion(id))
	}
	refused(t, x.claim(t, WorkerToken, id, map[string]any{"owner": "worker-7/x"}), gating.ExParked)
	x.reportLacks(t, n, mirror.CodeParkLabelWithoutTag, mirror.CodeAgentRemovedPark)
}

// TestE2EAPIWritesDryRun: with dry_run on (a human pushed it), an agent's
// removal of the admission label is not reverted — warden writes nothing to
// GitHub at all — but it is still reported by GET /ready, and the item is
// not admitted. Claims post no marker even with post_markers on, and POST
// /items is refused (DryRun).
func TestE2EAPIWritesDryRun(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	gated := x.create(t, PMToken, "Proposed before the dry run", []string{"priority:P1"})
	admitted := x.create(t, HumanToken, "Admitted before the dry run", []string{"priority:P1"})
	x.MustSettle(t)
	x.pushSettings(t, x.Person("hana", "write"), "main", "dry_run: true\npost_markers: true\n")
	x.flush(t)
	writes := x.Sim.Calls(x.Inst.ID).Writes

	n := num(t, gated)
	if _, err := agent.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	f := x.claimFor(t, WorkerToken, admitted, "worker-7/a", 600)
	x.MustSettle(t)
	x.release(t, WorkerToken, admitted, f)
	x.MustSettle(t)
	x.flush(t)

	if after := x.Sim.Calls(x.Inst.ID).Writes; after != writes {
		t.Errorf("warden made %d GitHub writes in dry_run, want none", after-writes)
	}
	if x.labels(n)[lblAdmission] {
		t.Errorf("#%d: warden re-added the admission label in dry_run", n)
	}
	if ms := x.workerMarkers(num(t, admitted)); len(ms) != 0 {
		t.Errorf("warden posted a claim marker in dry_run: %+v", ms)
	}
	s := x.mustReady(t)
	if c := x.apiFindings(t, s, gated, mirror.CodeAgentRemovedAdmission); c != 1 {
		t.Errorf("%s: the API lists agent-removed-admission %d times in dry_run, want once: %+v", gated, c, s.Defects)
	}
	if s.has(gated) {
		t.Errorf("%s is ready: an agent's removal of the admission label admitted it in dry_run", gated)
	}

	var p map[string]any
	code, err := x.API(context.Background(), PMToken, http.MethodPost, "/items",
		map[string]any{"title": "During the dry run", "specification": "spec", "tags": []string{"priority:P2"}}, &p)
	if err != nil || code < 400 || p["reason"] != "DryRun" {
		t.Errorf("POST /items in dry_run answered %d %v (%v), want a refusal with reason DryRun", code, p, err)
	}
}

// TestE2EAPIWritesPostMarkersAcrossMaintenance: with post_markers on, a
// maintenance claim between two of one worker's claims changes no custody
// of the work: the worker's re-claim gets no marker (a second one would be
// duplicate-claim-marker); another worker's claim after it is a takeover of
// the first worker's unclosed claim, and the marker warden posts names it.
func TestE2EAPIWritesPostMarkersAcrossMaintenance(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.pushSettings(t, x.Person("hana", "write"), "main", "post_markers: true\n")
	id := x.create(t, HumanToken, "Split the billing worker", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)

	x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.MustSettle(t)
	x.clk.Advance(61 * time.Second) // lapsed, in quarantine
	fm := granted(t, x.claim(t, PMToken, id, map[string]any{"owner": "pm/repair", "purpose": "maintenance", "leaseSeconds": 60}))
	x.MustSettle(t)
	x.release(t, PMToken, id, fm)
	x.MustSettle(t)
	f2 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
	x.MustSettle(t)
	x.flush(t)
	if ms := x.workerMarkers(n); len(ms) != 1 {
		t.Fatalf("#%d: %d marker comments after the worker's re-claim across a maintenance claim, want 1 (its first): %+v", n, len(ms), ms)
	}

	// The worker's claim lapses and its quarantine passes; after another
	// maintenance claim, a second worker takes over the first's claim.
	x.clk.Advance(pastQuarantine)
	fm2 := granted(t, x.claim(t, PMToken, id, map[string]any{"owner": "pm/repair", "purpose": "maintenance", "leaseSeconds": 60}))
	x.MustSettle(t)
	x.release(t, PMToken, id, fm2)
	x.MustSettle(t)
	f3 := x.claimFor(t, WorkerToken, id, "worker-7/b", 600)
	x.MustSettle(t)
	x.flush(t)
	ms := x.workerMarkers(n)
	if len(ms) != 2 {
		t.Fatalf("#%d: %d marker comments after the takeover, want 2: %+v", n, len(ms), ms)
	}
	fs := markerFields(firstLine(ms[1].Raw))
	want := map[string]string{"owner": "worker-7/b", "fence": fmt.Sprint(f3), "prior-owner": "worker-7/a", "prior-fence": fmt.Sprint(f2)}
	for k, v := range want {
		if fs[k] != v {
			t.Errorf("takeover marker %s=%q, want %q (line %q)", k, fs[k], v, firstLine(ms[1].Raw))
		}
	}
	if it := x.mustItem(t, id); it.Attempts != 2 {
		t.Errorf("%s attempts %d, want 2 (worker-7/a's custody, worker-7/b's takeover; fence %d was a re-claim)", id, it.Attempts, f2)
	}
	s := x.mustReady(t)
	noTrailDefects(t, s, id, gating.CodeClaimedUnmarked, gating.CodeUnannouncedTakeover, gating.CodeTakeoverMismatch,
		gating.CodeUnbackedMarker, gating.CodeDuplicateClaimMarker)
}
