package gating

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CheckRunName is the name of warden's check run (CONTRACT.md §8).
const CheckRunName = "backlog"

// Check run conclusions, best first.
const (
	ConclusionSuccess = "success"
	ConclusionNeutral = "neutral"
	ConclusionFailure = "failure"
)

// CodeNeverClaimed is the check run's notice code beyond the contract's
// defect codes: a delivered item that was never claimed and is not tagged
// direct-deployment (work outside the backlog's claims).
const CodeNeverClaimed = "never-claimed"

// DirectDeploymentTag marks an item delivered outside the claims (the
// protocol's direct deployment: a ledger row authored at completion); a pull
// request delivering it is no notice.
const DirectDeploymentTag = "direct-deployment"

// MaxCheckSummary is GitHub's limit on a check run's output.summary (65,535
// characters; bytes here, which bounds the characters too).
const MaxCheckSummary = 65535

// maxCheckDetail bounds one row's detail in the summary (runes).
const maxCheckDetail = 2000

// ConclusionRank orders conclusions: failure (2) > neutral (1) > success (0).
// Anything unknown ranks as failure (fail closed).
func ConclusionRank(c string) int {
	switch c {
	case ConclusionSuccess:
		return 0
	case ConclusionNeutral:
		return 1
	}
	return 2
}

// WorstConclusion is the worst of the conclusions (success for none).
func WorstConclusion(cs ...string) string {
	w := ConclusionSuccess
	for _, c := range cs {
		if ConclusionRank(c) > ConclusionRank(w) {
			w = c
		}
	}
	if ConclusionRank(w) == 2 {
		return ConclusionFailure
	}
	return w
}

// CheckPR is one open pull request to judge, with its links (PRLinks over
// the same snapshot) and, for each item partOf an epic it links, whether
// its head was cut from the default branch rather than from the epic's
// branch (true only when the caller's compare showed it; a base that merely
// moved on is false).
type CheckPR struct {
	PR              PullRequest
	Links           []PRLink
	HeadFromDefault map[ItemID]bool
}

// CheckInput is everything the backlog check run of one head commit needs.
type CheckInput struct {
	// PR is the pull request the evaluation is about, Links its links and
	// HeadFromDefault its compare results (see CheckPR).
	PR              PullRequest
	Links           []PRLink
	HeadFromDefault map[ItemID]bool
	// OtherPRs are the other open pull requests with the same head commit:
	// each is judged the same way and counts towards the conclusion
	// (closed ones are ignored).
	OtherPRs []CheckPR
	// Snapshot is the repository's items with the ready set's inputs (Now,
	// Quarantine, PoisonThreshold, DefaultBranch).
	Snapshot Snapshot
	// RepoFullName is OWNER/REPO, to tell a fork's head branch from this
	// repository's.
	RepoFullName string
	// RequireItem is the repository's require_item setting: a pull request
	// linked to no item fails instead of a neutral notice.
	RequireItem bool
}

// CheckVerdict is the check run's verdict: its conclusion, a one-line title
// (warden's words and item ids only, no hostile text) and a Markdown
// summary for a person in the Checks tab, with a row per item and per PR.
type CheckVerdict struct {
	Conclusion string
	Title      string
	Summary    string
	Rows       []CheckRow
}

// CheckRow is one row of the verdict: an item a pull request links (or the
// grouping whose bucket it is), or, with Item empty, a pull request that
// links no item.
type CheckRow struct {
	PR   int    // the pull request's number
	Item ItemID // empty: the pull request's own row
	// Delivered is true when the pull request delivers the item and the row
	// judges it; false for what a bucket pull request carries, a grouping it
	// merges, or a grouping a member's pull request mentions.
	Delivered  bool
	Conclusion string
	// Code is the first finding's code (empty on success); Codes lists every
	// finding's code, failures first, without repeats.
	Code  string
	Codes []string
	// Title is the item's title (hostile: the summary sets it in a code
	// span).
	Title string
	// Detail says what was found, or on success what the item is.
	Detail string
	// The item's context: attempts this epoch, its holder ("" never
	// claimed), and its blockedBy edges with each blocker's condition.
	Attempts int
	Holder   string
	Blockers []string
}

// checkFinding is one finding on a row.
type checkFinding struct {
	code, conclusion, detail string
}

