package agentapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
)

// Completion refusal reasons (CONTRACT.md §9).
const (
	reasonUnproven    = "completion-unproven"
	reasonOpenPR      = "complete-with-open-pr"
	directDeployedTag = "direct-deployment"
)

// proveCompletion checks the proof for a write that makes after carry
// state:complete (CONTRACT.md §9 "completion") against GitHub, and returns
// the WriteOptions to pass to the ledger: CompletionProven, or the reason and
// detail of the failed proof (the ledger then refuses the write with them).
// grant is the item's current grant (nil when never claimed).
//
//   - phase:research: a comment on the issue, not by warden, made during the
//     current claim (the findings).
//   - a grouping (an item others are partOf): its integrates item is
//     complete, and a pr:<n> names a merged PR from its baseBranch into the
//     default branch (the bucket PR).
//   - otherwise: a pr:<n> names a PR merged into the item's baseBranch that
//     is no other complete item's pr:<n>; and no pr:<n> names an open PR.
//
// A pr:<n> tag on the item links the PR to it (§8), so the tag is the link.
func (h *handler) proveCompletion(ctx context.Context, repo mirror.Repo, after *gating.Item, grant *mirror.Grant) (mirror.WriteOptions, error) {
	unproven := func(reason, format string, a ...any) (mirror.WriteOptions, error) {
		return mirror.WriteOptions{CompletionReason: reason, CompletionDetail: fmt.Sprintf(format, a...)}, nil
	}
	number := after.ID.Number()
	if phase, _ := after.Tag("phase"); phase == "research" {
		if grant == nil || grant.ReleasedAt != nil {
			return unproven(reasonUnproven, "%s is phase:research: it completes under a live claim once the findings are commented on #%d", after.ID, number)
		}
		bot, err := h.gh.BotLogin(ctx)
		if err != nil {
			return mirror.WriteOptions{}, err
		}
		// GitHub's timestamps are whole seconds.
		since := grant.GrantedAt.Truncate(time.Second)
		cs, err := h.gh.CommentsSince(ctx, repo, number, since)
		if err != nil {
			return mirror.WriteOptions{}, err
		}
		for _, c := range cs {
			if !c.CreatedAt.Before(since) && !strings.EqualFold(c.Author, bot) {
				return mirror.WriteOptions{CompletionProven: true}, nil
			}
		}
		return unproven(reasonUnproven, "%s is phase:research: no findings were commented on #%d since the claim at %s", after.ID, number, mirror.Timestamp(grant.GrantedAt))
	}
	var prs []int
	for _, t := range after.Tags {
		if v, ok := strings.CutPrefix(t, "pr:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return unproven(reasonUnproven, "%s is not a pull request number (pr:<n>)", t)
			}
			prs = append(prs, n)
		}
	}
	if len(prs) == 0 {
		return unproven(reasonUnproven, "state:complete needs a pr:<n> tag naming the pull request merged into baseBranch (or, for phase:research, the findings on the issue)")
	}
	sort.Ints(prs)
	base, _ := after.Tag("baseBranch")
	all, err := h.scan(ctx, repo.ID)
	if err != nil {
		return mirror.WriteOptions{}, err
	}
	grouping, integration := false, []mirror.Item{}
	for _, it := range all {
		if it.ID == after.ID {
			continue
		}
		for _, l := range it.Links {
			if l.Target != string(after.ID) {
				continue
			}
			switch l.Rel {
			case gating.PartOf:
				grouping = true
			case gating.Integrates:
				integration = append(integration, it)
			}
		}
	}
	if grouping {
		switch {
		case len(integration) == 0:
			return unproven(reasonUnproven, "%s is a grouping with no integration item (integration-missing): it completes when its integration item does", after.ID)
		case len(integration) > 1:
			return unproven(reasonUnproven, "%s is a grouping with %d integration items (integration-duplicate)", after.ID, len(integration))
		case !integration[0].Snapshot().HasTag("state:complete"):
			return unproven(reasonUnproven, "%s is a grouping whose integration item %s is not complete", after.ID, integration[0].ID)
		}
	}
	var open, notes []string
	proven := false
	for _, n := range prs {
		pr, err := h.gh.PullRequest(ctx, repo, n)
		if s := githubStatus(err); s == http.StatusNotFound || s == http.StatusGone {
			notes = append(notes, fmt.Sprintf("#%d is not a pull request", n))
			continue
		}
		if err != nil {
			return mirror.WriteOptions{}, err
		}
		switch {
		case pr.State == "open":
			open = append(open, fmt.Sprintf("#%d", n))
		case !pr.Merged:
			notes = append(notes, fmt.Sprintf("#%d was closed without merging", n))
		case grouping && (pr.Head != base || pr.Base != repo.DefaultBranch):
			notes = append(notes, fmt.Sprintf("#%d merged %s into %s, not the grouping's %s into %s", n, pr.Head, pr.Base, base, repo.DefaultBranch))
		case !grouping && pr.Base != base:
			notes = append(notes, fmt.Sprintf("#%d was merged into %s, not baseBranch:%s", n, pr.Base, base))
		default:
			if other := completedBy(all, after.ID, n); other != "" {
				notes = append(notes, fmt.Sprintf("#%d is already %s's completion pull request", n, other))
				continue
			}
			proven = true
		}
	}
	if len(open) > 0 {
		return unproven(reasonOpenPR, "%s names open pull request %s: complete only once it is merged or closed", after.ID, strings.Join(open, ", "))
	}
	if !proven {
		return unproven(reasonUnproven, "no pr: tag of %s names a pull request merged into its base: %s", after.ID, strings.Join(notes, "; "))
	}
	return mirror.WriteOptions{CompletionProven: true}, nil
}

// completedBy returns another complete item whose pr:<n> names n, or "".
func completedBy(all []mirror.Item, self gating.ItemID, n int) gating.ItemID {
	tag := "pr:" + strconv.Itoa(n)
	for _, it := range all {
		s := it.Snapshot()
		if it.ID != self && s.HasTag("state:complete") && s.HasTag(tag) {
			return it.ID
		}
	}
	return ""
}

// scan pages every item of a repository.
func (h *handler) scan(ctx context.Context, repoID int64) ([]mirror.Item, error) {
	var out []mirror.Item
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
