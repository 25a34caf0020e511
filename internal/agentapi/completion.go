package agentapi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Completion refusal reasons (CONTRACT.md §9).
const (
	reasonUnproven    = gating.ReasonCompletionUnproven
	directDeployedTag = gating.DirectDeploymentTag
)

// proveCompletion gathers the facts the completion proof reads (CONTRACT.md
// §9 "completion") and asks gating.ProveCompletion: the pull requests the
// item's pr:<n> tags name (one read each), the repository's items, and for
// a phase:research item whether its findings were commented on the issue
// during the claim. It returns the WriteOptions for the ledger:
// CompletionProven, or the reason and detail of the refusal (the ledger
// refuses the write with them). grant is the item's current grant (nil:
// never claimed); token the presented fence; adopting the
// direct-deployment row of POST /items/adopt (born complete, no claim).
func (h *handler) proveCompletion(ctx context.Context, repo store.Repo, after *gating.Item, cur *store.Item, token *int64, adopting bool) (store.WriteOptions, error) {
	in := gating.CompletionInput{Item: after, Token: token, PRs: map[int]*gating.PullRequest{}, DefaultBranch: repo.DefaultBranch,
		RepoFullName: repo.FullName, Adopting: adopting}
	var grant *store.Grant
	if cur != nil {
		grant = cur.Grant
		in.Claim = gating.ClaimView{Fence: cur.Fence.Token, Released: cur.Fence.Released}
		if grant != nil {
			in.Claim.Owner, in.Claim.GrantedAt, in.Claim.Purpose, in.Claim.Branch = grant.Owner, grant.GrantedAt, grant.Purpose, grant.Branch
		}
	}
	if phase, _ := after.Tag("phase"); phase == "research" && grant != nil && grant.ReleasedAt == nil {
		bot, err := h.gh.BotLogin(ctx)
		if err != nil {
			return store.WriteOptions{}, err
		}
		// GitHub's timestamps are whole seconds.
		since := grant.GrantedAt.Truncate(time.Second)
		cs, err := h.gh.CommentsSince(ctx, repo, after.ID.Number(), since)
		if err != nil {
			return store.WriteOptions{}, err
		}
		// Findings are prose: a claim or outcome marker (or any warden
		// marker) is bookkeeping, not findings.
		in.FindingsCommented = slices.ContainsFunc(cs, func(c Comment) bool {
			return !c.CreatedAt.Before(since) && !strings.EqualFold(c.Author, bot) && !strings.HasPrefix(strings.TrimSpace(c.Body), "<!-- backlog-")
		})
	}
	for _, t := range after.Tags {
		v, ok := strings.CutPrefix(t, "pr:")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || strconv.Itoa(n) != v {
			continue // ProveCompletion refuses a malformed tag
		}
		if _, seen := in.PRs[n]; seen {
			continue
		}
		pr, err := h.gh.PullRequest(ctx, repo, n)
		if s := githubStatus(err); s == http.StatusNotFound || s == http.StatusGone {
			in.PRs[n] = nil
			continue
		}
		if err != nil {
			return store.WriteOptions{}, err
		}
		state := pr.State
		in.PRs[n] = &gating.PullRequest{Number: n, State: state, Merged: pr.Merged, HeadRef: pr.Head, BaseRef: pr.Base,
			HeadRepoFullName: pr.HeadRepo, Body: pr.Body}
	}
	all, err := h.scan(ctx, repo.ID)
	if err != nil {
		return store.WriteOptions{}, err
	}
	for i := range all {
		if all[i].ID != after.ID {
			in.Items = append(in.Items, all[i].Snapshot())
		}
	}
	v := gating.ProveCompletion(in)
	if v.Proven {
		return store.WriteOptions{CompletionProven: true}, nil
	}
	return store.WriteOptions{CompletionReason: v.Reason, CompletionDetail: v.Detail}, nil
}

// scan pages every item of a repository.
func (h *handler) scan(ctx context.Context, repoID int64) ([]store.Item, error) {
	var out []store.Item
	after := 0
	for {
		page, err := h.ledger.List(ctx, repoID, after, maxLimit)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return out, nil
		}
		out = append(out, page...)
		after = page[len(page)-1].ID.Number()
	}
}
