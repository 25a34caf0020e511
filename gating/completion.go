package gating

import (
	"fmt"
	"slices"
	"strings"
)

// Completion refusal reasons (CONTRACT.md §9 "Writes the ledger refuses").
const (
	ReasonCompletionUnproven = "completion-unproven"
	ReasonCompleteWithOpenPR = "complete-with-open-pr"
)

// CompletionInput is a write that adds state:complete, with everything its
// proof needs, read by the caller from the ledger and GitHub.
type CompletionInput struct {
	// Item is the item as the write would leave it: its tags (pr:<n>,
	// phase:, baseBranch:) are the proof's.
	Item *Item
	// Claim is the item's current grant (Fence 0: never claimed); Token the
	// fencing token the write presents (nil: none).
	Claim ClaimView
	Token *int64
	// PRs holds, by number, the pull request each pr:<n> tag names; a nil
	// entry is no pull request (GitHub answered 404); a number missing from
	// the map was not looked up and proves nothing.
	PRs map[int]*PullRequest
	// Items are the repository's items (the item itself is skipped): the
	// groupings, their integration items, and the other complete items'
	// completion pull requests are found here.
	Items []*Item
	// DefaultBranch is the repository's default branch (a grouping's bucket
	// pull request merges into it); RepoFullName (OWNER/REPO) tells a fork's
	// head branch from this repository's.
	DefaultBranch string
	RepoFullName  string
	// Findings are, for a phase:research item, the comments posted on its
	// issue since the current claim was granted (the caller reads them).
	Findings []FindingsComment
	// HolderLogin is the login that posted the claim marker of the current
	// fence (its owner and fence; by an agent or a collaborator with write
	// access, not warden), the login whose comment is the findings; ""
	// when none is recorded (warden posted the marker under post_markers,
	// or no marker was posted): then a comment by an agent login counts.
	HolderLogin string
	// GroupingBodies holds, by grouping, the body of the epic issue of each
	// grouping DAGGroupings names for the item (a design-integration item):
	// the dag-missing rule reads its mermaid DAG. A grouping missing from
	// the map was not read and proves nothing.
	GroupingBodies map[ItemID]GroupingBody
	// Adopting is the direct-deployment ledger row (POST /items/adopt): an
	// item born complete with no claim history. The fence step does not
	// apply; the proof does.
	Adopting bool
}

// CompletionVerdict is the proof's verdict. When not Proven, Reason is a
// fence verdict (ClaimRequired, StaleToken, UnissuedToken, ClaimReleased)
// or a defect code (completion-unproven, complete-with-open-pr,
// dag-missing). Detail always names what was looked at.
type CompletionVerdict struct {
	Proven bool
	Reason string
	Detail string
}

