package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror/store"
)

// The demo's fourth act: GitHub's own agent dispatch (issue 20). A person
// assigns an issue to GitHub's coding agent, which starts at once and never
// calls warden; warden treats the assignment as a claim when the item is
// claimable, and undoes it, saying why, when it is not.
func dispatchSteps() []demoStep {
	return []demoStep{
		{"the project-manager agent files an item; alice assigns it to GitHub's coding agent (Copilot) before anyone admitted it", stepDispatchRefused},
		{"alice creates an admitted item and assigns it to Copilot", stepDispatchClaimed},
		{"Copilot works on its pull request: a commit, the title without [WIP], ready for review", stepDispatchWork},
		{"alice merges Copilot's pull request", stepDispatchMerged},
	}
}

// assigneesOf is issue n's assignees' logins on the simulated GitHub.
func (d *demo) assigneesOf(n int) []string {
	var out []string
	d.env.Sim.Locked(func() {
		if i := d.env.Repo.Issues[n]; i != nil {
			for _, u := range i.Assignees {
				out = append(out, u.Login)
			}
		}
	})
	return out
}

// claimOf is GET /items/{id}/claim.
func (d *demo) claimOf(ctx context.Context, id string) (store.ClaimStatus, error) {
	var st store.ClaimStatus
	code, err := d.env.API(ctx, harness.WorkerToken, http.MethodGet, "/items/"+id+"/claim", nil, &st)
	if err != nil || code != http.StatusOK {
		return st, fmt.Errorf("GET /items/%s/claim answered %d (%v)", id, code, err)
	}
	return st, nil
}

// commentStarting is the first line of the last comment on issue n by
// warden whose body starts with prefix ("" when there is none).
func (d *demo) commentStarting(n int, prefix string) string {
	c, ok := d.env.WardenComment(n, prefix)
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(c.Body, "\n")
	return line
}

// agentPR is the number, head and state of the pull request the coding
// agent opened for issue n.
func (d *demo) agentPR(n int) (num int, sha, title, state string, draft bool, err error) {
	pr := d.env.Sim.CodingAgentPR(d.env.Repo, n)
	if pr == nil {
		return 0, "", "", "", false, fmt.Errorf("the coding agent opened no pull request for #%d", n)
	}
	d.env.Sim.Locked(func() {
		num, sha, title, state, draft = pr.Issue.Number, pr.HeadSHA, pr.Issue.Title, pr.Issue.State, pr.Draft
	})
	return num, sha, title, state, draft, nil
}

func stepDispatchRefused(ctx context.Context, d *demo) (string, error) {
	d.env.Sim.EnableCodingAgent(d.env.Repo)
	var created struct {
		ID string `json:"id"`
	}
	code, err := d.env.API(ctx, harness.PMToken, http.MethodPost, "/items", map[string]any{
		"title": "Compress old snapshots", "specification": "What must be true: ...", "tags": []string{"priority:P2"},
	}, &created)
	if err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("POST /items answered %d (%v)", code, err)
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	n := d.number(created.ID)
	alice := d.env.Person("alice", "maintain")
	recs, err := d.newDeliveries(ctx, func() error {
		_, err := alice.Assign(d.env.Repo, n, ghsim.CodingAgentLogin)
		return err
	})
	if err != nil {
		return "", err
	}
	if as := d.assigneesOf(n); len(as) != 0 {
		return "", fmt.Errorf("#%d is still assigned to %v; warden should have removed the agent", n, as)
	}
	st, err := d.claimOf(ctx, created.ID)
	if err != nil {
		return "", err
	}
	if st.Claimed {
		return "", fmt.Errorf("the refused assignment left a claim: %+v", st)
	}
	body, err := d.reportOf(n)
	if err != nil {
		return "", err
	}
	line := reportLine(body, "agent-dispatch-refused")
	if line == "" || !strings.Contains(line, "awaiting-admission") {
		return "", fmt.Errorf("#%d's report comment has no agent-dispatch-refused line naming awaiting-admission:\n%s", n, body)
	}
	assigned := ""
	for _, r := range recs {
		if r.Event == "issues" && r.Action == "assigned" {
			assigned = r.Outcome
		}
	}
	if assigned == "" {
		return "", fmt.Errorf("no issues.assigned delivery was handled: %s", describe(recs))
	}
	// GitHub's agent started at once (it does not wait for warden): its
	// draft pull request stays open, and the backlog check run fails it.
	pr, sha, _, _, _, err := d.agentPR(n)
	if err != nil {
		return "", err
	}
	run, _ := d.backlogRun(sha)
	if run == nil || run.Conclusion != "failure" {
		return "", fmt.Errorf("the backlog check run on the agent's PR #%d for an unadmitted item is %+v, want failure", pr, run)
	}
	return fmt.Sprintf("issues.assigned → %s; #%d has no assignee again and no claim; its report comment says: %s; the agent's draft PR #%d, opened before warden undid the assignment: check run `backlog` %s, %q",
		assigned, n, plainLine(line), pr, run.Conclusion, run.Title), nil
}

