package main

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror/store"
)

// seed builds the repository: items opened by a maintainer (admitted at
// creation), other issues, merged PRs closing their items, and open PRs
// closing one item each, of three kinds in turn: the item claimed by the
// worker with the PR's branch recorded (held), claimed and released (a
// resume candidate), never claimed (also one). The heads carry another CI's
// check run: none, success, failure or in progress.
func (r *rcEnv) seed() error {
	e, cfg := r.e, r.cfg
	r.maria = e.Person("maria", "maintain")
	r.rita = e.Person("rita", "read")
	r.worker = e.Sim.As("worker-7[bot]")
	e.Sim.SetRole(e.Repo, "worker-7[bot]", "write")
	every := func(i int) error {
		if i%50 == 49 {
			return r.settle()
		}
		return nil
	}
	for i := 0; i < cfg.Items; i++ {
		is, err := r.maria.OpenIssue(e.Repo, fmt.Sprintf("Item %d: make the widget %d faster", i+1, i+1),
			fmt.Sprintf("What must be true: widget %d answers in under 10 ms.", i+1), "backlog")
		if err != nil {
			return err
		}
		r.items = append(r.items, is.Number)
		if err := every(i); err != nil {
			return err
		}
		// The other issues spread evenly among the items, however many.
		for k := i * cfg.Plain / cfg.Items; k < (i+1)*cfg.Plain/cfg.Items; k++ {
			if _, err := r.rita.OpenIssue(e.Repo, fmt.Sprintf("Question %d", k), "How do I run this?"); err != nil {
				return err
			}
		}
	}
	if err := r.settle(); err != nil {
		return err
	}
	// Items are spread over the kinds: merged PRs, open PRs, idle claims,
	// the rest untouched.
	stride := cfg.Items / (cfg.PRs + cfg.Merged + cfg.Idle)
	if stride < 1 {
		return fmt.Errorf("%d items are too few for %d PRs", cfg.Items, cfg.PRs+cfg.Merged+cfg.Idle)
	}
	next := 0
	pick := func() int {
		n := r.items[next*stride]
		next++
		return n
	}
	for j := 0; j < cfg.Merged; j++ {
		n := pick()
		pr, err := r.openPR(n, "maria")
		if err != nil {
			return err
		}
		if _, err := r.worker.ExternalCheck(e.Repo, pr.HeadSHA, "ci/build", "success"); err != nil {
			return err
		}
		if _, err := r.maria.MergePR(e.Repo, pr.Issue.Number, "squash"); err != nil {
			return fmt.Errorf("merge #%d: %w", pr.Issue.Number, err)
		}
		if err := every(j); err != nil {
			return err
		}
	}
	if err := r.settle(); err != nil {
		return err
	}
	for j := 0; j < cfg.PRs; j++ {
		n := pick()
		var token int64
		if j%3 != 2 {
			var err error
			if token, err = r.claim(n); err != nil {
				return err
			}
		}
		pr, err := r.openPR(n, "worker")
		if err != nil {
			return err
		}
		r.prs = append(r.prs, pr.Issue.Number)
		r.prItem[pr.Issue.Number] = n
		if j%3 == 1 {
			if err := r.release(n, token); err != nil {
				return err
			}
		}
		switch j % 4 {
		case 1:
			_, err = r.worker.ExternalCheck(e.Repo, pr.HeadSHA, "ci/build", "success")
		case 2:
			_, err = r.worker.ExternalCheck(e.Repo, pr.HeadSHA, "ci/build", "failure")
		case 3:
			_, err = r.worker.ExternalCheck(e.Repo, pr.HeadSHA, "ci/build", "")
		}
		if err != nil {
			return err
		}
		if err := every(j); err != nil {
			return err
		}
	}
	for j := 0; j < cfg.Idle; j++ {
		n := pick()
		if _, err := r.claim(n); err != nil {
			return err
		}
		if _, err := r.worker.Push(e.Repo, fmt.Sprintf("item-%d", n), "", map[string]string{fmt.Sprintf("src/item%d.go", n): "package src\n"}, "start #"+fmt.Sprint(n)); err != nil {
			return err
		}
	}
	if err := r.settle(); err != nil {
		return err
	}
	// A minute on, the timer pass sends the report edits the seeding
	// coalesced; then the first pass comes a minute later.
	r.clk.Advance(time.Minute)
	if _, err := e.Service.Mirror.Sweep(r.ctx); err != nil {
		return err
	}
	if err := r.settle(); err != nil {
		return err
	}
	r.clk.Advance(time.Minute)
	return nil
}

// openPR pushes a branch with one new file for item n and opens a PR
// closing it, by the worker or by maria.
func (r *rcEnv) openPR(n int, by string) (*ghsim.Pull, error) {
	a := r.worker
	if by == "maria" {
		a = r.maria
	}
	branch := fmt.Sprintf("item-%d", n)
	if _, err := a.Push(r.e.Repo, branch, "", map[string]string{fmt.Sprintf("src/item%d.go", n): fmt.Sprintf("package src\n\n// Widget%d is faster.\nfunc Widget%d() {}\n", n, n)},
		fmt.Sprintf("Make widget %d faster", n)); err != nil {
		return nil, fmt.Errorf("push %s: %w", branch, err)
	}
	pr, err := a.OpenPR(r.e.Repo, branch, "main", fmt.Sprintf("Make widget %d faster", n),
		fmt.Sprintf("Closes #%d\n\nThe widget now caches its answer.", n), false)
	if err != nil {
		return nil, fmt.Errorf("open a PR for #%d: %w", n, err)
	}
	return pr, nil
}

// claim claims item n through the agent API as worker-7, recording the
// branch item-<n>, and posts the claim marker.
func (r *rcEnv) claim(n int) (int64, error) {
	id := string(gating.IDFor(n))
	var res store.ClaimResult
	body := map[string]any{"owner": fmt.Sprintf("worker-7/run-%d", n), "branch": fmt.Sprintf("item-%d", n), "leaseSeconds": 86400}
	code, err := r.e.API(r.ctx, harness.WorkerToken, http.MethodPost, "/items/"+id+"/claim", body, &res)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK || !res.Granted || res.FencingToken == nil {
		reason := ""
		if res.Reason != nil {
			reason = *res.Reason
		}
		if res.Exclusion != nil {
			reason += " " + *res.Exclusion
		}
		return 0, fmt.Errorf("claim %s: %d, not granted (%s)", id, code, reason)
	}
	// The worker announces the claim, as the protocol has it.
	marker := fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=worker-7/run-%d region=local fence=%d at=%s -->\nPicking this up.",
		id, n, *res.FencingToken, r.clk.Now().UTC().Format("2006-01-02T15:04:05Z"))
	if _, err := r.worker.Comment(r.e.Repo, n, marker); err != nil {
		return 0, err
	}
	return *res.FencingToken, nil
}

func (r *rcEnv) release(n int, token int64) error {
	id := string(gating.IDFor(n))
	code, err := r.e.API(r.ctx, harness.WorkerToken, http.MethodPost, "/items/"+id+"/release", map[string]any{"fencingToken": token}, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("release %s: %d", id, code)
	}
	marker := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=worker-7/run-%d fence=%d result=released -->\nStepping back; the PR is ready for someone to pick up.", id, n, token)
	_, err = r.worker.Comment(r.e.Repo, n, marker)
	return err
}

// rcQuietPasses is how many passes with nothing changed follow the first
// full reconcile under the default budget.
const rcQuietPasses = 4

var rcPassSeq atomic.Int64
