// Command bench measures warden against its ceilings and prints a table (and
// writes JSON) of each figure beside the limit it is judged against.
//
//	go run ./bench             # the full run
//	go run ./bench -quick      # a few seconds: CI's smoke run
//	go run ./bench -postgres postgres://...   # PostgreSQL figures too
//
// The PostgreSQL sections run when -postgres or WARDEN_TEST_POSTGRES names a
// database; each run works in a schema of its own, dropped at the end.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
	"time"
)

// Figure is one measured number beside its ceiling or aim.
type Figure struct {
	Section  string  `json:"section"`
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Workload string  `json:"workload"`
	Ceiling  string  `json:"ceiling,omitempty"`
}

func main() {
	quick := flag.Bool("quick", false, "a short smoke run (seconds), for CI")
	out := flag.String("json", "", "also write the figures as JSON to this file")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	only := flag.String("only", "", "run one section: ingest, serve, ledger, postgres, ready, apicalls, reconcile, adopt or faults")
	pgURL := flag.String("postgres", os.Getenv(postgresEnv), "a postgres:// URL for the PostgreSQL sections (default $"+postgresEnv+")")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	cfg := ingestConfig{Deliveries: 20000, Rounds: 3, Clients: 64, PayloadBytes: 10 << 10, Rate: 1000, RateFor: 5 * time.Second}
	if *quick {
		cfg = ingestConfig{Deliveries: 500, Rounds: 1, Clients: 16, PayloadBytes: 10 << 10, Rate: 200, RateFor: 500 * time.Millisecond}
	}
	scfg := serveConfig{ingest: cfg, drainLarge: 60000, drainSmall: 6000, drainCap: 2 * time.Minute}
	if *quick {
		scfg = serveConfig{ingest: cfg, drainLarge: 2000, drainSmall: 200, drainCap: 30 * time.Second}
	}
	cycles, readyRuns := 1000, 5
	if *quick {
		cycles, readyRuns = 50, 1
	}
	sections := []struct {
		name string
		run  func() ([]Figure, error)
	}{
		{"ingest", func() ([]Figure, error) { return benchIngest(ctx, cfg) }},
		{"serve", func() ([]Figure, error) { return benchServe(ctx, scfg) }},
		{"ledger", func() ([]Figure, error) { return benchLedger(ctx, cycles) }},
		{"postgres", func() ([]Figure, error) {
			if *pgURL == "" {
				fmt.Fprintln(os.Stderr, "bench: PostgreSQL sections skipped: pass -postgres postgres://... or set "+postgresEnv+" to run them")
				return nil, nil
			}
			return benchPostgres(ctx, *pgURL, cfg, cycles)
		}},
		{"ready", func() ([]Figure, error) { return benchReady(readyRuns), nil }},
		{"apicalls", func() ([]Figure, error) { return benchAPICalls(ctx, *quick) }},
		{"reconcile", func() ([]Figure, error) { return benchReconcile(ctx, *quick) }},
		{"adopt", func() ([]Figure, error) { return benchAdoptSection(ctx, *quick) }},
		{"faults", func() ([]Figure, error) { return benchFaults(ctx, *quick) }},
	}
	known := false
	for _, sec := range sections {
		known = known || *only == "" || *only == sec.name
	}
	if !known {
		fmt.Fprintf(os.Stderr, "bench: -only %q names no section (ingest, serve, ledger, postgres, ready, apicalls, reconcile, adopt, faults)\n", *only)
		os.Exit(2)
	}
	var figs []Figure
	for _, sec := range sections {
		if *only != "" && *only != sec.name {
			continue
		}
		f, err := sec.run()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", sec.name, err)
			os.Exit(1)
		}
		figs = append(figs, f...)
	}
	fmt.Printf("warden bench — %s, %d CPUs, %s\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version())
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tFIGURE\tVALUE\tWORKLOAD\tCEILING / AIM")
	for _, f := range figs {
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\n", f.Section, f.Name, formatValue(f.Value), f.Unit, f.Workload, f.Ceiling)
	}
	tw.Flush()
	if *out != "" {
		b, _ := json.MarshalIndent(figs, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

func formatValue(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
