package gating

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// IssueFacts is what GitHub says about an item's mirrored issue.
type IssueFacts struct {
	Number      int
	State       string // "open" or "closed"
	StateReason string // GitHub's state_reason: completed, not_planned, reopened, or empty
	// Exists is false when the issue is gone: deleted, or transferred to
	// another repository (issue-gone).
	Exists bool
}

// RepoFacts is one repository's ledger and what GitHub says about it, as the
// reconcile pass read them.
type RepoFacts struct {
	// Snapshot is the ledger (with Now, Quarantine and DefaultBranch).
	Snapshot Snapshot
	// RepoFullName is OWNER/REPO, to tell a fork's head branch from this
	// repository's.
	RepoFullName string
	// Issues are the mirrored issues by number. An item whose issue is not
	// here was not looked at: no issue finding is made about it.
	Issues map[int]IssueFacts
	// OpenPRs are the repository's open pull requests (any other state in
	// the list is ignored).
	OpenPRs []PullRequest
	// MergedPRs are the recently merged or closed pull requests the caller
	// knows (only merged ones are read).
	MergedPRs []PullRequest
	// Links are each pull request's links by number (PRLinks over the same
	// snapshot).
	Links map[int][]PRLink
	// Green says, by pull request number, that every check but backlog
	// passed and the pull request is mergeable. A draft, or one whose
	// Mergeable is false, is not green whatever this says.
	Green map[int]bool
	// Disowned are, by item number, the merged pull requests a human ruled
	// did not deliver that item (/backlog undelivered): they make no
	// merged-not-complete for it.
	Disowned map[int][]int
}

// disowned reports whether a human ruled that pull request pr did not
// deliver item number n.
func (f *RepoFacts) disowned(n, pr int) bool { return slices.Contains(f.Disowned[n], pr) }

