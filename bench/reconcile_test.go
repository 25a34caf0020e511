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
