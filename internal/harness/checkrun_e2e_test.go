package harness

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// End-to-end tests of CONTRACT.md §8: the `backlog` check run warden keeps
// on the head commit of each open pull request, as a person sees it in the
// Checks tab (the simulator's check runs: name, conclusion, title,
// summary), for each row of the contract's table, each way of linking a
// pull request to an item, and each event that re-evaluates it.

const (
	success = "success"
	neutral = "neutral"
	failure = "failure"
)

// epic makes a grouping: an admitted epic item whose baseBranch: is branch
// (pushed from the default branch with a commit of its own, so it is ahead
// of it), and members admitted items partOf it. It returns the epic's id
// and the members' ids.
func (x *e2e) epic(t *testing.T, branch string, members ...string) (string, []string) {
	t.Helper()
	x.branch(t, branch, "")
	e := x.create(t, HumanToken, "Epic on "+branch, []string{"priority:P1", "baseBranch:" + branch})
	var ms []string
	for _, title := range members {
		ms = append(ms, x.create(t, HumanToken, title, []string{"priority:P1"}, map[string]string{"rel": "partOf", "target": e}))
	}
	x.MustSettle(t)
	for _, m := range ms {
		if it := x.mustItem(t, m); !it.has("baseBranch:" + branch) {
			t.Fatalf("member %s of %s does not inherit baseBranch:%s: %v", m, e, branch, it.Tags)
		}
	}
	return e, ms
}

// integration makes the epic's integration item: partOf it, integrates it,
// phase:integration.
func (x *e2e) integration(t *testing.T, epic string) string {
	t.Helper()
	id := x.create(t, HumanToken, "Integrate "+epic, []string{"priority:P1", "phase:integration"},
		map[string]string{"rel": "partOf", "target": epic}, map[string]string{"rel": "integrates", "target": epic})
	x.MustSettle(t)
	return id
}