// ProveCompletion decides whether a write may make the item state:complete
// (CONTRACT.md §9 "completion"), in this order:
//
//  1. the fence: only under the current claim (a worker's, or a maintenance
//     claim for a reserved merge), live (claimed and not released; the
//     lease is not consulted, as in Admit), with the presented token equal
//     to its fence: none or never claimed is ClaimRequired, an older token
//     StaleToken, a newer one UnissuedToken, a released claim ClaimReleased;
//  2. no pr:<n> tag names an open pull request (complete-with-open-pr);
//  3. a design-integration item (it integrates a grouping that, or it
//     itself, informs another): every grouping it informs, transitively,
//     has in its epic issue's body a mermaid DAG naming every member
//     (dag-missing; an unread body is refused too);
//  4. phase:research: the claim holder's login (HolderLogin; unknown: an
//     agent login) commented the findings on the issue during the claim;
//     no pull request is needed;
//  5. every pr: tag is a pull request number (pr:<n>), and there is one;
//  6. a grouping (an item others are partOf): exactly one item integrates
//     it, that item is complete, and a pr:<n> names the merged bucket pull
//     request: head the grouping's baseBranch: (in this repository), base the
//     default branch;
//  7. any other item: a pr:<n> names a pull request merged into the item's
//     baseBranch:;
//
// and, in 6 and 7, that pull request is no other complete item's pr:<n>
// (the tag is the link, so it links this item). Everything else is
// completion-unproven.
func ProveCompletion(in CompletionInput) CompletionVerdict {
	it := in.Item
	if it == nil {
		return CompletionVerdict{Reason: ReasonCompletionUnproven, Detail: "no item"}
	}
	refuse := func(reason, format string, a ...any) CompletionVerdict {
		return CompletionVerdict{Reason: reason, Detail: fmt.Sprintf(format, a...)}
	}
	c := in.Claim
	switch {
	case in.Adopting:
	case c.Fence <= 0:
		return refuse(string(ClaimRequired), "%s was never claimed: state:complete is written only under the current claim's fence", it.ID)
	case in.Token == nil:
		return refuse(string(ClaimRequired), "%s is claimed at fence %d by %s: state:complete needs that claim's fencing token", it.ID, c.Fence, c.Owner)
	case *in.Token < c.Fence:
		return refuse(string(StaleToken), "token %d is stale: %s's current claim is fence %d by %s", *in.Token, it.ID, c.Fence, c.Owner)
	case *in.Token > c.Fence:
		return refuse(string(UnissuedToken), "token %d was never issued: %s's current claim is fence %d", *in.Token, it.ID, c.Fence)
	case c.Released >= c.Fence:
		return refuse(string(ClaimReleased), "%s's claim at fence %d by %s was released: state:complete is written only under a live claim", it.ID, c.Fence, c.Owner)
	}

	var nums []int
	var bad []string
	for _, t := range it.Tags {
		v, ok := strings.CutPrefix(t, "pr:")
		if !ok {
			continue
		}
		if n, end, ok := refNumber(v, 0); ok && end == len(v) {
			if !slices.Contains(nums, n) {
				nums = append(nums, n)
			}
		} else {
			bad = append(bad, t)
		}
	}
	slices.Sort(nums)

	// 2. An open pull request named by a pr: tag.
	var open []string
	for _, n := range nums {
		if pr := in.PRs[n]; pr != nil && pr.Open() {
			open = append(open, fmt.Sprintf("#%d %s", n, prWhere(*pr)))
		}
	}
	if len(open) > 0 {
		return refuse(ReasonCompleteWithOpenPR, "%s's pr: tags name open pull request %s: complete only once it is merged (or the tag removed)", it.ID, strings.Join(open, ", "))
	}

	// 2b. A design-integration item: every grouping it informs has its DAG.
	if v := checkDAGs(in); v != nil {
		return *v
	}

	// 3. Research.
	if ph, ok := soleTag(it, "phase"); ok && ph == "research" {
		return researchVerdict(in)
	}

	// 4. The pr: tags.
	if len(bad) > 0 {
		return refuse(ReasonCompletionUnproven, "%s carries %s, which is not pr:<number>: the proof cannot be read", it.ID, strings.Join(bad, ", "))
	}
	if len(nums) == 0 {
		return refuse(ReasonCompletionUnproven, "%s has no pr:<n> tag: state:complete needs one naming the pull request merged into its baseBranch:", it.ID)
	}

	// 5. Groupings.
	var members, integrators []ItemID
	for _, o := range in.Items {
		if o == nil || o.ID == it.ID {
			continue
		}
		if slices.Contains(o.Targets(PartOf), string(it.ID)) {
			members = append(members, o.ID)
		}
		if slices.Contains(o.Targets(Integrates), string(it.ID)) {
			integrators = append(integrators, o.ID)
		}
	}
	grouping := len(members) > 0
	base, baseOK := soleTag(it, "baseBranch")
	if !baseOK || base == "" {
		return refuse(ReasonCompletionUnproven, "%s has no single baseBranch: tag: the pull request's base cannot be checked", it.ID)
	}
	if grouping {
		slices.SortFunc(integrators, compareIDs)
		switch {
		case len(integrators) == 0:
			return refuse(ReasonCompletionUnproven, "%s is a grouping of %d items with no integration item (integration-missing): it completes when its integration item does", it.ID, len(members))
		case len(integrators) > 1:
			return refuse(ReasonCompletionUnproven, "%s is a grouping with %d integration items (%s; integration-duplicate)", it.ID, len(integrators), joinIDs(integrators))
		}
		var ie *Item
		for _, o := range in.Items {
			if o != nil && o.ID == integrators[0] {
				ie = o
				break
			}
		}
		if !isComplete(ie) {
			return refuse(ReasonCompletionUnproven, "%s is a grouping whose integration item %s is not complete: a grouping completes only after it", it.ID, integrators[0])
		}
	}

	// 5 and 6: a merged pull request into the right base.
	var notes []string
	for _, n := range nums {
		pr, looked := in.PRs[n]
		switch {
		case !looked:
			notes = append(notes, fmt.Sprintf("pr:%d was not looked up", n))
			continue
		case pr == nil:
			notes = append(notes, fmt.Sprintf("#%d is not a pull request", n))
			continue
		case !pr.Merged:
			notes = append(notes, fmt.Sprintf("#%d %s was closed without merging", n, prWhere(*pr)))
			continue
		}
		where := fmt.Sprintf("#%d %s, merged%s", n, prWhere(*pr), mergedAt(*pr))
		if grouping {
			if pr.FromFork(in.RepoFullName) || pr.HeadRef != base || pr.BaseRef != in.DefaultBranch {
				notes = append(notes, fmt.Sprintf("%s is not the grouping's bucket (head %s into the default branch %s)", where, base, in.DefaultBranch))
				continue
			}
		} else if pr.BaseRef != base {
			notes = append(notes, fmt.Sprintf("%s was not merged into baseBranch:%s", where, base))
			continue
		} else if !in.Adopting && !prLinksItem(*pr, in.RepoFullName, it.ID, in.Claim.Branch) {
			notes = append(notes, fmt.Sprintf("%s does not link %s: its body names neither #%d (closes, fixes, resolves, refs, part of, towards) nor %s, and its head is not the claim's branch (a pr: tag alone proves nothing)",
				where, it.ID, it.ID.Number(), it.ID))
			continue
		}
		if other := completedByOther(in.Items, it.ID, n); other != "" {
			notes = append(notes, fmt.Sprintf("%s is already %s's completion pull request", where, other))
			continue
		}
		what := "merged into baseBranch:" + base
		if grouping {
			what = fmt.Sprintf("the grouping's bucket, and its integration item %s is complete", integrators[0])
		}
		return CompletionVerdict{Proven: true, Detail: fmt.Sprintf("%s's pr:%d names %s: %s", it.ID, n, where, what)}
	}
	return refuse(ReasonCompletionUnproven, "no pr: tag of %s proves it: %s", it.ID, strings.Join(notes, "; "))
}

