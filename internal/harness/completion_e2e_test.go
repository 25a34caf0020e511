package harness

import (
	"fmt"
	"testing"
	"time"
)

// End-to-end tests of CONTRACT.md §9 "Writes the ledger refuses":
// completion (state:complete only under the current claim's fence, and
// only when a pr:<n> tag proves it: a pull request merged into the item's
// baseBranch: that links it and is no other item's completion, and no pr:
// tag naming an open pull request), research items (findings commented
// during the claim), groupings (the integration item complete and the
// bucket merged) and maintenance claims for reserved merges. Each refusal
// is read from PATCH /items/{id}'s problem `reason`.

// TestE2ECompletionProof: every way a completion can fail to be proven is
// refused with its reason, and the item stays live; the completion the
// merge into baseBranch: proves, under the holder's fence, is accepted.
func TestE2ECompletionProof(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.branch(t, "develop", "")
	id := x.create(t, HumanToken, "Paginate the audit log", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	old := x.claimFor(t, WorkerToken, id, "worker-7/first", 600)
	x.MustSettle(t)
	x.release(t, WorkerToken, id, old)
	f := x.claimBranch(t, WorkerToken, id, "worker-7/second", "feat/audit", 600)
	open := x.branchPR(t, "feat/audit", "", "main", fmt.Sprintf("Closes #%d", n))
	prTag := func(p pull) string { return fmt.Sprintf("pr:%d", p.N) }

	t.Run("no fencing token", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, nil, []string{"ClaimRequired"}, prTag(open))
	})
	t.Run("stale fencing token", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, &old, []string{"StaleToken"}, prTag(open))
	})
	t.Run("no pr: tag", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, &f, []string{"completion-unproven"})
	})
	t.Run("pr: names an open pull request", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, &f, []string{"complete-with-open-pr"}, prTag(open))
	})
	t.Run("pr: names a pull request closed without merging", func(t *testing.T) {
		if err := x.dev().ClosePR(x.Repo, open.N); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.mustRefuseCompletion(t, WorkerToken, id, &f, []string{"completion-unproven"}, prTag(open))
	})
	t.Run("pr: names a pull request that does not exist", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, &f, []string{"completion-unproven"}, "pr:9999")
	})
	t.Run("pr: names a pull request merged into another base", func(t *testing.T) {
		wrong := x.branchPR(t, "feat/audit-develop", "develop", "develop", fmt.Sprintf("Refs #%d", n))
		wrong = x.merge(t, wrong.N)
		if !wrong.Merged {
			t.Fatalf("setup: #%d not merged", wrong.N)
		}
		x.mustRefuseCompletion(t, WorkerToken, id, &f, []string{"completion-unproven"}, prTag(wrong))
	})
	t.Run("merged into baseBranch, with the holder's token", func(t *testing.T) {
		good := x.branchPR(t, "feat/audit-2", "", "main", fmt.Sprintf("Closes #%d", n))
		good = x.merge(t, good.N)
		x.mustComplete(t, WorkerToken, id, f, prTag(good))
	})
}

// TestE2ECompletionUnlinkedPR: a pr:<n> tag naming a merged pull request
// into baseBranch: whose body, title and head branch say nothing of the
// item proves nothing: the pull request must link the item by itself (the
// tag being written is the claim to prove, not its proof).
func TestE2ECompletionUnlinkedPR(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Split the settings page", []string{"priority:P1"})
	x.MustSettle(t)
	f := x.claimBranch(t, WorkerToken, id, "worker-7/u", "feat/settings-split", 600)
	other := x.branchPR(t, "feat/unrelated", "", "main", "An unrelated change.")
	other = x.merge(t, other.N)
	x.mustRefuseCompletion(t, WorkerToken, id, &f, []string{"completion-unproven"}, fmt.Sprintf("pr:%d", other.N))
}

// TestE2ECompletionOtherItemsPR: a merged pull request that links two items
// proves the first completion it is named for, and no other.
func TestE2ECompletionOtherItemsPR(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	a := x.create(t, HumanToken, "Rename the billing tables", []string{"priority:P1"})
	b := x.create(t, HumanToken, "Rename the billing views", []string{"priority:P1"})
	x.MustSettle(t)
	fa := x.claimFor(t, WorkerToken, a, "worker-7/a", 600)
	fb := x.claimFor(t, WorkerToken, b, "worker-7/b", 600)
	x.MustSettle(t)
	p := x.branchPR(t, "feat/billing", "", "main", fmt.Sprintf("Closes #%d\nCloses #%d", num(t, a), num(t, b)))
	p = x.merge(t, p.N)
	tag := fmt.Sprintf("pr:%d", p.N)
	x.mustComplete(t, WorkerToken, a, fa, tag)
	x.mustRefuseCompletion(t, WorkerToken, b, &fb, []string{"completion-unproven"}, tag)
}

