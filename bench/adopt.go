package main

import (
	"context"
	"fmt"
	"strings"

	"time"

	"github.com/wardenhq/warden/gating"

	"github.com/wardenhq/warden/mirror"
)

// The adoption figure (issue 17): a repository of 1,000 issues (300 items,
// 100 pull requests, 50 of them merged) that one warden saw live, then a
// warden started on an empty database with no delivery at all (GitHub's
// delivery log expired): the GitHub requests its passes charge, with the
// default budget and ten minutes apart as the service's loop runs them,
// until the census has adopted every labelled issue and a pass completes;
// then the next pass, with nothing changed (aim: within the quiet pass's
// budget of 15 charged requests).
//
// The floor is what adoption cannot do without: the census's pages (100
// issues a page), one page of comments per item (its trail) and one of
// label events per item (its admission: a label that is not on the issue
// may never have been there, or an agent may have removed it), one read per
// merged pull request (the census finds it; the open ones are listed by the
// pulls phase, 100 a page). Above it: the check-run lookups of the open
// heads, the green-PR reads, and the report comments' edits.
func benchAdoptSection(ctx context.Context, quick bool) ([]Figure, error) {
	cfg := rcConfig{Items: 300, Plain: 600, PRs: 50, Merged: 50}
	if quick {
		cfg = rcConfig{Items: 30, Plain: 60, PRs: 5, Merged: 5}
	}
	a, err := newRCEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer a.e.Close()
	if p, err := a.pass("live: first pass", 1<<20); err != nil {
		return nil, err
	} else if !p.Result.Complete {
		return nil, fmt.Errorf("adopt: the live warden's pass did not complete: %s", p.Result.Stopped)
	}
	return benchAdopt(a)
}

// benchAdopt starts a warden over on an empty database in r and measures
// its passes until the backlog is adopted, then the next quiet pass.
func benchAdopt(r *rcEnv) ([]Figure, error) {
	const sec = "adopt"
	cfg := r.cfg
	issues := cfg.Items + cfg.Plain + cfg.PRs + cfg.Merged
	// Second copies: a head with two of warden's check runs, an issue with
	// two of its report or park comments. Adoption must make none.
	copies := func() (runs, comments int) {
		r.e.Sim.Locked(func() {
			perHead := map[string]int{}
			for _, c := range r.e.Repo.CheckRuns {
				if c.App == nil && c.Name == mirror.CheckRunName {
					if perHead[c.HeadSHA]++; perHead[c.HeadSHA] > 1 {
						runs++
					}
				}
			}
			perIssue := map[string]int{}
			for _, c := range r.e.Repo.Comments {
				if c.User.Login != r.e.Sim.BotLogin() || c.Issue == nil {
					continue
				}
				for _, prefix := range []string{gating.ReportPrefix, gating.ParkPrefix} {
					if strings.HasPrefix(c.Body, prefix) {
						k := fmt.Sprintf("%d %s", c.Issue.Number, prefix)
						if perIssue[k]++; perIssue[k] > 1 {
							comments++
						}
					}
				}
			}
		})
		return runs, comments
	}
	runs0, comments0 := copies()
	r.e.Sim.ExpireDeliveryLog()
	if err := r.e.StartOver(r.ctx, "adopt.db"); err != nil {
		return nil, fmt.Errorf("adopt: %w", err)
	}
	if err := r.settle(); err != nil {
		return nil, err
	}
	var passes []rcPass
	charged, reads, writes, adopted := 0, 0, 0, 0
	for i := 1; ; i++ {
		p, err := r.pass(fmt.Sprintf("adopting: pass %d", i), 0)
		if err != nil {
			return nil, err
		}
		passes = append(passes, p)
		charged += p.charged()
		reads += p.Result.Calls.Reads
		writes += p.Result.Calls.Writes
		adopted += p.Result.Adopted
		r.clk.Advance(10 * time.Minute)
		if p.Result.Complete && p.Result.Unadopted == 0 && p.Result.Adopted == 0 {
			break
		}
		if i == 40 {
			return nil, fmt.Errorf("adopt: 40 passes did not adopt the backlog (%d left): %s", p.Result.Unadopted, p.Result.Stopped)
		}
	}
	quiet, err := r.pass("adopted: the next pass, nothing changed", 0)
	if err != nil {
		return nil, err
	}
	r.print(append(passes, quiet), nil)
	runs1, comments1 := copies()
	floor := (issues+99)/100 + 2*cfg.Items + cfg.Merged + (cfg.PRs+99)/100
	fmt.Printf("adopt — %d issues (%d items, %d open and %d merged PRs) from an empty database: %d passes, %d adopted, %d charged requests (%d reads, %d writes; floor %d); the next quiet pass %d charged\n\n",
		issues, cfg.Items, cfg.PRs, cfg.Merged, len(passes), adopted, charged, reads, writes, floor, quiet.charged())
	w := fmt.Sprintf("%d issues: %d items, %d open + %d merged PRs; default budget %d", issues, cfg.Items, cfg.PRs, cfg.Merged, mirror.DefaultPassBudget)
	return []Figure{
		{sec, "items adopted", float64(adopted), "items", w, fmt.Sprintf("all %d", cfg.Items)},
		{sec, "passes to adopt", float64(len(passes)), "passes", w, "ten minutes apart"},
		{sec, "charged requests to adopt", float64(charged), "requests", w, fmt.Sprintf("floor %d", floor)},
		{sec, "charged requests / floor", float64(charged) / float64(floor), "ratio", w, "1.0 = the floor"},
		{sec, "the next quiet pass: charged requests", float64(quiet.charged()), "requests", w, "aim ≤ 15"},
		{sec, "second check runs and report or park comments", float64(runs1 - runs0 + comments1 - comments0), "copies", w, "must be 0"},
	}, nil
}
