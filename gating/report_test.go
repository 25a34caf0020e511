package gating

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func reportSnapshot() Snapshot {
	maint := func(c *Candidate) { c.Claim.Purpose = "maintenance" }
	pushed := func(c *Candidate) {
		c.Claim.EvidenceKind, c.Claim.EvidenceDetail = EvidencePushByHolder, `a push by "w2[bot]" to "scratch"`
	}
	return snap(
		mk(1, held("w/1"), anchored("src/")),
		mk(2, lapsed("w/2"), blockedBy(12), pushed),
		mk(3, held("pm/1"), maint, complete()),
		mk(4, parked(), attempts(3)),
		mk(5, tg("state:parked"), attempts(1)),
		mk(6, blockedBy(7)),
		mk(7, anchored("src/x.go")),
		mk(8, blockedBy(4, 7)),
		mk(9, blockedBy(99, 7)),
		mk(10, labelled()),
		mk(11, unrecorded()),
		mk(12, complete()),
		mk(13, blockedBy(5), labelled()),
		mk(14, set("priority", "P0")),
		mk(20, set("baseBranch", "feat/epic/x")),
		mk(21, member(20), complete()),
		mk(22, member(20), integrates(20)),
		mk(23, member(20)),
	)
}

func TestBuildReport(t *testing.T) {
	s := reportSnapshot()
	r := ComputeReady(s)
	rep := BuildReport(s, r)

	lease1 := rnow.Add(10 * time.Minute)
	grant := &ClaimEvidence{Kind: EvidenceGrant, AtUtc: rnow.Add(-time.Minute)}
	ev2 := &ClaimEvidence{Kind: EvidencePushByHolder, AtUtc: rnow.Add(-20 * time.Minute), Detail: `a push by "w2[bot]" to "scratch"`}
	wantInFlight := []InFlightEntry{
		{Item: "issue-1", Owner: "w/1", Branch: "feat/w/1", LeaseExpiresAtUtc: lease1, State: StateHeld, LastEvidence: grant},
		{Item: "issue-2", Owner: "w/2", Branch: "feat/w/2", LeaseExpiresAtUtc: rnow.Add(-10 * time.Minute), State: StateLapsed, LastEvidence: ev2},
		{Item: "issue-3", Owner: "pm/1", Branch: "feat/pm/1", LeaseExpiresAtUtc: lease1, State: StateHeld, Maintenance: true, LastEvidence: grant},
	}
	if !reflect.DeepEqual(rep.InFlight, wantInFlight) {
		t.Errorf("inFlight %+v", rep.InFlight)
	}
	if !reflect.DeepEqual(rep.Ready, r.Ready) {
		t.Errorf("ready %+v, want %+v", rep.Ready, r.Ready)
	}
	// issue-14 (P0) first, then issue-23; issue-7 overlaps in-flight issue-1 and comes last.
	if got := readyIDs(r); !slices.Equal(got, []ItemID{"issue-14", "issue-23", "issue-7"}) || !slices.Equal(r.Ready[2].Overlaps, []ItemID{"issue-1"}) {
		t.Errorf("ready %+v", r.Ready)
	}
	wantBlocked := []BlockedEntry{
		{Item: "issue-6", WaitingOn: []ItemID{"issue-7"}},
		{Item: "issue-9", WaitingOn: []ItemID{"issue-7", "issue-99"}},
		{Item: "issue-22", WaitingOn: []ItemID{"issue-23"}},
	}
	if !reflect.DeepEqual(rep.Blocked, wantBlocked) {
		t.Errorf("blocked %+v", rep.Blocked)
	}
	wantStalled := []StalledEntry{
		{Item: "issue-8", Blocker: "issue-4", RulingOwner: "pm", RulingTopic: "schema"},
		{Item: "issue-13", Blocker: "issue-5"},
	}
	if !reflect.DeepEqual(rep.Stalled, wantStalled) {
		t.Errorf("stalled %+v", rep.Stalled)
	}
	wantParked := []ParkedEntry{
		{Item: "issue-4", Attempts: 3, RulingOwner: "pm", RulingTopic: "schema", Unpark: "a human with triage or more removes the parked label or runs /backlog unpark"},
		{Item: "issue-5", Attempts: 1, Unpark: UnparkHint},
	}
	if !reflect.DeepEqual(rep.Parked, wantParked) {
		t.Errorf("parked %+v", rep.Parked)
	}
	var adm []ItemID
	for _, a := range rep.AwaitingAdmission {
		adm = append(adm, a.Item)
	}
	if !slices.Equal(adm, []ItemID{"issue-10", "issue-11", "issue-13"}) ||
		!strings.Contains(rep.AwaitingAdmission[0].Detail, "admission label") ||
		!strings.Contains(rep.AwaitingAdmission[1].Detail, "admission-unrecorded") {
		t.Errorf("awaitingAdmission %+v", rep.AwaitingAdmission)
	}
	wantLapsed := []LapsedEntry{{Item: "issue-2", Owner: "w/2", Since: rnow.Add(-10 * time.Minute), QuarantineEndsAtUtc: rnow.Add(40 * time.Minute), LastEvidence: ev2}}
	if !reflect.DeepEqual(rep.Lapsed, wantLapsed) {
		t.Errorf("lapsed %+v", rep.Lapsed)
	}
	if !reflect.DeepEqual(rep.Defects, r.Defects) || len(rep.Defects) == 0 {
		t.Errorf("defects %+v", rep.Defects)
	}
	if rep.CleanReclaims == nil || len(rep.CleanReclaims) != 0 {
		t.Errorf("cleanReclaims %+v", rep.CleanReclaims)
	}
	want := ReportSummary{Items: 18, Ready: 3, InFlight: 3, Blocked: 3, Stalled: 2, Parked: 2, AwaitingAdmission: 3, Complete: 3}
	if rep.Summary != want {
		t.Errorf("summary %+v, want %+v", rep.Summary, want)
	}
}