// TestE2ECheckRunTable: one subtest per row of CONTRACT.md §8's table; each
// opens a pull request linked to an item in the row's condition and reads
// the `backlog` check run on its head.
func TestE2ECheckRunTable(t *testing.T) {
	t.Parallel()

	t.Run("no linked item is neutral, failure with require_item", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		p := x.branchPR(t, "chore/tidy", "", "main", "Tidies the README; no backlog item.")
		x.mustCheck(t, p.HeadSHA, neutral)

		x.pushSettings(t, x.Person("hana", "maintain"), "main", "require_item: true\n")
		q := x.branchPR(t, "chore/tidy-more", "", "main", "More tidying; still no backlog item.")
		x.mustCheck(t, q.HeadSHA, failure)
		// The other open pull request is judged under the new setting by
		// its next evaluation at the latest (an edit).
		x.editBody(t, p.N, "Tidies the README; no backlog item (edited).")
		x.mustCheck(t, p.HeadSHA, failure)
	})

	t.Run("not admitted", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, PMToken, "Proposed by the pm agent", []string{"priority:P1"})
		x.MustSettle(t)
		p := x.branchPR(t, "feat/proposed", "", "main", fmt.Sprintf("Closes #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id+" awaits human admission")
	})

	t.Run("parked", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Replace the job queue", []string{"priority:P1"})
		x.MustSettle(t)
		if code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:queue-choice"}}); code != http.StatusOK {
			t.Fatalf("pm park answered %d %v", code, out)
		}
		x.MustSettle(t)
		p := x.branchPR(t, "feat/queue", "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id, "park")
	})

	t.Run("poisoned", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P1"})
		x.MustSettle(t)
		x.custodyChanges(t, id, 3, "p")
		p := x.branchPR(t, "feat/keys", "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		// warden parks a poison item itself; poisoned or parked, it fails.
		run := x.mustCheck(t, p.HeadSHA, failure, id)
		if txt := run.text(); !strings.Contains(txt, "poison") && !strings.Contains(txt, "park") {
			t.Errorf("the failure does not say the item is poisoned or parked:\n%s", txt)
		}
	})

	t.Run("poisoned, its last holder vanished", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		worker := x.Sim.As("worker-7[bot]")
		id := x.create(t, HumanToken, "Rebuild the search index", []string{"priority:P1"})
		n := num(t, id)
		x.MustSettle(t)
		x.cycle(t, WorkerToken, "worker-7/v0", worker, id)
		x.cycle(t, PMToken, "pm/v1", x.Sim.As("pm-agent[bot]"), id)
		f := x.claimFor(t, WorkerToken, id, "worker-7/v2", 60)
		x.say(t, worker, n, x.marker(id, "worker-7/v2", f))
		x.MustSettle(t)
		x.clk.Advance(pastQuarantine)
		// No sweep and no pass ran: poisoned, whether or not a park was
		// written yet.
		p := x.branchPR(t, "feat/reindex", "", "main", fmt.Sprintf("Refs #%d", n))
		run := x.mustCheck(t, p.HeadSHA, failure, id)
		if txt := run.text(); !strings.Contains(txt, "poison") && !strings.Contains(txt, "park") {
			t.Errorf("the failure does not say the item is poisoned or parked:\n%s", txt)
		}
	})

	t.Run("takeover-collision hold", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		worker := x.Sim.As("worker-7[bot]")
		pmBot := x.Sim.As("pm-agent[bot]")
		id := x.create(t, HumanToken, "Move the queue to the new broker", []string{"priority:P1"})
		n := num(t, id)
		x.MustSettle(t)
		f1 := x.claimFor(t, WorkerToken, id, "worker-7/a", 60)
		x.say(t, worker, n, x.marker(id, "worker-7/a", f1))
		x.MustSettle(t)
		x.clk.Advance(pastQuarantine)
		f2 := x.claimFor(t, PMToken, id, "pm/b", 600)
		x.say(t, pmBot, n, x.takeoverMarker(id, "pm/b", f2, "worker-7/a", f1))
		x.MustSettle(t)
		x.clk.Advance(5 * time.Second)
		x.say(t, worker, n, fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=worker-7/a fence=%d result=released -->", id, f1))
		x.MustSettle(t)
		x.release(t, PMToken, id, f2)
		x.MustSettle(t)
		if s := x.mustReady(t); s.exclusion(id) != "collision-hold" {
			t.Fatalf("setup: %s excluded as %q, want collision-hold", id, s.exclusion(id))
		}
		p := x.branchPR(t, "feat/broker", "", "main", fmt.Sprintf("Refs #%d", n))
		x.mustCheck(t, p.HeadSHA, failure, id, "collision")
	})

	t.Run("unrecognised state", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Imported with an invented state", []string{"priority:P1"})
		x.MustSettle(t)
		x.claimFor(t, WorkerToken, id, "worker-7/s", 600)
		x.MustSettle(t)
		x.restoreTags(t, num(t, id), []string{"state:wip"}, "")
		p := x.branchPR(t, "feat/imported", "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id, "state:wip")
	})

	t.Run("missing mandatory tag", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Imported without a priority", []string{"priority:P1"})
		x.MustSettle(t)
		x.claimFor(t, WorkerToken, id, "worker-7/m", 600)
		x.MustSettle(t)
		x.restoreTags(t, num(t, id), nil, "priority:")
		p := x.branchPR(t, "feat/no-priority", "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id, "missing-mandatory-tag")
	})

	t.Run("duplicate single-valued tag", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Imported with two priorities", []string{"priority:P1"})
		x.MustSettle(t)
		x.claimFor(t, WorkerToken, id, "worker-7/d", 600)
		x.MustSettle(t)
		x.restoreTags(t, num(t, id), []string{"priority:P0"}, "")
		p := x.branchPR(t, "feat/two-priorities", "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id, "duplicate-attribute-tag")
	})

	t.Run("phase:research", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Survey the queue libraries", []string{"priority:P1", "phase:research"})
		x.MustSettle(t)
		x.claimFor(t, WorkerToken, id, "worker-7/r", 600)
		p := x.branchPR(t, "research/queues", "", "main", fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id, "research-with-pr")
	})

	t.Run("base differs from baseBranch", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		x.branch(t, "develop", "")
		id := x.create(t, HumanToken, "Shard the session table", []string{"priority:P1"})
		x.MustSettle(t)
		x.claimFor(t, WorkerToken, id, "worker-7/w", 600)
		p := x.branchPR(t, "feat/shard", "develop", "develop", fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, failure, id, "pr-wrong-base")
	})

	t.Run("epic member into the default branch", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		_, ms := x.epic(t, "epic/search", "Index the catalogue")
		x.claimFor(t, WorkerToken, ms[0], "worker-7/e", 600)
		p := x.branchPR(t, "feat/index", "epic/search", "main", fmt.Sprintf("Refs #%d", num(t, ms[0])))
		x.mustCheck(t, p.HeadSHA, failure, ms[0], "epic-child-on-main")
	})

	t.Run("epic member cut from the default branch", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		_, ms := x.epic(t, "epic/search", "Index the catalogue")
		x.claimFor(t, WorkerToken, ms[0], "worker-7/e", 600)
		p := x.branchPR(t, "feat/index", "", "epic/search", fmt.Sprintf("Refs #%d", num(t, ms[0])))
		x.mustCheck(t, p.HeadSHA, failure, ms[0], "pr-not-from-base")
	})

	t.Run("epic member cut from the epic branch, which moved on", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		_, ms := x.epic(t, "epic/search", "Index the catalogue")
		x.claimFor(t, WorkerToken, ms[0], "worker-7/e", 600)
		p := x.branchPR(t, "feat/index", "epic/search", "epic/search", fmt.Sprintf("Refs #%d", num(t, ms[0])))
		x.mustCheck(t, p.HeadSHA, success, ms[0])
		// Another member's work lands on the epic branch: the base moved
		// on, which is no failure.
		x.commit(t, "epic/search")
		x.commit(t, "feat/index")
		p = x.pr(t, p.N)
		x.mustCheck(t, p.HeadSHA, success, ms[0])
	})

	t.Run("bucket pull request with the integration item incomplete", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		e, _ := x.epic(t, "epic/search", "Index the catalogue")
		x.integration(t, e)
		p := x.openPR(t, "epic/search", "main", fmt.Sprintf("Closes #%d", num(t, e)))
		x.mustCheck(t, p.HeadSHA, failure, e, "integration-incomplete")
	})

	t.Run("never claimed", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Trim the log output", []string{"priority:P2"})
		x.MustSettle(t)
		p := x.branchPR(t, "feat/logs", "", "main", fmt.Sprintf("Closes #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, neutral, id)
	})

	t.Run("otherwise success, naming the item, attempts and holder", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Cache the tenant lookups", []string{"priority:P1"})
		x.MustSettle(t)
		x.claimBranch(t, WorkerToken, id, "worker-7/ok", "feat/cache", 600)
		p := x.branchPR(t, "feat/cache", "", "main", fmt.Sprintf("Closes #%d", num(t, id)))
		run := x.mustCheck(t, p.HeadSHA, success, id, "worker-7/ok")
		if !attemptsLike(1).MatchString(run.text()) {
			t.Errorf("the success does not give the item's attempts (1):\n%s", run.text())
		}
		// A blocker added while it is claimed is named too (blocked is no
		// failure: the row lists its blockers).
		blocker := x.create(t, HumanToken, "Pick the cache library", []string{"priority:P1"})
		x.MustSettle(t)
		f := x.status(t, id).FencingToken
		code, out := x.patchItem(t, PMToken, id, map[string]any{"addLinks": []map[string]string{{"rel": "blockedBy", "target": blocker}}, "fencingToken": *f})
		if code != http.StatusOK {
			t.Fatalf("pm adding blockedBy %s under fence %d answered %d %v", blocker, *f, code, out)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, success, id, blocker)
	})
}