// plainLine is a report comment's finding line without its Markdown: the
// text between its double backticks when it has them.
func plainLine(line string) string {
	if _, rest, ok := strings.Cut(line, "``"); ok {
		if text, _, ok := strings.Cut(rest, "``"); ok {
			return strings.ReplaceAll(text, "\u200b", "")
		}
	}
	return line
}

// reportLine is the line of a report comment that names code.
func reportLine(body, code string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, code) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func stepDispatchClaimed(ctx context.Context, d *demo) (string, error) {
	var created struct {
		ID string `json:"id"`
	}
	code, err := d.env.API(ctx, harness.HumanToken, http.MethodPost, "/items", map[string]any{
		"title": "Retry the webhook sender", "specification": "What must be true: ...", "tags": []string{"priority:P1"},
	}, &created)
	if err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("POST /items answered %d (%v)", code, err)
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	d.dispatchItem = created.ID
	n := d.number(created.ID)
	alice := d.env.Person("alice", "maintain")
	if _, err := d.newDeliveries(ctx, func() error {
		_, err := alice.Assign(d.env.Repo, n, ghsim.CodingAgentLogin)
		return err
	}); err != nil {
		return "", err
	}
	st, err := d.claimOf(ctx, created.ID)
	if err != nil {
		return "", err
	}
	owner := fmt.Sprintf("copilot/issue-%d", n)
	if !st.IsHeld || st.Owner == nil || *st.Owner != owner || st.FencingToken == nil || st.LeaseExpiresAtUtc == nil {
		return "", fmt.Errorf("after the assignment the claim is %+v, want held by %s", st, owner)
	}
	d.dispatchFence = *st.FencingToken
	marker := d.commentStarting(n, fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s ", created.ID, owner))
	if marker == "" {
		return "", fmt.Errorf("#%d has no claim marker for %s", n, owner)
	}
	if as := d.assigneesOf(n); !slices.Equal(as, []string{ghsim.CodingAgentLogin}) {
		return "", fmt.Errorf("#%d assignees %v, want the agent kept", n, as)
	}
	pr, _, title, _, draft, err := d.agentPR(n)
	if err != nil {
		return "", err
	}
	d.agentPull = pr
	return fmt.Sprintf("claim held by %s, fence %d, until %s; warden posted the marker on the agent's behalf: %s; Copilot opened draft=%t PR #%d %q",
		owner, d.dispatchFence, *st.LeaseExpiresAtUtc, marker, draft, pr, title), nil
}

func stepDispatchWork(ctx context.Context, d *demo) (string, error) {
	if d.dispatchItem == "" {
		return "", errors.New("no item was dispatched in the step before")
	}
	n := d.number(d.dispatchItem)
	before, err := d.claimOf(ctx, d.dispatchItem)
	if err != nil || before.LeaseExpiresAtUtc == nil {
		return "", fmt.Errorf("the claim before the work: %+v %v", before, err)
	}
	d.clock.Advance(10 * time.Minute)
	recs, err := d.newDeliveries(ctx, func() error {
		return d.env.Sim.CodingAgentWork(d.env.Repo, n, map[string]string{"sender/retry.go": "package sender\n"})
	})
	if err != nil {
		return "", err
	}
	after, err := d.claimOf(ctx, d.dispatchItem)
	if err != nil {
		return "", err
	}
	was, err1 := time.Parse(time.RFC3339Nano, *before.LeaseExpiresAtUtc)
	now, err2 := time.Parse(time.RFC3339Nano, derefOr(after.LeaseExpiresAtUtc, ""))
	if err1 != nil || err2 != nil || !after.IsHeld || now.Sub(was) < 9*time.Minute {
		return "", fmt.Errorf("ten minutes on, after the agent's work, the lease ends %s (was %s), want renewed: %+v",
			derefOr(after.LeaseExpiresAtUtc, "?"), *before.LeaseExpiresAtUtc, after)
	}
	pr, sha, title, _, draft, err := d.agentPR(n)
	if err != nil {
		return "", err
	}
	run, _ := d.backlogRun(sha)
	if run == nil || run.Conclusion != "success" {
		return "", fmt.Errorf("the backlog check run on PR #%d's head %s is %+v, want success", pr, sha[:7], run)
	}
	var events []string
	for _, r := range recs {
		if r.Action == "" {
			events = append(events, r.Event)
		} else {
			events = append(events, r.Event+"."+r.Action)
		}
	}
	return fmt.Sprintf("%s; the claim renewed to %s; PR #%d %q draft=%t, check run `backlog` %s, %q",
		strings.Join(events, ", "), *after.LeaseExpiresAtUtc, pr, title, draft, run.Conclusion, run.Title), nil
}

func stepDispatchMerged(ctx context.Context, d *demo) (string, error) {
	if d.dispatchItem == "" || d.agentPull == 0 {
		return "", errors.New("no agent pull request from the steps before")
	}
	n := d.number(d.dispatchItem)
	if _, err := d.newDeliveries(ctx, func() error {
		_, err := d.env.Person("alice", "maintain").MergePR(d.env.Repo, d.agentPull, "squash")
		return err
	}); err != nil {
		return "", err
	}
	var it struct {
		Tags []string `json:"tags"`
	}
	if code, err := d.env.API(ctx, harness.WorkerToken, http.MethodGet, "/items/"+d.dispatchItem, nil, &it); err != nil || code != http.StatusOK {
		return "", fmt.Errorf("GET /items/%s answered %d (%v)", d.dispatchItem, code, err)
	}
	prTag := fmt.Sprintf("pr:%d", d.agentPull)
	if !slices.Contains(it.Tags, "state:complete") || !slices.Contains(it.Tags, prTag) {
		return "", fmt.Errorf("after the merge the item's tags are %v, want state:complete and %s", it.Tags, prTag)
	}
	st, err := d.claimOf(ctx, d.dispatchItem)
	if err != nil {
		return "", err
	}
	if st.IsHeld || st.State != "released" {
		return "", fmt.Errorf("after the completion the claim is %+v, want released", st)
	}
	outcome := d.commentStarting(n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=copilot/issue-%d fence=%d result=complete", d.dispatchItem, n, d.dispatchFence))
	if outcome == "" {
		return "", fmt.Errorf("#%d has no outcome marker result=complete", n)
	}
	var state string
	d.env.Sim.Locked(func() { state = d.env.Repo.Issues[n].State })
	if state != "closed" {
		return "", fmt.Errorf("#%d is %s after the merge, want closed (the PR says Fixes #%d)", n, state, n)
	}
	return fmt.Sprintf("PR #%d merged into main; issue #%d closed; the item has state:complete and %s, written under the agent's claim; %s; the claim released — the agent never called warden",
		d.agentPull, n, prTag, outcome), nil
}

func derefOr(s *string, or string) string {
	if s == nil {
		return or
	}
	return *s
}
