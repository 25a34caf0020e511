package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestPostgresQuick runs the PostgreSQL sections' quick workload when
// WARDEN_TEST_POSTGRES names a database: they must report without error.
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
	if len(figs) == 0 || figs[0].Section != "ingest (PostgreSQL)" || figs[0].Value <= 0 || figs[len(figs)-1].Section != "ledger (PostgreSQL)" {
		t.Fatalf("figures %+v", figs)
	}
}