// TestE2ECheckRunLinking: each way CONTRACT.md §8 links a pull request to
// an item makes the check run judge that item (success for a claimed,
// admitted item, naming it); a reference inside a code block or a quote
// links nothing (neutral, the item not named).
func TestE2ECheckRunLinking(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	full := x.Repo.FullName
	type row struct {
		name   string
		body   func(n int) string
		linked bool
	}
	rows := []row{
		{"Closes #N", func(n int) string { return fmt.Sprintf("Implements the cache.\n\nCloses #%d", n) }, true},
		{"fixes #N, lower case", func(n int) string { return fmt.Sprintf("fixes #%d", n) }, true},
		{"Resolved OWNER/REPO#N", func(n int) string { return fmt.Sprintf("Resolved %s#%d", full, n) }, true},
		{"Refs #N", func(n int) string { return fmt.Sprintf("Refs #%d", n) }, true},
		{"part of #N", func(n int) string { return fmt.Sprintf("This is part of #%d.", n) }, true},
		{"towards #N", func(n int) string { return fmt.Sprintf("A step towards #%d", n) }, true},
		{"issue-N literal", func(n int) string { return fmt.Sprintf("Delivers issue-%d.", n) }, true},
		{"in a fenced code block", func(n int) string { return fmt.Sprintf("Example:\n\n```\nCloses #%d\n```\n", n) }, false},
		{"in inline code", func(n int) string { return fmt.Sprintf("Write `Closes #%d` in the body.", n) }, false},
		{"in a quote", func(n int) string { return fmt.Sprintf("> Closes #%d\n\nNot this one.", n) }, false},
		{"a bare #N", func(n int) string { return fmt.Sprintf("Like #%d, but elsewhere.", n) }, false},
	}
	for k, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			id := x.create(t, HumanToken, "Linked by "+r.name, []string{"priority:P2"})
			x.MustSettle(t)
			x.claimFor(t, WorkerToken, id, fmt.Sprintf("worker-7/l%d", k), 600)
			x.MustSettle(t)
			p := x.branchPR(t, fmt.Sprintf("link/%d", k), "", "main", r.body(num(t, id)))
			if r.linked {
				x.mustCheck(t, p.HeadSHA, success, id)
				return
			}
			run := x.mustCheck(t, p.HeadSHA, neutral)
			if strings.Contains(run.text(), id) {
				t.Errorf("the check run names %s, which the body mentions only %s:\n%s", id, r.name, run.text())
			}
		})
	}

	t.Run("pr:<n> tag on the item", func(t *testing.T) {
		id := x.create(t, HumanToken, "Linked by its pr: tag", []string{"priority:P2"})
		x.MustSettle(t)
		f := x.claimFor(t, WorkerToken, id, "worker-7/tag", 600)
		x.MustSettle(t)
		p := x.branchPR(t, "link/tag", "", "main", "No reference in the body.")
		x.mustCheck(t, p.HeadSHA, neutral)
		code, out := x.patchItem(t, WorkerToken, id, map[string]any{"addTags": []string{fmt.Sprintf("pr:%d", p.N)}, "fencingToken": f})
		if code != http.StatusOK {
			t.Fatalf("the holder's pr:%d tag answered %d %v", p.N, code, out)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, success, id)
	})

	t.Run("the claim's recorded branch", func(t *testing.T) {
		id := x.create(t, HumanToken, "Linked by the claim's branch", []string{"priority:P2"})
		x.MustSettle(t)
		x.claimBranch(t, WorkerToken, id, "worker-7/br", "link/by-branch", 600)
		p := x.branchPR(t, "link/by-branch", "", "main", "No reference in the body.")
		x.mustCheck(t, p.HeadSHA, success, id)
	})

	t.Run("an edit that adds the link", func(t *testing.T) {
		id := x.create(t, HumanToken, "Linked by an edit", []string{"priority:P2"})
		x.MustSettle(t)
		x.claimFor(t, WorkerToken, id, "worker-7/ed", 600)
		x.MustSettle(t)
		p := x.branchPR(t, "link/edited", "", "main", "Forgot the reference.")
		x.mustCheck(t, p.HeadSHA, neutral)
		x.editBody(t, p.N, fmt.Sprintf("Refs #%d", num(t, id)))
		x.mustCheck(t, p.HeadSHA, success, id)
	})
}