// isComplete reports an item tagged exactly one state:, state:complete.
func isComplete(it *Item) bool {
	if it == nil {
		return false
	}
	v, ok := soleTag(it, "state")
	return ok && v == "complete"
}

// completedByOther returns another complete item whose pr:<n> names n, or "".
func completedByOther(items []*Item, self ItemID, n int) ItemID {
	var found []ItemID
	for _, o := range items {
		if o == nil || o.ID == self || !isComplete(o) {
			continue
		}
		if slices.Contains(prTags(o), n) {
			found = append(found, o.ID)
		}
	}
	if len(found) == 0 {
		return ""
	}
	return slices.MinFunc(found, compareIDs)
}

func joinIDs(ids []ItemID) string {
	s := make([]string, len(ids))
	for k, id := range ids {
		s[k] = string(id)
	}
	return strings.Join(s, ", ")
}

// prLinksItem reports whether a pull request links the item by itself (§8):
// a reference in its body outside code and quotes, or a head branch (in
// this repository) that is the branch recorded with the item's claim. The
// item's own pr: tag is not counted: it is what the proof checks.
func prLinksItem(pr PullRequest, repoFullName string, id ItemID, claimBranch string) bool {
	for _, r := range bodyRefs(pr.Body, repoFullName) {
		if IDFor(r.num) == id {
			return true
		}
	}
	return claimBranch != "" && pr.HeadRef == claimBranch && !pr.FromFork(repoFullName)
}