func TestReportJSON(t *testing.T) {
	s := reportSnapshot()
	b, err := json.Marshal(BuildReport(s, ComputeReady(s)))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"awaitingAdmission", "blocked", "cleanReclaims", "defects", "inFlight", "lapsed", "lines", "parked", "ready", "stalled", "summary"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v", keys)
	}
	for _, sub := range []string{
		`"inFlight":[{"item":"issue-1","owner":"w/1","branch":"feat/w/1","leaseExpiresAtUtc":"2026-09-03T00:10:00Z","state":"held","maintenance":false,"lastEvidence":{"kind":"grant","atUtc":"2026-09-02T23:59:00Z"}}`,
		`"blocked":[{"item":"issue-6","waitingOn":["issue-7"]}`,
		`"stalled":[{"item":"issue-8","blocker":"issue-4","rulingOwner":"pm","rulingTopic":"schema"}`,
		`"parked":[{"item":"issue-4","attempts":3,"rulingOwner":"pm","rulingTopic":"schema","unpark":"a human with triage or more removes the parked label or runs /backlog unpark"}`,
		`"lapsed":[{"item":"issue-2","owner":"w/2","since":"2026-09-02T23:50:00Z","quarantineEndsAtUtc":"2026-09-03T00:40:00Z","lastEvidence":{"kind":"push-by-holder","atUtc":"2026-09-02T23:40:00Z","detail":"a push by \"w2[bot]\" to \"scratch\""}}]`,
		`"ready":[{"item":"issue-14","priority":"P0"}`,
		`{"item":"issue-7","priority":"P1","overlaps":["issue-1"]}`,
		`"summary":{"items":18,"ready":3,"inFlight":3,"blocked":3,"stalled":2,"parked":2,"awaitingAdmission":3,"complete":3}`,
		`"cleanReclaims":[]`,
		`"lines":[]`,
	} {
		if !strings.Contains(string(b), sub) {
			t.Errorf("JSON lacks %s", sub)
		}
	}
	// An empty repository: every list is [], never null.
	b, _ = json.Marshal(BuildReport(snap(), ComputeReady(snap())))
	if strings.Contains(string(b), "null") {
		t.Errorf("null in %s", b)
	}
	b, _ = json.Marshal(ComputeReady(snap()))
	if string(b) != `{"ready":[],"excluded":[],"defects":[],"alarms":[]}` {
		t.Errorf("empty result %s", b)
	}
	// Times are UTC whatever zone the snapshot used.
	s = snap(mk(1, held("w/1")))
	s.Items[0].Claim.LeaseExpiresAt = s.Items[0].Claim.LeaseExpiresAt.In(time.FixedZone("x", 3600))
	if rep := BuildReport(s, ComputeReady(s)); rep.InFlight[0].LeaseExpiresAtUtc.Location() != time.UTC {
		t.Errorf("lease not in UTC")
	}
}