// CheckRunVerdict judges the backlog check run of one head commit
// (CONTRACT.md §8): the pull request in.PR and every other open pull request
// with that head. Each linked item is judged with the ready set's own rules
// over in.Snapshot (admission, parking, poison, collision holds, state and
// tag defects):
//
//   - an item whose baseBranch: is the head branch is carried by its epic's
//     bucket pull request and listed, not judged; a grouping linked by a
//     member's pull request is listed too (only its bucket completes it);
//   - a pull request from a grouping's baseBranch: into the default branch
//     is that grouping's bucket: its row fails unless exactly one item
//     integrates the grouping and that item is complete
//     (integration-incomplete, integration-missing, integration-duplicate);
//   - a delivered item fails when not admitted (awaiting-admission), parked,
//     poisoned, under a collision hold, with an unrecognised state:, with a
//     tag defect (missing-mandatory-tag, duplicate-attribute-tag, …), in
//     phase:research (research-with-pr), when the base is not its
//     baseBranch: (pr-wrong-base; epic-child-on-main for a member into the
//     default branch), when a member's head was cut from the default
//     branch (pr-not-from-base), or when the head nests under or over the
//     base, the item's baseBranch: or its epic's branch
//     (nested-epic-branch); a member's head named off the convention while
//     keeping both branch invariants is a branch-name-nit, never a failure;
//   - never claimed and not tagged direct-deployment: neutral
//     (never-claimed); already state:complete: neutral
//     (complete-with-open-pr, which the reconcile reports);
//   - otherwise success, naming the item, its attempts, holder and blockers.
//
// A pull request linked to no item is neutral, or with RequireItem a
// failure (pr-without-item). The conclusion is the worst row over every
// pull request (failure > neutral > success).
func CheckRunVerdict(in CheckInput) CheckVerdict {
	s := in.Snapshot
	x := newIndex(&s)
	prs := []CheckPR{{PR: in.PR, Links: in.Links, HeadFromDefault: in.HeadFromDefault}}
	others := slices.Clone(in.OtherPRs)
	slices.SortStableFunc(others, func(a, b CheckPR) int { return a.PR.Number - b.PR.Number })
	for _, o := range others {
		if o.PR.Open() && o.PR.Number != in.PR.Number {
			prs = append(prs, o)
		}
	}
	var rows []CheckRow
	perPR := make([][]CheckRow, len(prs))
	for k, p := range prs {
		perPR[k] = x.judgePR(p, in.RepoFullName, in.RequireItem)
		rows = append(rows, perPR[k]...)
	}
	v := CheckVerdict{Conclusion: ConclusionSuccess, Rows: rows}
	for _, r := range rows {
		v.Conclusion = WorstConclusion(v.Conclusion, r.Conclusion)
	}
	v.Title = checkTitle(v.Conclusion, rows)
	v.Summary = checkSummary(v, prs, perPR)
	return v
}

