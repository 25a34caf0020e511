package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestPostgresQuick runs the PostgreSQL sections' quick workload when
// WARDEN_TEST_POSTGRES names a database: they must report without error
// (their own checks: each delivery stored once, and handled once).
func TestPostgresQuick(t *testing.T) {
	base := os.Getenv(postgresEnv)
	if base == "" {
		t.Skip("PostgreSQL bench skipped: set " + postgresEnv + " to a postgres:// URL to run it")
	}
	if testing.Short() {
		t.Skip("runs the ingress and the ledger against PostgreSQL")
	}
	cfg := ingestConfig{Deliveries: 200, Rounds: 1, Clients: 16, PayloadBytes: 10 << 10, Rate: 200, RateFor: 250 * time.Millisecond}
	figs, err := benchPostgres(context.Background(), base, cfg, 20)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]int{}
	for _, f := range figs {
		sections[f.Section]++
		if f.Unit == "/s" && f.Value <= 0 {
			t.Errorf("%s / %s: %v, want a positive rate", f.Section, f.Name, f.Value)
		}
	}
	for _, s := range []string{"ingest (PostgreSQL)", "ledger (PostgreSQL)", "dispatch (PostgreSQL)"} {
		if sections[s] == 0 {
			t.Errorf("no figures in section %q: %+v", s, figs)
		}
	}
}