// TestE2ECompletionResearch: a phase:research item completes without a
// pull request once its findings were commented on the issue during the
// claim; before that (or with findings posted before the claim only) the
// completion is refused.
func TestE2ECompletionResearch(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	worker := x.agent("worker-7[bot]", "write")
	id := x.create(t, HumanToken, "Survey the rate limiters", []string{"priority:P1", "phase:research"})
	n := num(t, id)
	x.MustSettle(t)
	x.say(t, worker, n, "Early notes, before anyone claimed this: token buckets look fine.")
	x.MustSettle(t)
	x.clk.Advance(3 * time.Second)
	f := x.claimFor(t, WorkerToken, id, "worker-7/r", 600)
	x.MustSettle(t)
	t.Run("findings posted before the claim only", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, &f, nil)
	})
	x.clk.Advance(time.Second)
	x.say(t, worker, n, x.marker(id, "worker-7/r", f))
	x.MustSettle(t)
	t.Run("only the claim marker posted during the claim", func(t *testing.T) {
		x.mustRefuseCompletion(t, WorkerToken, id, &f, nil)
	})

	x.clk.Advance(2 * time.Second)
	x.say(t, worker, n, "Findings: the sliding-window limiter in x/time/rate fits; numbers attached.")
	x.MustSettle(t)
	if code, out := x.complete(t, WorkerToken, id, &f); code != 200 {
		t.Fatalf("completing the research item after its findings answered %d %v, want 200", code, out)
	}
	if it := x.mustItem(t, id); !it.has("state:complete") {
		t.Errorf("%s: tags %v, want state:complete", id, it.Tags)
	}
}

// TestE2ECompletionGrouping: an epic completes (under a maintenance claim:
// an epic is never claimed otherwise) only once its integration item is
// complete and its bucket pull request merged the epic branch into the
// default branch.
func TestE2ECompletionGrouping(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	e, ms := x.epic(t, "epic/search", "Index the catalogue")
	member := ms[0]
	integ := x.integration(t, e)
	en := num(t, e)

	fm, pm := x.deliver(t, member, "worker-7/m", "feat/index", "epic/search", "epic/search", fmt.Sprintf("Refs #%d", num(t, member)))
	x.mustComplete(t, WorkerToken, member, fm, fmt.Sprintf("pr:%d", pm.N))
	x.release(t, WorkerToken, member, fm)

	fe := x.maintenanceClaim(t, PMToken, e, "pm/epic")

	t.Run("integration item not complete, no bucket", func(t *testing.T) {
		x.mustRefuseCompletion(t, PMToken, e, &fe, nil)
	})
	// A bucket merged too early (the integration item not complete) proves
	// nothing either.
	early := x.openPR(t, "epic/search", "main", fmt.Sprintf("Refs #%d", en))
	early = x.merge(t, early.N)
	t.Run("integration item not complete, bucket merged", func(t *testing.T) {
		x.mustRefuseCompletion(t, PMToken, e, &fe, nil, fmt.Sprintf("pr:%d", early.N))
	})

	fi, pi := x.deliver(t, integ, "worker-7/i", "feat/integrate", "epic/search", "epic/search", fmt.Sprintf("Refs #%d", num(t, integ)))
	x.mustComplete(t, WorkerToken, integ, fi, fmt.Sprintf("pr:%d", pi.N))
	x.release(t, WorkerToken, integ, fi)

	bucket := x.openPR(t, "epic/search", "main", fmt.Sprintf("Refs #%d", en))
	t.Run("bucket pull request still open", func(t *testing.T) {
		x.mustRefuseCompletion(t, PMToken, e, &fe, nil, fmt.Sprintf("pr:%d", bucket.N))
	})

	bucket = x.merge(t, bucket.N)
	t.Run("integration complete and bucket merged", func(t *testing.T) {
		x.mustComplete(t, PMToken, e, fe, fmt.Sprintf("pr:%d", bucket.N))
	})
}

// TestE2ECompletionReservedMerge: when the holder vanished after opening
// its pull request and someone merged it, a pm's maintenance claim
// records the completion the merge proves; the vanished holder's token is
// stale.
func TestE2ECompletionReservedMerge(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	id := x.create(t, HumanToken, "Drop the legacy exporter", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	fw := x.claimBranch(t, WorkerToken, id, "worker-7/gone", "feat/drop-exporter", 60)
	p := x.branchPR(t, "feat/drop-exporter", "", "main", fmt.Sprintf("Closes #%d", n))
	x.clk.Advance(pastQuarantine)
	p = x.merge(t, p.N)

	fm := x.maintenanceClaim(t, PMToken, id, "pm/reserved-merge")
	x.mustRefuseCompletion(t, WorkerToken, id, &fw, []string{"StaleToken"}, fmt.Sprintf("pr:%d", p.N))
	x.mustComplete(t, PMToken, id, fm, fmt.Sprintf("pr:%d", p.N))
}