// judgePR returns a pull request's rows: the groupings it is the bucket of,
// then each linked item in number order; or its own row when it links none.
func (x *index) judgePR(p CheckPR, repo string, requireItem bool) []CheckRow {
	pr := p.PR
	db := x.s.DefaultBranch
	fork := pr.FromFork(repo)
	var rows []CheckRow
	bucketOf := map[ItemID]bool{}
	for _, gi := range x.bucketsOf(pr, repo) {
		bucketOf[x.es[gi].id] = true
		rows = append(rows, x.bucketRow(pr, gi))
	}
	links := slices.Clone(p.Links)
	slices.SortStableFunc(links, func(a, b PRLink) int { return compareIDs(a.Item, b.Item) })
	for k, l := range links {
		i, ok := x.byID[l.Item]
		if !ok || bucketOf[l.Item] || k > 0 && links[k-1].Item == l.Item {
			continue
		}
		e := &x.es[i]
		row := CheckRow{PR: pr.Number, Item: e.id, Title: e.c.Item.Title, Attempts: e.c.Attempts, Holder: x.holder(i), Blockers: x.blockers(i)}
		linked := "linked by " + strings.Join(l.How, ", ")
		switch base, _ := soleTag(e.c.Item, "baseBranch"); {
		case len(x.partOfBy[e.id]) > 0:
			row.Conclusion = ConclusionSuccess
			row.Detail = fmt.Sprintf("%s is a grouping (%d items are partOf it); it is completed by its bucket pull request (its baseBranch:%s into %s), not by this one; %s", e.id, len(x.partOfBy[e.id]), base, db, linked)
		case !fork && base != "" && pr.HeadRef == base:
			row.Conclusion = ConclusionSuccess
			row.Detail = fmt.Sprintf("carried: the head branch %s is %s's baseBranch:, so this pull request carries it into %s and does not deliver it (its own pull request into %s does); %s", pr.HeadRef, e.id, pr.BaseRef, base, linked)
		default:
			row.Delivered = true
			x.judgeDelivered(&row, i, p, repo, linked)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		row := CheckRow{PR: pr.Number, Conclusion: ConclusionNeutral, Code: "pr-without-item", Codes: []string{"pr-without-item"},
			Detail: fmt.Sprintf("pull request #%d links no backlog item: work outside the backlog (link one with \"Refs #N\" or the item id issue-N in the body)", pr.Number)}
		if requireItem {
			row.Conclusion = ConclusionFailure
			row.Detail += "; this repository requires an item (require_item: true)"
		}
		rows = append(rows, row)
	}
	return rows
}

// bucketRow judges a grouping's bucket pull request: exactly one item
// integrates the grouping and it is complete.
func (x *index) bucketRow(pr PullRequest, gi int32) CheckRow {
	g := &x.es[gi]
	row := CheckRow{PR: pr.Number, Item: g.id, Title: g.c.Item.Title, Attempts: g.c.Attempts, Holder: x.holder(gi), Blockers: x.blockers(gi)}
	members := x.partOfBy[g.id]
	done := 0
	for _, m := range members {
		if x.es[m].st == stComplete {
			done++
		}
	}
	what := fmt.Sprintf("the bucket pull request of grouping %s (head %s, its baseBranch:, into the default branch %s); %d of its %d members are complete",
		g.id, pr.HeadRef, x.s.DefaultBranch, done, len(members))
	ints := x.integBy[g.id]
	var f checkFinding
	switch {
	case len(ints) == 0:
		f = checkFinding{"integration-missing", ConclusionFailure, what + "; no item integrates it: the grouping cannot be complete (integration-missing)"}
	case len(ints) > 1:
		f = checkFinding{"integration-duplicate", ConclusionFailure, fmt.Sprintf("%s; %d items integrate it (%s): exactly one may", what, len(ints), x.names(ints))}
	case x.es[ints[0]].st != stComplete:
		f = checkFinding{"integration-incomplete", ConclusionFailure, fmt.Sprintf("%s; its integration item %s is not complete (%s): merge the bucket only once it is", what, x.es[ints[0]].id, x.es[ints[0]].describe())}
	default:
		row.Conclusion = ConclusionSuccess
		row.Detail = fmt.Sprintf("%s; its integration item %s is complete", what, x.es[ints[0]].id)
		return row
	}
	applyFindings(&row, []checkFinding{f})
	return row
}

// judgeDelivered fills the row of an item the pull request delivers.
func (x *index) judgeDelivered(row *CheckRow, i int32, p CheckPR, repo, linked string) {
	e := &x.es[i]
	it := e.c.Item
	pr := p.PR
	db := x.s.DefaultBranch
	var fs []checkFinding
	fail := func(code, format string, a ...any) {
		fs = append(fs, checkFinding{code, ConclusionFailure, fmt.Sprintf(format, a...)})
	}
	switch e.st {
	case stParked:
		fail(ExParked, "%s is parked (%s): %s", e.id, e.route(), UnparkHint)
	case stInvalid:
		fail(ExUnknownState, "%s", e.stateWhy())
	case stComplete:
		fs = append(fs, checkFinding{"complete-with-open-pr", ConclusionNeutral,
			fmt.Sprintf("%s is already state:complete, yet this open pull request delivers it: it is not delivered again (the reconcile reports complete-with-open-pr)", e.id)})
	}
	for _, tp := range x.tagProblems(i) {
		if tp.Code == ExUnknownState && e.st == stInvalid {
			continue // said above
		}
		fail(tp.Code, "%s", tp.Detail)
	}
	if e.pending() {
		if why, _ := admission(e.c); why != "" {
			fail(ExAwaitingAdmission, "%s awaits human admission: %s", e.id, why)
		}
		if p, th := x.poisoned(i); p {
			fail(ExPoisoned, "%s is poisoned: %d attempts reached the threshold of %d with no claim held or lapsed", e.id, e.c.Attempts, th)
		}
	}
	if e.c.CollisionHold {
		fail(ExCollisionHold, "%s is held by a takeover collision until a human with triage or more runs /backlog resolve", e.id)
	}
	if ph, ok := soleTag(it, "phase"); ok && ph == "research" {
		fail("research-with-pr", "%s is phase:research: a research item delivers findings on its issue, not a diff", e.id)
	}
	epics := it.Targets(PartOf)
	if base, ok := soleTag(it, "baseBranch"); ok && base != "" {
		switch {
		case len(epics) > 0 && pr.BaseRef == db && base != db:
			fail("epic-child-on-main", "%s is partOf %s and belongs on its baseBranch:%s, but this pull request targets the default branch %s", e.id, strings.Join(epics, ", "), base, db)
		case pr.BaseRef != base:
			fail("pr-wrong-base", "this pull request targets %s, but %s's baseBranch: is %s", pr.BaseRef, e.id, base)
		}
	}
	if len(epics) > 0 && p.HeadFromDefault[e.id] {
		fail("pr-not-from-base", "%s is partOf %s, but the head %s was cut from the default branch %s, not from the epic's branch", e.id, strings.Join(epics, ", "), pr.HeadRef, db)
	}
	fs = append(fs, x.branchFindings(i, p, repo)...)
	if e.c.Claim.Fence <= 0 && !it.HasTag(DirectDeploymentTag) {
		fs = append(fs, checkFinding{CodeNeverClaimed, ConclusionNeutral,
			fmt.Sprintf("%s was never claimed and is not tagged %s: work outside the backlog's claims", e.id, DirectDeploymentTag)})
	}
	if len(fs) == 0 {
		row.Conclusion = ConclusionSuccess
		row.Detail = fmt.Sprintf("delivers %s into %s; %s", e.id, pr.BaseRef, linked)
		return
	}
	applyFindings(row, fs)
	row.Detail += "; " + linked
}

// applyFindings sets a row's conclusion, codes and detail from its findings,
// failures first (a code once, its details joined).
func applyFindings(row *CheckRow, fs []checkFinding) {
	slices.SortStableFunc(fs, func(a, b checkFinding) int { return ConclusionRank(b.conclusion) - ConclusionRank(a.conclusion) })
	var details []string
	row.Conclusion = ConclusionSuccess
	for _, f := range fs {
		row.Conclusion = WorstConclusion(row.Conclusion, f.conclusion)
		if !slices.Contains(row.Codes, f.code) {
			row.Codes = append(row.Codes, f.code)
		}
		details = append(details, f.code+": "+f.detail)
	}
	row.Code = row.Codes[0]
	row.Detail = strings.Join(details, "; ")
}

// holder describes an item's current grant: "" when never claimed.
func (x *index) holder(i int32) string {
	e := &x.es[i]
	cv := &e.c.Claim
	if cv.Fence <= 0 {
		return ""
	}
	h := fmt.Sprintf("%s (%s, fence %d", cv.Owner, e.claim, cv.Fence)
	if cv.Purpose == "maintenance" {
		h += ", maintenance"
	}
	if cv.Branch != "" {
		h += ", branch " + cv.Branch
	}
	return h + ")"
}

// blockers lists an item's blockedBy edges with each blocker's condition.
func (x *index) blockers(i int32) []string {
	var out []string
	for _, ed := range x.edgesOf(i) {
		out = append(out, fmt.Sprintf("%s (%s)", ed.target, ed.why))
	}
	return out
}

// soleTag returns the value of an item's only tag with the prefix; false
// when it has none or several.
func soleTag(it *Item, prefix string) (string, bool) {
	v, n := "", 0
	for _, t := range it.Tags {
		if rest, ok := strings.CutPrefix(t, prefix+":"); ok {
			v = rest
			n++
		}
	}
	return v, n == 1
}

// checkTitle is the check run's one-line title: the first row with the
// worst conclusion, and how many more share it.
func checkTitle(conclusion string, rows []CheckRow) string {
	var worst []CheckRow
	for _, r := range rows {
		if r.Conclusion == conclusion {
			worst = append(worst, r)
		}
	}
	if len(worst) == 0 {
		return "No backlog item linked"
	}
	first := worst[0]
	more := ""
	if n := len(worst) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	switch {
	case first.Item == "":
		return "No backlog item linked" + more
	case conclusion == ConclusionSuccess:
		for _, r := range worst {
			if r.Delivered {
				return "Delivers " + string(r.Item) + more
			}
		}
		return "Lists " + string(first.Item) + more
	case first.Code == ExAwaitingAdmission:
		return string(first.Item) + " awaits human admission" + more
	case first.Code == CodeNeverClaimed:
		return string(first.Item) + " was never claimed" + more
	}
	return string(first.Item) + ": " + first.Code + more
}

// checkSummary renders the verdict as Markdown: a line with the conclusion,
// then a section per pull request with a list item per row. Every value that
// is not warden's own (titles, branches, owners, details quoting them) is in
// a code span, defused. The summary is cut to MaxCheckSummary bytes by whole
// rows, with a note saying how many were left out.
func checkSummary(v CheckVerdict, prs []CheckPR, perPR [][]CheckRow) string {
	head := fmt.Sprintf("**%s**: %s, %s\n", CheckRunName, v.Conclusion, reportSpan(Defuse(v.Title)))
	var units []string
	for k, p := range prs {
		pr := p.PR
		conc := ConclusionSuccess
		for _, r := range perPR[k] {
			conc = WorstConclusion(conc, r.Conclusion)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "\n### Pull request #%d: %s\n\n", pr.Number, conc)
		fmt.Fprintf(&b, "From %s into %s", checkSpan(pr.HeadRef), checkSpan(pr.BaseRef))
		if pr.HeadRepoFullName != "" {
			fmt.Fprintf(&b, " (head in %s)", checkSpan(pr.HeadRepoFullName))
		}
		if pr.Draft {
			b.WriteString(", draft")
		}
		b.WriteString(".\n\n")
		units = append(units, b.String())
		for _, r := range perPR[k] {
			units = append(units, rowMarkdown(r))
		}
	}
	size := len(head)
	for _, u := range units {
		size += len(u)
	}
	if size <= MaxCheckSummary {
		return head + strings.Join(units, "")
	}
	keep, total := 0, len(head)
	for k, u := range units {
		if total+len(u)+len(checkCutNote(len(units)-k-1)) > MaxCheckSummary {
			break
		}
		total += len(u)
		keep = k + 1
	}
	return head + strings.Join(units[:keep], "") + checkCutNote(len(units)-keep)
}

// rowMarkdown renders one row as a list item.
func rowMarkdown(r CheckRow) string {
	var b strings.Builder
	if r.Item == "" {
		fmt.Fprintf(&b, "- **no item**: %s", r.Conclusion)
	} else {
		role := "delivered"
		if !r.Delivered {
			role = "listed, not delivered"
		}
		b.WriteString("- " + checkSpan(string(r.Item)))
		if r.Title != "" {
			b.WriteString(" " + checkSpan(reportCut(r.Title, 200)))
		}
		fmt.Fprintf(&b, " (%s): **%s**", role, r.Conclusion)
	}
	for _, c := range r.Codes {
		b.WriteString(" " + checkSpan(c))
	}
	b.WriteString("\n  " + checkSpan(reportCut(r.Detail, maxCheckDetail)) + "\n")
	if r.Item != "" {
		holder := "never claimed"
		if r.Holder != "" {
			holder = r.Holder
		}
		blockers := "none"
		if len(r.Blockers) > 0 {
			blockers = strings.Join(r.Blockers, ", ")
		}
		fmt.Fprintf(&b, "  attempts %s, holder %s, blockers %s\n", strconv.Itoa(r.Attempts), checkSpan(reportCut(holder, 300)), checkSpan(reportCut(blockers, 1000)))
	}
	return b.String()
}

// span sets a hostile value in a defused code span.
func checkSpan(s string) string { return reportSpan(Defuse(s)) }

// checkCutNote is the last line of a cut summary.
func checkCutNote(left int) string {
	if left <= 0 {
		return ""
	}
	s := "s were"
	if left == 1 {
		s = " was"
	}
	return fmt.Sprintf("\n_%d more row%s left out: the summary is cut at %d bytes. warden's status page lists everything._\n", left, s, MaxCheckSummary)
}