// TestE2ECheckRunForkNotLinkedByBranch: a pull request from a fork whose
// branch has the name recorded with a claim is not linked by that branch.
func TestE2ECheckRunForkNotLinkedByBranch(t *testing.T) {
	t.Skip("the simulator does not model forks (OpenPR refuses a head owned by another account), so a fork's pull request cannot be opened")
}

// TestE2ECheckRunOnePerHead: whatever events re-evaluate it (edited,
// synchronize, closed and reopened, check_suite rerequested, check_run
// rerequested), a head commit carries one `backlog` check run; a push to
// the branch puts a new run on the new head and leaves the old head's run
// as it was.
func TestE2ECheckRunOnePerHead(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	dev := x.dev()
	id := x.create(t, HumanToken, "Compress the backups", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	x.claimBranch(t, WorkerToken, id, "worker-7/h", "feat/compress", 600)
	p := x.branchPR(t, "feat/compress", "", "main", fmt.Sprintf("Refs #%d", n))
	sha1 := p.HeadSHA
	first := x.mustCheck(t, sha1, success, id)

	x.editBody(t, p.N, fmt.Sprintf("Refs #%d\n\nNow with zstd.", n))
	x.mustCheck(t, sha1, success, id)

	sha2 := x.commit(t, "feat/compress")
	if sha2 == sha1 {
		t.Fatal("setup: the push did not move the head")
	}
	x.mustCheck(t, sha2, success, id)
	if old := x.checkRuns(sha1); len(old) != 1 || old[0] != first {
		t.Errorf("the old head's run changed after the push: was %+v, now %+v", first, old)
	}

	if err := dev.ClosePR(x.Repo, p.N); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if err := dev.ReopenPR(x.Repo, p.N); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.mustCheck(t, sha2, success, id)

	suite := x.suiteOf(sha2)
	if suite == 0 {
		t.Fatalf("no check suite of the App on %.10s", sha2)
	}
	if err := dev.RerequestCheckSuite(x.Repo, suite); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	run := x.mustCheck(t, sha2, success, id)

	if err := dev.RerequestCheckRun(x.Repo, run.ID); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.mustCheck(t, sha2, success, id)

	if err := dev.ConvertToDraft(x.Repo, p.N); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if err := dev.MarkReady(x.Repo, p.N); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.mustCheck(t, sha2, success, id)

	for sha, k := range x.allBacklogRuns() {
		if k != 1 {
			t.Errorf("head %.10s carries %d `backlog` check runs, want one", sha, k)
		}
	}
}

// TestE2ECheckRunSameHeadWorst: two open pull requests with one head commit
// share its one check run, whose conclusion is the worst over both; when
// the failing one closes, the run follows the other.
func TestE2ECheckRunSameHeadWorst(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.branch(t, "develop", "")
	id := x.create(t, HumanToken, "Batch the mail sends", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	x.claimFor(t, WorkerToken, id, "worker-7/s", 600)
	good := x.branchPR(t, "feat/batch", "", "main", fmt.Sprintf("Refs #%d", n))
	x.mustCheck(t, good.HeadSHA, success, id)

	bad := x.openPR(t, "feat/batch", "develop", fmt.Sprintf("Refs #%d", n))
	if bad.HeadSHA != good.HeadSHA {
		t.Fatalf("setup: heads differ %.10s %.10s", bad.HeadSHA, good.HeadSHA)
	}
	run := x.mustCheck(t, good.HeadSHA, failure, "pr-wrong-base")
	txt := run.text()
	for _, want := range []string{fmt.Sprintf("#%d", good.N), fmt.Sprintf("#%d", bad.N)} {
		if !strings.Contains(txt, want) {
			t.Errorf("the summary has no row for pull request %s:\n%s", want, txt)
		}
	}

	if err := x.dev().ClosePR(x.Repo, bad.N); err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	x.mustCheck(t, good.HeadSHA, success, id)
}

// TestE2ECheckRunFollowsItem: a change to a linked item (its claim
// released, its admission taken back and given again by a human, its tags
// changed, parked and unparked) re-runs the check on its open pull
// requests without any pull request event.
func TestE2ECheckRunFollowsItem(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	maria := x.Person("maria", "maintain")
	id := x.create(t, HumanToken, "Stream the exports", []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	f := x.claimFor(t, WorkerToken, id, "worker-7/f", 600)
	x.MustSettle(t)
	p := x.branchPR(t, "feat/stream", "", "main", fmt.Sprintf("Refs #%d", n))
	held := x.mustCheck(t, p.HeadSHA, success, id, "worker-7/f")

	t.Run("claim released", func(t *testing.T) {
		x.release(t, WorkerToken, id, f)
		x.MustSettle(t)
		run := x.mustCheck(t, p.HeadSHA, success, id)
		if run.Summary == held.Summary {
			t.Errorf("the summary did not change when the claim was released:\n%s", run.text())
		}
	})

	t.Run("admission taken back by a human", func(t *testing.T) {
		if _, err := maria.AddLabels(x.Repo, n, lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, failure, id+" awaits human admission")
	})

	t.Run("admitted again by a human", func(t *testing.T) {
		if _, err := maria.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
			t.Fatal(err)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, success, id)
	})

	t.Run("tags changed: phase:research", func(t *testing.T) {
		code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"phase:research"}, "removeTags": []string{"phase:implementation"}})
		if code != http.StatusOK {
			t.Fatalf("pm phase change answered %d %v", code, out)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, failure, "research-with-pr")
		code, out = x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"phase:implementation"}, "removeTags": []string{"phase:research"}})
		if code != http.StatusOK {
			t.Fatalf("pm phase change back answered %d %v", code, out)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, success, id)
	})

	t.Run("parked, then unparked by a human", func(t *testing.T) {
		code, out := x.patchItem(t, PMToken, id, map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}})
		if code != http.StatusOK {
			t.Fatalf("pm park answered %d %v", code, out)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, failure, id)
		code, out = x.patchItem(t, HumanToken, id, map[string]any{"removeTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:scope"}})
		if code != http.StatusOK {
			t.Fatalf("human unpark answered %d %v", code, out)
		}
		x.MustSettle(t)
		x.mustCheck(t, p.HeadSHA, success, id)
	})

	if k := x.allBacklogRuns()[p.HeadSHA]; k != 1 {
		t.Errorf("head %.10s carries %d `backlog` check runs after the re-runs, want one", p.HeadSHA, k)
	}
}
