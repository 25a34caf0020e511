package gating

import (
	"testing"
	"time"
)

func TestSpecDigest(t *testing.T) {
	base := SpecDigest("Add a cache", "Cache the census pages.\n\nNothing else.")
	for _, c := range []struct {
		name        string
		title, body string
		same        bool
	}{
		{"identical", "Add a cache", "Cache the census pages.\n\nNothing else.", true},
		{"CRLF line ends", "Add a cache", "Cache the census pages.\r\n\r\nNothing else.", true},
		{"trailing whitespace", "Add a cache", "Cache the census pages.\n\nNothing else.  \r\n\n", true},
		{"widened scope", "Add a cache", "Cache the census pages.\n\nAlso rewrite the store.", false},
		{"retitled", "Add a cache and a queue", "Cache the census pages.\n\nNothing else.", false},
		{"empty body", "Add a cache", "", false},
	} {
		if got := SpecDigest(c.title, c.body) == base; got != c.same {
			t.Errorf("%s: digest equal %v, want %v", c.name, got, c.same)
		}
	}
	if SpecDigest("t", "") != SpecDigest("t", " \n") {
		t.Error("an empty body and a blank one digest differently")
	}
	if d := SpecDigest("t", "b"); len(d) != 64 {
		t.Errorf("digest %q is not 64 hex digits", d)
	}
}

func TestJudgeSpec(t *testing.T) {
	t0 := time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const d1, d2, d3 = "d1", "d2", "d3"
	agent := func(s int, d string) SpecEdit {
		return SpecEdit{At: at(s), Editor: "pm[bot]", Standing: SpecEditorAgent, Digest: d, Prior: d1, Delivery: "a" + d}
	}
	human := func(s int, d string) SpecEdit {
		return SpecEdit{At: at(s), Editor: "maria", Standing: SpecEditorHuman, Digest: d, Prior: d1, Delivery: "h" + d}
	}
	warden := SpecEdit{At: at(20), Editor: "warden[bot]", Standing: SpecEditorWarden, Digest: d2}
	unknown := SpecEdit{At: at(20), Editor: "ghost", Standing: SpecEditorUnknown, Digest: d2}
	admitted := SpecState{Digest: d1, At: at(10)}
	cur := func(d string, s int) SpecState { return SpecState{Digest: d, At: at(s)} }
	for _, c := range []struct {
		name   string
		in     SpecInput
		action SpecAction
		editor string
	}{
		{"unchanged", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d1, 30)}, SpecKeep, ""},
		{"agent rewrote it", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{agent(20, d2)}}, SpecRegate, "pm[bot]"},
		{"agent rewrote it in the admission's second", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 10), Edits: []SpecEdit{agent(10, d2)}}, SpecRegate, "pm[bot]"},
		{"human rewrote it", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{human(20, d2)}}, SpecAccept, "maria"},
		{"warden's own edit", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{warden}}, SpecAccept, "warden[bot]"},
		{"an editor who could not be judged", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{unknown}}, SpecRegate, "ghost"},
		{"not admitted: an agent drafting", SpecInput{Admitted: false, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{agent(20, d2)}}, SpecKeep, ""},
		{"edit not seen (census)", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 40)}, SpecRegate, ""},
		{"the logged edit made other text", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d3, 40), Edits: []SpecEdit{human(20, d2)}}, SpecRegate, ""},
		{"the agent's edit predates the admission", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{agent(5, d2)}}, SpecRegate, ""},
		{"recorded text older than the admitted", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 5), Edits: []SpecEdit{agent(5, d2)}}, SpecKeep, ""},
		{"text unknown", SpecInput{Admitted: true, Accepted: admitted, Current: SpecState{}}, SpecKeep, ""},
		{"no admitted digest, no edit since: trust on first use", SpecInput{Admitted: true, AdmittedAt: at(10), Current: cur(d2, 20)}, SpecKeep, ""},
		{"no admitted digest, an agent's edit since", SpecInput{Admitted: true, AdmittedAt: at(10), Current: cur(d2, 20), Edits: []SpecEdit{agent(20, d2)}}, SpecRegate, "pm[bot]"},
		{"no admitted digest, a human's edit since", SpecInput{Admitted: true, AdmittedAt: at(10), Current: cur(d2, 20), Edits: []SpecEdit{human(20, d2)}}, SpecAccept, "maria"},
		{"agent then human: the human's text", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d3, 30), Edits: []SpecEdit{agent(20, d2), human(30, d3)}}, SpecAccept, "maria"},
		{"human then agent restoring the human's text", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 30),
			Edits: []SpecEdit{human(20, d2), agent(25, d3), agent(30, d2)}}, SpecRegate, "pm[bot]"},
		{"agent and human in one second", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d2, 20), Edits: []SpecEdit{human(20, d2), agent(20, d2)}}, SpecRegate, "pm[bot]"},
		{"agent reverted to the admitted text", SpecInput{Admitted: true, Accepted: admitted, Current: cur(d1, 30), Edits: []SpecEdit{agent(20, d2), agent(30, d1)}}, SpecKeep, ""},
	} {
		v := JudgeSpec(c.in)
		editor := ""
		if v.Edit != nil {
			editor = v.Edit.Editor
		}
		if v.Action != c.action || editor != c.editor {
			t.Errorf("%s: JudgeSpec = action %d, editor %q; want %d, %q", c.name, v.Action, editor, c.action, c.editor)
		}
		// What is recorded as admitted: the current text after a human's
		// edit; the text as of the admission for one recorded without.
		want := SpecState{}
		switch {
		case c.action == SpecAccept:
			want = c.in.Current
		case c.in.Admitted && c.in.Accepted.Digest == "" && c.in.Current.Digest != "":
			want = SpecAsOf(c.in.Current, c.in.Edits, c.in.AdmittedAt)
		}
		if v.Record != want {
			t.Errorf("%s: records %+v as admitted, want %+v", c.name, v.Record, want)
		}
	}
}