// Divergences compares the ledger with GitHub (the project manager's
// reconcile table, lattice-source-extract.md §4.5; CONTRACT.md §6 and §8)
// and returns every divergence, each Detail quoting both sides — what the
// ledger says and what GitHub says — with the pull request and issue
// numbers:
//
//   - merged-not-complete: a merged pull request delivers (see CheckRunVerdict:
//     not carried by a bucket) a live item into its baseBranch:, and the item
//     is not state:complete; or a grouping's bucket pull request merged, its
//     integration item is complete, and the grouping is not — unless a human
//     ruled that pull request did not deliver the item (Disowned). The ready
//     set excludes an item carrying this finding (ExMergedNotComplete);
//   - complete-with-open-pr: a state:complete item that an open pull request
//     delivers, or whose pr:<n> tag names an open pull request;
//   - resumable-green-pr: a green, mergeable, non-draft open pull request
//     delivers a live item with no live claim (released, abandoned or never
//     claimed) and no state:complete into its baseBranch: — the cheapest
//     resume;
//   - epic-child-on-main: an open pull request delivers an item partOf an
//     epic into the default branch (the item-side defect, baseBranch: the
//     default branch, is ComputeReady's);
//   - pr-wrong-base: an open pull request delivers an item that is not
//     complete into a base other than its baseBranch:;
//   - integration-incomplete: a grouping's bucket pull request (its
//     baseBranch: into the default branch) merged while its integration item
//     is not complete (the fan-out form, every member complete but the
//     integration item, is ComputeReady's);
//   - issue-closed-item-live: the issue is closed and the item not
//     state:complete;
//   - complete-issue-open: the item is state:complete and its issue open;
//   - pr-without-item: an open pull request links no item and is no
//     grouping's bucket (Item empty, the detail names the pull request);
//   - issue-gone: the item's issue was deleted or transferred.
//
// Findings are sorted by code, then item (repository-wide first, then by
// number), then detail, without repeats.
func Divergences(f RepoFacts) []Defect {
	s := f.Snapshot
	x := newIndex(&s)
	db := s.DefaultBranch
	var out []Defect
	add := func(code string, id ItemID, format string, a ...any) {
		out = append(out, Defect{Code: code, Item: id, Detail: fmt.Sprintf(format, a...)})
	}

	openByNum := map[int]PullRequest{}
	for _, pr := range f.OpenPRs {
		if pr.Open() {
			if _, dup := openByNum[pr.Number]; !dup {
				openByNum[pr.Number] = pr
			}
		}
	}
	openNums := make([]int, 0, len(openByNum))
	for n := range openByNum {
		openNums = append(openNums, n)
	}
	slices.Sort(openNums)

	// Open pull requests. openCompleted notes (item, pull request) pairs
	// already reported complete-with-open-pr.
	openCompleted := map[[2]int]bool{}
	for _, n := range openNums {
		pr := openByNum[n]
		gh := "GitHub: open pull request #" + strconv.Itoa(n) + " " + prWhere(pr)
		buckets := x.bucketsOf(pr, f.RepoFullName)
		linked := 0
		for _, l := range f.Links[n] {
			i, ok := x.byID[l.Item]
			if !ok {
				continue
			}
			linked++
			if !x.deliveredBy(i, pr, f.RepoFullName) {
				continue
			}
			e := &x.es[i]
			how := "linked by " + strings.Join(l.How, ", ")
			if e.st == stComplete {
				openCompleted[[2]int{e.num, n}] = true
				add("complete-with-open-pr", e.id, "ledger: %s is state:complete; %s is still open and delivers it (%s): completion was claimed before the merge that defines it",
					e.id, gh, how)
				continue
			}
			base, baseOK := soleTag(e.c.Item, "baseBranch")
			epics := e.c.Item.Targets(PartOf)
			rightBase := true
			switch {
			case len(epics) > 0 && pr.BaseRef == db && baseOK && base != db:
				rightBase = false
				add("epic-child-on-main", e.id, "ledger: %s is partOf %s with baseBranch:%s; %s targets the default branch %s (%s): a member's pull request targets its epic's branch",
					e.id, strings.Join(epics, ", "), base, gh, db, how)
			case baseOK && pr.BaseRef != base:
				rightBase = false
				add("pr-wrong-base", e.id, "ledger: %s's baseBranch: is %s; %s targets %s (%s)", e.id, base, gh, pr.BaseRef, how)
			}
			// A green pull request into the wrong base is no resume: merging
			// it would not complete the item.
			if rightBase && x.resumable(i, pr) && f.Green[n] {
				add("resumable-green-pr", e.id, "ledger: %s is live with no live claim (%s) and no state:complete; %s is green and mergeable (%s): the cheapest resume, before any fresh item",
					e.id, x.claimWords(i), gh, how)
			}
		}
		if linked == 0 && len(buckets) == 0 {
			add("pr-without-item", "", "ledger: no item is linked to pull request #%d; %s, titled %q, is open and links no item: work entered outside the backlog",
				n, "GitHub: pull request #"+strconv.Itoa(n)+" "+prWhere(pr), pr.Title)
		}
	}

	// pr:<n> tags of complete items that name open pull requests.
	for i := range x.es {
		e := &x.es[i]
		if e.st != stComplete {
			continue
		}
		for _, n := range prTags(e.c.Item) {
			pr, ok := openByNum[n]
			if !ok || openCompleted[[2]int{e.num, n}] {
				continue
			}
			add("complete-with-open-pr", e.id, "ledger: %s is state:complete with pr:%d; GitHub: pull request #%d %s is still open: the item is not complete until it is merged or closed",
				e.id, n, n, prWhere(pr))
		}
	}

	// Merged pull requests.
	seenMerged := map[int]bool{}
	merged := slices.Clone(f.MergedPRs)
	slices.SortStableFunc(merged, func(a, b PullRequest) int { return a.Number - b.Number })
	for _, pr := range merged {
		if !pr.Merged || seenMerged[pr.Number] {
			continue
		}
		seenMerged[pr.Number] = true
		gh := "GitHub: pull request #" + strconv.Itoa(pr.Number) + " " + prWhere(pr) + " was merged" + mergedAt(pr)
		for _, g := range x.bucketsOf(pr, f.RepoFullName) {
			ge := &x.es[g]
			ints := x.integBy[ge.id]
			if len(ints) != 1 {
				continue // integration-missing / -duplicate: ComputeReady's
			}
			ie := &x.es[ints[0]]
			switch {
			case ie.st != stComplete:
				add("integration-incomplete", ge.id, "ledger: grouping %s's integration item %s is not complete (%s); %s, the grouping's bucket: the grouping is not complete until its integration item is",
					ge.id, ie.id, ie.describe(), gh)
			case ge.st == stLive && !f.disowned(ge.num, pr.Number):
				add(ExMergedNotComplete, ge.id, "ledger: grouping %s has no state:complete though its integration item %s is complete; %s, the grouping's bucket",
					ge.id, ie.id, gh)
			}
		}
		for _, l := range f.Links[pr.Number] {
			i, ok := x.byID[l.Item]
			if !ok || !x.deliveredBy(i, pr, f.RepoFullName) {
				continue
			}
			e := &x.es[i]
			base, baseOK := soleTag(e.c.Item, "baseBranch")
			if e.st != stLive || !baseOK || pr.BaseRef != base || f.disowned(e.num, pr.Number) {
				continue
			}
			add(ExMergedNotComplete, e.id, "ledger: %s has no state:complete (live; %s); %s into its baseBranch:%s and delivers it (linked by %s): the holder records the completion",
				e.id, x.claimWords(i), gh, base, strings.Join(l.How, ", "))
		}
	}

	// Issues.
	for i := range x.es {
		e := &x.es[i]
		is, ok := f.Issues[e.num]
		if !ok || e.num == 0 {
			continue
		}
		switch {
		case !is.Exists:
			add("issue-gone", e.id, "ledger: %s exists (%s); GitHub: issue #%d is gone (deleted or transferred)", e.id, e.describe(), e.num)
		case is.State == "closed" && e.st != stComplete:
			reason := ""
			if is.StateReason != "" {
				reason = " as " + is.StateReason
			}
			add("issue-closed-item-live", e.id, "ledger: %s is not complete (%s); GitHub: issue #%d was closed%s: a human closed it out of band; ask before changing the ledger",
				e.id, e.describe(), e.num, reason)
		case is.State == "open" && e.st == stComplete:
			add("complete-issue-open", e.id, "ledger: %s is state:complete; GitHub: issue #%d is still open: completion mirroring was missed", e.id, e.num)
		}
	}

	slices.SortFunc(out, func(a, b Defect) int {
		if c := strings.Compare(a.Code, b.Code); c != 0 {
			return c
		}
		if a.Item != b.Item {
			switch {
			case a.Item == "":
				return -1
			case b.Item == "":
				return 1
			}
			return compareIDs(a.Item, b.Item)
		}
		return cmp.Compare(a.Detail, b.Detail)
	})
	return slices.Compact(out)
}

