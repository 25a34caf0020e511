package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// The demo's third act: pull requests, guarded completion and the
// reconcile (CONTRACT.md §8, §9).
func prSteps() []demoStep {
	return []demoStep{
		{"a worker claims issue-2 on branch feature/shard, pushes, and opens a PR that says Closes #2", stepOpenPR},
		{"another agent opens a PR that links no item", stepUnlinkedPR},
		{"the worker marks issue-2 complete while its PR is still open", stepCompleteTooEarly},
		{"the PR is merged; the worker completes issue-2 under its claim", stepMergeAndComplete},
		{"a PR delivering issue-3 is merged and nobody completes it; a reconcile pass runs", stepMergedNotComplete},
		{"a second reconcile pass, with nothing changed", stepQuietPass},
	}
}

// backlogRun returns warden's check run on a head commit.
func (d *demo) backlogRun(sha string) (*ghsim.CheckRun, int) {
	var run *ghsim.CheckRun
	n := 0
	d.env.Sim.Locked(func() {
		for _, r := range d.env.Repo.CheckRuns {
			if r.Name == mirror.CheckRunName && r.HeadSHA == sha && r.App == nil {
				c := *r
				run = &c
				n++
			}
		}
	})
	return run, n
}

func stepOpenPR(ctx context.Context, d *demo) (string, error) {
	var c store.ClaimResult
	if _, err := d.env.API(ctx, harness.WorkerToken, http.MethodPost, "/items/"+d.pmItem+"/claim",
		map[string]any{"owner": "worker-7/shard", "leaseSeconds": 600, "branch": "feature/shard"}, &c); err != nil || !c.Granted {
		return "", fmt.Errorf("claim: %+v %v", c, err)
	}
	d.token = *c.FencingToken
	dev := d.env.Sim.As("worker-7[bot]")
	sha, err := dev.Push(d.env.Repo, "feature/shard", "main", map[string]string{"claims/shard.go": "package claims\n"}, "Shard the claim table")
	if err != nil {
		return "", err
	}
	pr, err := dev.OpenPR(d.env.Repo, "feature/shard", "main", "Shard the claim table", "Closes #2", false)
	if err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	d.pr, d.prSHA = pr.Issue.Number, sha
	run, n := d.backlogRun(sha)
	if run == nil || n != 1 {
		return "", fmt.Errorf("%d backlog check runs on %s, want 1", n, sha[:7])
	}
	if run.Conclusion != "success" {
		return "", fmt.Errorf("the check run is %s (%s), want success", run.Conclusion, run.Title)
	}
	return fmt.Sprintf("PR #%d: check run `backlog` %s, %q", pr.Issue.Number, run.Conclusion, run.Title), nil
}

func stepUnlinkedPR(ctx context.Context, d *demo) (string, error) {
	dev := d.env.Sim.As("pm-agent[bot]")
	sha, err := dev.Push(d.env.Repo, "chore/readme", "main", map[string]string{"README.md": "hello\n"}, "Tidy the README")
	if err != nil {
		return "", err
	}
	pr, err := dev.OpenPR(d.env.Repo, "chore/readme", "main", "Tidy the README", "Just a tidy-up.", false)
	if err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	run, _ := d.backlogRun(sha)
	if run == nil || run.Conclusion != "neutral" {
		return "", fmt.Errorf("the check run is %+v, want neutral", run)
	}
	return fmt.Sprintf("PR #%d: check run `backlog` neutral, %q (require_item: true would fail it)", pr.Issue.Number, run.Title), nil
}

func stepCompleteTooEarly(ctx context.Context, d *demo) (string, error) {
	var problem struct {
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	}
	code, err := d.env.API(ctx, harness.WorkerToken, http.MethodPatch, "/items/"+d.pmItem,
		map[string]any{"fencingToken": d.token, "addTags": []string{"state:complete", fmt.Sprintf("pr:%d", d.pr)}}, &problem)
	if err != nil {
		return "", err
	}
	if code < 400 || problem.Reason != "complete-with-open-pr" {
		return "", fmt.Errorf("answered %d %q, want a complete-with-open-pr refusal", code, problem.Reason)
	}
	return fmt.Sprintf("refused (%d): %s: %s", code, problem.Reason, problem.Detail), nil
}

func stepMergeAndComplete(ctx context.Context, d *demo) (string, error) {
	alice := d.env.Person("alice", "maintain")
	if _, err := alice.MergePR(d.env.Repo, d.pr, "merge"); err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	var it struct {
		Tags []string `json:"tags"`
	}
	code, err := d.env.API(ctx, harness.WorkerToken, http.MethodPatch, "/items/"+d.pmItem,
		map[string]any{"fencingToken": d.token, "addTags": []string{"state:complete", fmt.Sprintf("pr:%d", d.pr)}}, &it)
	if err != nil || code != http.StatusOK {
		return "", fmt.Errorf("completing answered %d (%v)", code, err)
	}
	return fmt.Sprintf("accepted: PR #%d merged into main, the item's baseBranch, links issue-2 and completes no other item", d.pr), nil
}

func stepMergedNotComplete(ctx context.Context, d *demo) (string, error) {
	dev := d.env.Sim.As("worker-7[bot]")
	if _, err := dev.Push(d.env.Repo, "feature/rotate", "main", map[string]string{"keys/rotate.go": "package keys\n"}, "Rotate keys"); err != nil {
		return "", err
	}
	pr, err := dev.OpenPR(d.env.Repo, "feature/rotate", "main", "Rotate keys", "Refs #3", false)
	if err != nil {
		return "", err
	}
	if _, err := d.env.Person("alice", "maintain").MergePR(d.env.Repo, pr.Issue.Number, "merge"); err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	res, err := d.env.Reconcile(ctx, mirror.ReconcileOptions{})
	if err != nil {
		return "", err
	}
	n := d.number(d.item)
	if err := d.reportLists(n, "merged-not-complete"); err != nil {
		return "", err
	}
	return fmt.Sprintf("pass: %d reads (%d answered 304), %d writes; issue-3's report comment lists merged-not-complete (PR #%d)",
		res[0].Calls.Reads, res[0].Calls.NotModified, res[0].Calls.Writes, pr.Issue.Number), nil
}

func stepQuietPass(ctx context.Context, d *demo) (string, error) {
	res, err := d.env.Reconcile(ctx, mirror.ReconcileOptions{})
	if err != nil {
		return "", err
	}
	r := res[0]
	if !r.Complete {
		return "", errors.New("the pass did not complete: " + r.Stopped)
	}
	if r.Calls.Writes != 0 {
		return "", fmt.Errorf("a quiet pass wrote %d times: %s", r.Calls.Writes, strings.Join(r.Actions, "; "))
	}
	return fmt.Sprintf("%d reads, %d of them 304 (not charged), 0 writes", r.Calls.Reads, r.Calls.NotModified), nil
}