func TestSpecAsOf(t *testing.T) {
	t0 := time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cur := SpecState{Digest: "d3", At: at(40)}
	edits := []SpecEdit{{At: at(30), Prior: "d2", Digest: "d3"}, {At: at(20), Prior: "d1", Digest: "d2"}, {At: at(5), Prior: "d0", Digest: "d1"}}
	for _, c := range []struct {
		at   int
		want string
	}{{0, "d0"}, {5, "d0"}, {6, "d1"}, {20, "d1"}, {25, "d2"}, {31, "d3"}, {50, "d3"}} {
		if got := SpecAsOf(cur, edits, at(c.at)); got.Digest != c.want || !got.At.Equal(at(c.at)) {
			t.Errorf("SpecAsOf(+%ds) = %+v, want %s as of then", c.at, got, c.want)
		}
	}
	if got := SpecAsOf(SpecState{}, nil, at(1)); got != (SpecState{}) {
		t.Errorf("SpecAsOf with nothing known = %+v, want zero", got)
	}
}

// TestSpecChangedNotAdmitted: an open spec-changed-by-agent keeps an item
// out of the ready set as awaiting admission, even with the admission label
// off and an act on record (the label write failed, or dry run held it).
func TestSpecChangedNotAdmitted(t *testing.T) {
	now := time.Date(2026, 9, 6, 12, 0, 0, 0, time.UTC)
	it := &Item{ID: "issue-1", Tags: []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main"}}
	c := Candidate{Item: it, AdmissionRecorded: true, SpecChanged: true,
		Findings: []Defect{{Code: CodeSpecChangedByAgent, Item: "issue-1", Detail: "pm[bot] rewrote it"}}}
	r := ComputeReady(Snapshot{Items: []Candidate{c}, Now: now, Region: "local", DefaultBranch: "main"})
	if len(r.Ready) != 0 || len(r.Excluded) != 1 || r.Excluded[0].Reason != ExAwaitingAdmission {
		t.Fatalf("ready %+v, excluded %+v; want issue-1 excluded as awaiting-admission", r.Ready, r.Excluded)
	}
	found := false
	for _, d := range r.Defects {
		found = found || d.Code == CodeSpecChangedByAgent && d.Item == "issue-1"
	}
	if !found {
		t.Errorf("defects %+v lack spec-changed-by-agent", r.Defects)
	}
	c.SpecChanged = false
	if r := ComputeReady(Snapshot{Items: []Candidate{c}, Now: now, Region: "local", DefaultBranch: "main"}); len(r.Ready) != 1 {
		t.Errorf("without the flag the item is not ready: %+v", r.Excluded)
	}
}

func TestSpecEditor(t *testing.T) {
	agents := []string{"pm-agent"}
	user := func(login string) Identity {
		return Identity{Actor: Actor{Login: login, Type: "User"}, RecordedKnown: true}
	}
	for _, c := range []struct {
		name string
		id   Identity
		want string
	}{
		{"warden's bot", Identity{Actor: Actor{Login: "warden[bot]", Type: "Bot"}, Warden: true, RecordedKnown: true}, SpecEditorWarden},
		{"a Bot account", Identity{Actor: Actor{Login: "builder[bot]", Type: "Bot"}, RecordedKnown: true}, SpecEditorAgent},
		{"a configured agent", user("PM-Agent"), SpecEditorAgent},
		{"a marker poster", Identity{Actor: Actor{Login: "w1", Type: "User"}, Recorded: true, RecordedKnown: true}, SpecEditorAgent},
		{"a maintainer (role not looked up)", user("maria"), SpecEditorHuman},
		{"a reader editing their own issue", Identity{Actor: Actor{Login: "rita", Type: "User", Role: "read", RoleKnown: true}, RecordedKnown: true}, SpecEditorHuman},
		{"recorded-agent lookup failed", Identity{Actor: Actor{Login: "maria", Type: "User"}}, SpecEditorUnknown},
		{"ghost", user("ghost"), SpecEditorUnknown},
	} {
		if got := SpecEditor(c.id, agents); got != c.want {
			t.Errorf("%s: SpecEditor = %q, want %q", c.name, got, c.want)
		}
	}
}
