package agentapi

import (
	"context"
	"net/http"
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
// a phase:research item the comments posted on the issue during the claim
// and the claim holder's login, and for a design-integration item the body
// of each grouping's epic issue it informs (one read each). It returns the WriteOptions for the ledger:
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
		if err := h.researchFindings(ctx, repo, cur, &in); err != nil {
			return store.WriteOptions{}, err
		}
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
	h.groupingBodies(ctx, repo, &in)
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

// researchFindings fills in the comments posted on a research item's issue
// since the current claim was granted (one read) and the claim holder's
// login: the author of the trusted claim marker of the current fence in
// the trail ("" when warden posted it, or none is recorded). A comment is
// an agent's when the trail recorded it so, when GitHub says its author is
// a Bot, or when its author is one of the repository's agents:.
func (h *handler) researchFindings(ctx context.Context, repo store.Repo, cur *store.Item, in *gating.CompletionInput) error {
	grant := cur.Grant
	bot, err := h.gh.BotLogin(ctx)
	if err != nil {
		return err
	}
	trail, err := h.ledger.TrailComments(ctx, repo.ID, cur.ID)
	if err != nil {
		return err
	}
	byID := make(map[int64]store.TrailRecord, len(trail))
	for _, r := range trail {
		byID[r.CommentID] = r
	}
	in.HolderLogin = holderLogin(trail, cur, bot)
	var agents []string
	if h.opt.Settings != nil {
		agents = h.opt.Settings(ctx, repo).Agents
	}
	// GitHub's timestamps are whole seconds.
	since := grant.GrantedAt.Truncate(time.Second)
	cs, err := h.gh.CommentsSince(ctx, repo, cur.ID.Number(), since)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.CreatedAt.Before(since) {
			continue // edited since, posted before the claim
		}
		rec, recorded := byID[c.ID]
		fc := gating.FindingsComment{Author: c.Author, At: c.CreatedAt,
			Warden: strings.EqualFold(c.Author, bot) || recorded && rec.IsWarden,
			// Findings are prose: a claim or outcome marker (or any
			// warden marker) is bookkeeping, not findings.
			Marker: strings.HasPrefix(strings.TrimSpace(c.Body), "<!-- backlog-")}
		fc.Agent = recorded && rec.IsAgent || gating.IsAgent(gating.Actor{Login: c.Author, Type: c.AuthorType}, agents)
		in.Findings = append(in.Findings, fc)
	}
	return nil
}

// groupingBodies reads, for a design-integration item, the body of the
// epic issue of each grouping it informs (gating.DAGGroupings; one read
// each). A read that fails is recorded as such: the proof refuses
// (dag-missing), never guesses.
func (h *handler) groupingBodies(ctx context.Context, repo store.Repo, in *gating.CompletionInput) {
	gs := gating.DAGGroupings(in.Item, in.Items)
	if len(gs) == 0 {
		return
	}
	in.GroupingBodies = make(map[gating.ItemID]gating.GroupingBody, len(gs))
	for _, g := range gs {
		is, err := h.gh.Issue(ctx, repo, g.Number())
		if err != nil {
			h.log.Warn("the epic issue of an informed grouping could not be read; the completion is refused", "repo", repo.FullName, "item", in.Item.ID, "grouping", g, "err", err)
			in.GroupingBodies[g] = gating.GroupingBody{Err: err.Error()}
			continue
		}
		in.GroupingBodies[g] = gating.GroupingBody{Body: is.Body}
	}
}

// holderLogin is the login that posted the first trusted claim marker of
// the item's current grant (owner and fence match; by an agent, warden or a
// collaborator with write access), or "" when none is recorded or warden
// posted it (post_markers): then the holder's login is unknown.
func holderLogin(trail []store.TrailRecord, cur *store.Item, bot string) string {
	for _, r := range trail {
		if !r.IsAgent && !r.IsWarden && !r.HasWrite {
			continue
		}
		mk, st := gating.ParseMarker(r.EarliestBody, cur.ID)
		if st != gating.MarkerValid || mk.Kind != gating.KindClaim || mk.Owner != cur.Grant.Owner || mk.Fence != cur.Fence.Token {
			continue
		}
		if r.IsWarden || strings.EqualFold(r.Author, bot) {
			return ""
		}
		return r.Author
	}
	return ""
}
