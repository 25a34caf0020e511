package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// HandlePullRequest records a pull request and re-runs the `backlog` check
// on its head (opened, reopened, synchronize, edited, ready_for_review); on
// close it re-runs the check runs of the other PRs of its head and settles
// the items it linked (merged-not-complete, complete-with-open-pr).
func (m *Mirror) HandlePullRequest(ctx context.Context, ev Event) (string, error) {
	var p github.PullRequestEvent
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", payloadErr("pull_request payload: %w", err)
	}
	switch ev.Action {
	case "opened", "reopened", "synchronize", "edited", "ready_for_review", "closed", "converted_to_draft":
	default:
		return OutcomeIgnored, nil
	}
	repo, err := m.Ledger.RepoByID(ctx, p.GetRepo().GetID())
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	if p.PullRequest == nil {
		return "", payloadErr("pull_request payload: no pull_request")
	}
	rec := pullRecordOf(p.PullRequest)
	applied, err := m.Ledger.RecordPull(ctx, repo.ID, rec)
	if err != nil {
		return "", err
	}
	if ev.FromSelf {
		return OutcomeRecorded, nil
	}
	outs := []string{fmt.Sprintf("pull request #%d %s", rec.Number, ev.Action)}
	if !applied {
		outs = append(outs, "older than recorded")
	}
	if ev.Action != "closed" {
		// Activity on a PR from a claim's branch, or by its holder, is
		// evidence of work (CONTRACT.md §9).
		// A fork's branch of the same name is not the claim's.
		head := ""
		if strings.EqualFold(rec.HeadRepoFullName, repo.FullName) {
			head = rec.HeadRef
		}
		act, err := m.Ledger.RecordActivity(ctx, repo.ID, store.Activity{Kind: store.ActivityPull, Login: p.GetSender().GetLogin(),
			Branch: head, PR: rec.Number, Action: ev.Action, At: rec.UpdatedAt})
		if err != nil {
			return "", err
		}
		for _, e := range act.Evidence {
			outs = append(outs, fmt.Sprintf("evidence of work for %s fence %d", e.Item, e.Fence))
		}
		// A dispatched agent's pull request renews its dispatch claims
		// (dispatch_renew.go).
		renewed, err := m.dispatchPullEvidence(ctx, repo, rec, p.PullRequest.GetUser().GetType(), ev.Action)
		if err != nil {
			return "", err
		}
		if renewed != "" {
			outs = append(outs, renewed)
		}
	}
	hctx := ctx
	if ev.Action == "opened" || ev.Action == "synchronize" {
		hctx = withNewHead(ctx, rec.HeadSHA) // a head no run can be on yet
	}
	out, err := m.checkHead(hctx, repo, rec.HeadSHA)
	if err != nil {
		return "", err
	}
	if out != "" {
		outs = append(outs, out)
	}
	if ev.Action == "closed" {
		// A dispatched agent's pull request closed unmerged ends its claim
		// (dispatch_pull.go).
		// Merged, it completes the items it proves (dispatch_complete.go).
		for _, end := range []func(context.Context, Event, store.Repo, store.PullRecord, string) (string, error){m.dispatchPullClosed, m.dispatchPullMerged} {
			out, err := end(ctx, ev, repo, rec, p.PullRequest.GetUser().GetType())
			if err != nil {
				return "", err
			}
			if out != "" {
				outs = append(outs, out)
			}
		}
	}
	if ev.Action == "closed" || ev.Action == "synchronize" || ev.Action == "edited" {
		// Items it linked (or linked before an edit) are re-judged.
		settled, err := m.settleLinked(ctx, repo, rec)
		if err != nil {
			return "", err
		}
		outs = append(outs, settled...)
	}
	return strings.Join(outs, "; "), nil
}

// settleLinked settles the items a PR links: their divergences (a merge
// that completes nothing, completion with the PR still open) and their
// report comments.
func (m *Mirror) settleLinked(ctx context.Context, repo store.Repo, pr store.PullRecord) ([]string, error) {
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		return nil, err
	}
	var outs []string
	links := gating.PRLinks(pr.PullRequest, repo.FullName, rs.Snapshot)
	if len(links) == 0 {
		return nil, nil
	}
	if err := m.reconcileItems(ctx, repo); err != nil {
		return nil, err
	}
	for _, l := range links {
		out, err := m.settleItem(ctx, repo, l.Item.Number())
		if err != nil {
			return nil, err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	return outs, nil
}
