package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

type checkSuitePayload struct {
	Action     string `json:"action"`
	CheckSuite struct {
		HeadSHA      string `json:"head_sha"`
		PullRequests []struct {
			Number int `json:"number"`
			Base   struct {
				Repo struct {
					ID int64 `json:"id"`
				} `json:"repo"`
			} `json:"base"`
		} `json:"pull_requests"`
	} `json:"check_suite"`
	CheckRun struct {
		Name       string              `json:"name"`
		HeadSHA    string              `json:"head_sha"`
		App        *struct{ ID int64 } `json:"app"`
		CheckSuite struct {
			HeadSHA string `json:"head_sha"`
		} `json:"check_suite"`
		PullRequests []struct {
			Number int `json:"number"`
			Base   struct {
				Repo struct {
					ID int64 `json:"id"`
				} `json:"repo"`
			} `json:"base"`
		} `json:"pull_requests"`
	} `json:"check_run"`
	Repository struct {
		ID int64 `json:"id"`
	} `json:"repository"`
}

// HandleCheckSuite re-runs the `backlog` check on a suite's head when
// GitHub asks (requested, rerequested) — only for heads of open PRs in this
// repository: a suite from a fork, or for a branch with no PR, carries no
// pull_requests and is left alone.
func (m *Mirror) HandleCheckSuite(ctx context.Context, ev Event) (string, error) {
	if ev.Action != "requested" && ev.Action != "rerequested" {
		return OutcomeIgnored, nil
	}
	var p checkSuitePayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", payloadErr("check_suite payload: %w", err)
	}
	ours := 0
	for _, pr := range p.CheckSuite.PullRequests {
		if pr.Base.Repo.ID == p.Repository.ID {
			ours++
		}
	}
	if ev.Action == "requested" {
		ctx = withNewHead(ctx, p.CheckSuite.HeadSHA) // a new suite: no run of warden's on it yet
	}
	return m.recheckHead(ctx, ev, p.Repository.ID, p.CheckSuite.HeadSHA, ours)
}

// HandleCheckRun re-runs the `backlog` check when a person asks GitHub to
// re-run it (rerequested); other check runs are not warden's.
func (m *Mirror) HandleCheckRun(ctx context.Context, ev Event) (string, error) {
	if ev.Action != "rerequested" {
		return OutcomeIgnored, nil
	}
	var p checkSuitePayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", payloadErr("check_run payload: %w", err)
	}
	if p.CheckRun.Name != CheckRunName {
		return "not warden's check run: " + OutcomeIgnored, nil
	}
	ours := 0
	for _, pr := range p.CheckRun.PullRequests {
		if pr.Base.Repo.ID == p.Repository.ID {
			ours++
		}
	}
	sha := p.CheckRun.HeadSHA
	if sha == "" {
		sha = p.CheckRun.CheckSuite.HeadSHA
	}
	return m.recheckHead(ctx, ev, p.Repository.ID, sha, ours)
}

func (m *Mirror) recheckHead(ctx context.Context, ev Event, repoID int64, sha string, prs int) (string, error) {
	if ev.FromSelf {
		return OutcomeRecorded, nil
	}
	if prs == 0 || sha == "" {
		return "no pull request of this repository: " + OutcomeIgnored, nil
	}
	repo, err := m.Ledger.RepoByID(ctx, repoID)
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	recorded, err := m.Ledger.PullsWithHead(ctx, repo.ID, sha)
	if err != nil {
		return "", err
	}
	if len(recorded) == 0 {
		// warden has not seen the PR yet (its delivery is behind, or was
		// lost): the reconcile's next read of the open PRs records it.
		return fmt.Sprintf("no open pull request recorded with head %s yet", shortSHA(sha)), nil
	}
	out, err := m.checkHead(ctx, repo, sha)
	if err != nil {
		return "", err
	}
	if out == "" {
		out = fmt.Sprintf("check run on %s unchanged", shortSHA(sha))
	}
	return out, nil
}

// recheckPRsOf re-runs the check runs of the open PRs that link any of the
// items or their dependents (after an item's admission, park, claim or tags
// changed).
func (m *Mirror) recheckPRsOf(ctx context.Context, repo store.Repo, items []gating.ItemID) ([]string, error) {
	if len(items) == 0 || !m.settings(ctx, repo).CheckRun {
		return nil, nil
	}
	open, err := m.Ledger.OpenPulls(ctx, repo.ID)
	if err != nil || len(open) == 0 {
		return nil, err
	}
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		return nil, err
	}
	want := map[gating.ItemID]bool{}
	for _, id := range items {
		want[id] = true
	}
	// Their dependents' PRs too: a blocker's state is named in their
	// verdicts (§3: a blocker's state changes).
	for _, c := range rs.Snapshot.Items {
		for _, t := range c.Item.Targets(gating.BlockedBy) {
			if want[gating.ItemID(t)] {
				want[c.Item.ID] = true
			}
		}
	}
	heads := map[string]bool{}
	var outs []string
	for _, p := range open {
		for _, l := range gating.PRLinks(p.PullRequest, repo.FullName, rs.Snapshot) {
			if want[l.Item] && !heads[p.HeadSHA] {
				heads[p.HeadSHA] = true
				out, err := m.checkHeadIn(ctx, repo, m.settings(ctx, repo), rs, p.HeadSHA)
				if err != nil {
					return nil, err
				}
				if out != "" {
					outs = append(outs, out)
				}
			}
		}
	}
	return outs, nil
}
