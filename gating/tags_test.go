package gating

import (
	"strings"
	"testing"
)

var mandatoryTags = []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main"}

func with(extra ...string) []string { return append(append([]string(nil), mandatoryTags...), extra...) }

func TestCheckTags(t *testing.T) {
	cases := []struct {
		name string
		tags []string
		want []string // codes, in order
	}{
		{"complete set", with(), nil},
		{"two priorities", with("priority:P0"), []string{"duplicate-attribute-tag"}},
		{"two states", with("state:complete", "state:parked"), []string{"duplicate-attribute-tag"}},
		{"priority out of range", []string{"backlog", "priority:P4", "phase:research", "homeRegion:x", "baseBranch:main"}, []string{"invalid-priority"}},
		{"execution state on phase", []string{"backlog", "priority:P1", "phase:complete", "homeRegion:x", "baseBranch:main"}, []string{"phase-carries-state"}},
		{"phase review", []string{"backlog", "priority:P1", "phase:review", "homeRegion:x", "baseBranch:main"}, []string{"phase-carries-state"}},
		{"unknown phase", []string{"backlog", "priority:P1", "phase:design", "homeRegion:x", "baseBranch:main"}, []string{"invalid-phase"}},
		{"state:delivered", with("state:delivered"), []string{"unknown-state"}},
		{"state:done", with("state:done"), []string{"unknown-state"}},
		{"state:in-review", with("state:in-review"), []string{"unknown-state"}},
		{"state:ready", with("state:ready"), []string{"unknown-state"}},
		{"state:Complete is not state:complete", with("state:Complete"), []string{"unknown-state"}},
		{"missing two", []string{"backlog", "priority:P1", "phase:research"}, []string{"missing-mandatory-tag"}},
		{"missing the plain backlog tag", []string{"priority:P1", "phase:research", "homeRegion:x", "baseBranch:main"}, []string{"missing-mandatory-tag"}},
		{"empty region", with("homeRegion:"), []string{"duplicate-attribute-tag", "empty-tag-value"}},
		{"resource tags repeat by name", with("resource:box", "resource:gpu"), nil},
	}
	for _, c := range cases {
		got := CheckTags(c.tags, true)
		var codes []string
		for _, p := range got {
			codes = append(codes, p.Code)
		}
		if strings.Join(codes, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: got %v (%+v), want %v", c.name, codes, got, c.want)
		}
	}
	if p := CheckTags([]string{"priority:P1"}, false); len(p) != 0 {
		t.Errorf("mandatory=false still reports %v", p)
	}
}

func TestParkRoute(t *testing.T) {
	if ParkRoute(with("state:parked", "ruling-owner:pm", "ruling-topic:poison")) != nil {
		t.Error("a full route refused")
	}
	for _, tags := range [][]string{
		with("state:parked"),
		with("state:parked", "ruling-owner:pm"),
		with("state:parked", "ruling-owner:pm", "ruling-topic:"),
		with("state:parked", "ruling-owner:pm", "ruling-owner:alice", "ruling-topic:x"),
	} {
		if p := ParkRoute(tags); p == nil || p.Code != "park-without-route" {
			t.Errorf("%v: got %v, want park-without-route", tags, p)
		}
	}
}

func TestValidTagSyntax(t *testing.T) {
	for _, bad := range []string{"", "two words", "tab\there", ":value", strings.Repeat("x", 201), "bell\a", "bad\xffutf8"} {
		if ValidTagSyntax(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"backlog", "priority:P1", "resource:test-box", "pr:12", "a:b:c"} {
		if err := ValidTagSyntax(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}