// UndeliveredRefusal says why a human may not rule, with /backlog
// undelivered, that pull request pr did not deliver item id ("" when the
// ruling may be recorded). The ruling is about a merged pull request that
// links the item (CONTRACT.md §8's linking rules) or is its grouping's
// bucket, as the facts know them: anything else is refused, so a mistyped
// number is caught rather than recorded, and no ruling can be made ahead of
// a merge that would then go unreported.
func UndeliveredRefusal(f RepoFacts, id ItemID, pr int) string {
	s := f.Snapshot
	x := newIndex(&s)
	i, ok := x.byID[id]
	if !ok {
		return fmt.Sprintf("%s is not an item", id)
	}
	var merged *PullRequest
	for k := range f.MergedPRs {
		if p := &f.MergedPRs[k]; p.Number == pr && p.Merged {
			merged = p
			break
		}
	}
	if merged == nil {
		for k := range f.OpenPRs {
			if p := &f.OpenPRs[k]; p.Number == pr && p.Open() {
				return fmt.Sprintf("pull request #%d is still open: only a merged pull request can be ruled not to have delivered %s", pr, id)
			}
		}
		return fmt.Sprintf("warden has no record of pull request #%d being merged (run /backlog recheck on it if it was): only a merged pull request can be ruled not to have delivered %s", pr, id)
	}
	for _, l := range f.Links[pr] {
		if l.Item == id {
			return ""
		}
	}
	if slices.Contains(x.bucketsOf(*merged, f.RepoFullName), i) {
		return ""
	}
	return fmt.Sprintf("pull request #%d does not link %s (no closing keyword, refs, item id, pr: tag or claim branch) and is not its bucket: it does not deliver it, so there is nothing to rule", pr, id)
}

// bucketsOf returns the groupings whose bucket pull request pr is: from a
// grouping's baseBranch: (in this repository) into the default branch.
func (x *index) bucketsOf(pr PullRequest, repo string) []int32 {
	db := x.s.DefaultBranch
	if pr.FromFork(repo) || pr.HeadRef == "" || pr.HeadRef == db || pr.BaseRef != db {
		return nil
	}
	var gs []int32
	for g := range x.partOfBy {
		gi, ok := x.byID[g]
		if !ok {
			continue
		}
		if b, ok := soleTag(x.es[gi].c.Item, "baseBranch"); ok && b == pr.HeadRef {
			gs = append(gs, gi)
		}
	}
	slices.SortFunc(gs, func(a, b int32) int { return compareIDs(x.es[a].id, x.es[b].id) })
	return gs
}

