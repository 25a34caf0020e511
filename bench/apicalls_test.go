package main

import (
	"context"
	"testing"
)

// TestAPICallsQuick runs the calls-per-delivery bench's quick workload: it
// must replay without error and report at least 150 deliveries.
func TestAPICallsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("replays ~150 deliveries through the simulator")
	}
	figs, err := benchAPICalls(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) == 0 || figs[0].Name != "deliveries replayed" || figs[0].Value < 150 {
		t.Fatalf("figures %+v", figs)
	}
}

// TestDispatchCallsQuick runs the dispatch-by-assignment rounds: each round
// must do what its figures claim to measure (the round checks the refusal,
// the claim and the completion on GitHub). The refused act writes three
// times (unassign, report comment, the failing check run on the agent's
// draft pull request), the granted act twice (claim marker, check run); the
// issues.assigned delivery alone makes at least its own writes (it may also
// write the check run, when it judges the agent's pull request first).
func TestDispatchCallsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two dispatch rounds through the simulator")
	}
	figs, err := benchDispatchCalls(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range figs {
		got[f.Name] = f.Value
	}
	const refused, granted = "dispatch: refused assignment (awaiting admission), ", "dispatch: granted assignment (claim), "
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{refused + "whole act, writes median", 3, 3},
		{granted + "whole act, writes median", 2, 2},
		{refused + "its issues.assigned delivery, writes median", 2, 3},
		{granted + "its issues.assigned delivery, writes median", 1, 2},
		{"dispatch: agent PR lifecycle (granted, work, merged), writes median", 4, 8},
	} {
		v, ok := got[c.name]
		if !ok || v < c.min || v > c.max {
			t.Errorf("%s = %v (present %t), want %v to %v", c.name, v, ok, c.min, c.max)
		}
	}
}
