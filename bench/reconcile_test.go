package main

import (
	"context"
	"testing"
)

// TestReconcileQuick runs the reconcile bench's quick repository: it must
// seed, pass and report without error, the first pass complete.
func TestReconcileQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a repository through the simulator and runs reconcile passes")
	}
	figs, err := benchReconcile(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) == 0 || figs[0].Name != "first pass: charged requests" || figs[0].Value <= 0 {
		t.Fatalf("figures %+v", figs)
	}
}

// TestAdoptQuick runs the adoption bench's quick repository: a warden on an
// empty database adopts every item, makes no second check run or comment,
// and its next quiet pass stays within the quiet pass's budget.
func TestAdoptQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a repository through the simulator and runs reconcile passes")
	}
	figs, err := benchAdoptSection(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range figs {
		got[f.Name] = f.Value
	}
	if got["items adopted"] != 30 || got["second check runs and report or park comments"] != 0 ||
		got["the next quiet pass: charged requests"] > 15 || got["charged requests to adopt"] <= 0 {
		t.Fatalf("figures %+v", figs)
	}
}
