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