// deliveredBy reports whether pr delivers item i (CONTRACT.md §8): it is no
// grouping (a grouping is completed by its bucket) and the head branch (in
// this repository) is not its baseBranch: (a bucket carries its members).
func (x *index) deliveredBy(i int32, pr PullRequest, repo string) bool {
	e := &x.es[i]
	if len(x.partOfBy[e.id]) > 0 {
		return false
	}
	if base, ok := soleTag(e.c.Item, "baseBranch"); ok && base != "" && !pr.FromFork(repo) && pr.HeadRef == base {
		return false
	}
	return true
}

// resumable reports whether pr, if green, would be item i's cheapest
// resume: the item is live with no live claim and no state:complete, and
// pr is no draft and not known unmergeable. (Delivery and the base are the
// caller's to have checked.)
func (x *index) resumable(i int32, pr PullRequest) bool {
	e := &x.es[i]
	return e.st == stLive && !e.claim.InFlight() && !pr.Draft && (pr.Mergeable == nil || *pr.Mergeable)
}

// ResumeCandidates lists, by number, the open pull requests whose checks
// decide a resumable-green-pr: each delivers, into its baseBranch:, an item
// that would be resumed if the pull request were green. The reconcile reads
// the checks of these alone (Green decides).
func ResumeCandidates(f RepoFacts) []int {
	s := f.Snapshot
	x := newIndex(&s)
	var out []int
	for _, pr := range f.OpenPRs {
		if !pr.Open() {
			continue
		}
		for _, l := range f.Links[pr.Number] {
			i, ok := x.byID[l.Item]
			if !ok || !x.deliveredBy(i, pr, f.RepoFullName) || !x.resumable(i, pr) {
				continue
			}
			if base, ok := soleTag(x.es[i].c.Item, "baseBranch"); ok && pr.BaseRef != base {
				continue
			}
			out = append(out, pr.Number)
			break
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckResult is another check run on a pull request's head, as the
// reconcile reads it.
type CheckResult struct {
	Name, Status, Conclusion string
}

// Green reports whether a pull request is green (the reconcile table's
// "green, mergeable"): mergeable (known true), not a draft, every check run
// but warden's own completed as success, neutral or skipped, and the
// combined commit status success or absent (statuses 0).
func Green(mergeable *bool, draft bool, runs []CheckResult, statusState string, statuses int) bool {
	if mergeable == nil || !*mergeable || draft {
		return false
	}
	for _, r := range runs {
		if r.Name == CheckRunName {
			continue
		}
		if r.Status != "completed" {
			return false
		}
		switch r.Conclusion {
		case "success", "neutral", "skipped":
		default:
			return false
		}
	}
	return statuses == 0 || statusState == "success"
}

// claimWords describes an item's claim for a divergence's ledger side.
func (x *index) claimWords(i int32) string {
	e := &x.es[i]
	cv := &e.c.Claim
	if cv.Fence <= 0 {
		return "never claimed"
	}
	return fmt.Sprintf("claim %s by %s at fence %d", e.claim, cv.Owner, cv.Fence)
}

// prWhere names a pull request's branches: "(head H into B)", with the
// fork's repository when it has one.
func prWhere(pr PullRequest) string {
	if pr.HeadRepoFullName != "" {
		return fmt.Sprintf("(head %s:%s into %s)", pr.HeadRepoFullName, pr.HeadRef, pr.BaseRef)
	}
	return fmt.Sprintf("(head %s into %s)", pr.HeadRef, pr.BaseRef)
}

func mergedAt(pr PullRequest) string {
	if pr.MergedAt.IsZero() {
		return ""
	}
	return " at " + fmtTime(pr.MergedAt)
}

// prTags returns the pull request numbers of an item's well-formed pr:<n>
// tags (decimal, no sign, no leading zero), in tag order.
func prTags(it *Item) []int {
	var out []int
	for _, t := range it.Tags {
		v, ok := strings.CutPrefix(t, "pr:")
		if !ok {
			continue
		}
		if n, end, ok := refNumber(v, 0); ok && end == len(v) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
