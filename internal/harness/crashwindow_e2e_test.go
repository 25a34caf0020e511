package harness

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// End-to-end tests of warden's two crash windows between a GitHub write and
// its record (CONTRACT.md §8's one check run per head, §5's one park
// comment per park). Each simulates a writer that stopped right after its
// write reached GitHub by editing warden's database directly, as the
// stopped writer left it, then drives warden and reads GitHub.

// checkRunRow is warden's check_runs row of a head commit (ok false: none).
func (x *e2e) checkRunRow(t *testing.T, sha string) (id int64, hash string, ok bool) {
	t.Helper()
	err := x.Service.DB.Read.QueryRowContext(context.Background(),
		`SELECT check_run_id, written_hash FROM check_runs WHERE repo_id = $1 AND head_sha = $2`, x.Repo.ID, sha).Scan(&id, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false
	}
	if err != nil {
		t.Fatalf("read the check_runs row of %.10s: %v", sha, err)
	}
	return id, hash, true
}

// exec runs one statement on warden's database and checks it changed
// exactly want rows.
func (x *e2e) exec(t *testing.T, want int64, query string, args ...any) {
	t.Helper()
	res, err := x.Service.DB.Write.ExecContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if k, _ := res.RowsAffected(); k != want {
		t.Fatalf("%s %v: %d rows changed, want %d", query, args, k, want)
	}
}

// TestCheckRunCreateInterruptedIsAdopted: a check run create that reached
// GitHub but whose record did not (the row still says "creating", id 0) is
// adopted by the head's next evaluation, never created a second time; an
// intent with no run on GitHub gets exactly one run.
func TestCheckRunCreateInterruptedIsAdopted(t *testing.T) {
	t.Parallel()

	t.Run("the run exists on GitHub", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Cache the avatars", []string{"priority:P1"})
		n := num(t, id)
		x.MustSettle(t)
		p := x.branchPR(t, "feat/avatars", "", "main", fmt.Sprintf("Closes #%d", n))
		runs := x.checkRuns(p.HeadSHA)
		if len(runs) != 1 {
			t.Fatalf("head %.10s has %d `backlog` check runs before the crash, want 1: %+v", p.HeadSHA, len(runs), runs)
		}
		run := runs[0]
		if got, _, ok := x.checkRunRow(t, p.HeadSHA); !ok || got != run.ID {
			t.Fatalf("check_runs row of %.10s: id %d (present %v), want %d", p.HeadSHA, got, ok, run.ID)
		}

		// The writer stopped between the create and its record: the row
		// holds only the intent.
		x.exec(t, 1, `UPDATE check_runs SET check_run_id = 0, written_hash = 'creating' WHERE repo_id = $1 AND head_sha = $2`,
			x.Repo.ID, p.HeadSHA)

		// The next evaluation of the head: the PR's body is edited (same link).
		x.editBody(t, p.N, fmt.Sprintf("Closes #%d\n\nAvatars are cached for a day.", n))

		runs = x.checkRuns(p.HeadSHA)
		if len(runs) != 1 {
			t.Fatalf("head %.10s has %d `backlog` check runs after the interrupted create, want exactly the one: %+v",
				p.HeadSHA, len(runs), runs)
		}
		if runs[0].ID != run.ID {
			t.Errorf("head %.10s: the run is %d, want the adopted %d", p.HeadSHA, runs[0].ID, run.ID)
		}
		if runs[0].Status != "completed" || runs[0].Conclusion != run.Conclusion {
			t.Errorf("head %.10s: adopted run %s/%s, want completed/%s", p.HeadSHA, runs[0].Status, runs[0].Conclusion, run.Conclusion)
		}
		got, hash, ok := x.checkRunRow(t, p.HeadSHA)
		if !ok || got != run.ID {
			t.Errorf("check_runs row of %.10s: id %d (present %v), want the adopted run %d", p.HeadSHA, got, ok, run.ID)
		}
		if hash == "creating" {
			t.Errorf("check_runs row of %.10s still records an unfinished create", p.HeadSHA)
		}
		if all := x.allBacklogRuns(); len(all) != 1 || all[p.HeadSHA] != 1 {
			t.Errorf("the App's `backlog` runs by head: %v, want one on %.10s", all, p.HeadSHA)
		}
	})

	t.Run("no run on GitHub", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		id := x.create(t, HumanToken, "Compress the exports", []string{"priority:P1"})
		n := num(t, id)
		x.MustSettle(t)
		sha := x.branch(t, "feat/exports", "")
		if runs := x.checkRuns(sha); len(runs) != 0 {
			t.Fatalf("head %.10s carries %d `backlog` runs before any pull request: %+v", sha, len(runs), runs)
		}
		// A writer recorded its intent and stopped before the create
		// reached GitHub.
		x.exec(t, 1, `INSERT INTO check_runs (repo_id, head_sha, check_run_id, conclusion, written_hash, updated_at)
			VALUES ($1, $2, 0, '', 'creating', 0)`, x.Repo.ID, sha)

		p := x.openPR(t, "feat/exports", "main", fmt.Sprintf("Closes #%d", n))
		if p.HeadSHA != sha {
			t.Fatalf("pull request head %.10s, want the pushed %.10s", p.HeadSHA, sha)
		}
		runs := x.checkRuns(sha)
		if len(runs) != 1 {
			t.Fatalf("head %.10s has %d `backlog` check runs, want exactly one: %+v", sha, len(runs), runs)
		}
		if runs[0].Status != "completed" {
			t.Errorf("head %.10s: run status %s, want completed", sha, runs[0].Status)
		}
		got, hash, ok := x.checkRunRow(t, sha)
		if !ok || got != runs[0].ID || hash == "creating" {
			t.Errorf("check_runs row of %.10s: id %d hash %q (present %v), want run %d recorded", sha, got, hash, ok, runs[0].ID)
		}

		// Another evaluation changes nothing more.
		x.editBody(t, p.N, fmt.Sprintf("Closes #%d\n\nGzip, level 6.", n))
		if again := x.checkRuns(sha); len(again) != 1 || again[0].ID != runs[0].ID {
			t.Errorf("head %.10s after another evaluation: %+v, want only run %d", sha, again, runs[0].ID)
		}
	})
}

// parkRow is warden's item_parks row of issue n.
func (x *e2e) parkRow(t *testing.T, n int) (stage string, commentID int64) {
	t.Helper()
	err := x.Service.DB.Read.QueryRowContext(context.Background(),
		`SELECT stage, comment_id FROM item_parks WHERE repo_id = $1 AND number = $2`, x.Repo.ID, n).Scan(&stage, &commentID)
	if err != nil {
		t.Fatalf("read the park record of #%d: %v", n, err)
	}
	return stage, commentID
}

// parkedByHand parks a new item with /backlog park and a question as a
// maintainer, settles, and checks the park is complete: the item's number,
// the park comment and the command comment.
func (x *e2e) parkedByHand(t *testing.T, title string) (int, comment, int64) {
	t.Helper()
	maria := x.Person("maria", "maintain")
	id := x.create(t, HumanToken, title, []string{"priority:P1"})
	n := num(t, id)
	x.MustSettle(t)
	cmd := x.say(t, maria, n, "/backlog park ruling-owner=alice ruling-topic=storage-choice\nWhich object store do we standardise on?")
	x.MustSettle(t)
	x.mustReact(t, n, cmd, thumbsUp)
	parkedWith(t, x.mustItem(t, id), "alice", "storage-choice")
	pcs := x.parkComments(n)
	if len(pcs) != 1 {
		t.Fatalf("#%d has %d park comments after the park, want 1: %+v", n, len(pcs), x.comments(n))
	}
	if stage, cid := x.parkRow(t, n); stage != store.ParkCommented || cid != pcs[0].ID {
		t.Fatalf("park record of #%d: stage %q comment %d, want %q %d", n, stage, cid, store.ParkCommented, pcs[0].ID)
	}
	return n, pcs[0], cmd.ID
}

// loseParkComment puts the park record of issue n back to where a writer
// left it that stopped between the post and its record: stage
// "commenting", no comment id, and the trail not yet holding warden's own
// comment (its issue_comment delivery not handled yet), so only GitHub
// knows of it.
func (x *e2e) loseParkComment(t *testing.T, n int, commentID int64) {
	t.Helper()
	x.exec(t, 1, `UPDATE item_parks SET stage = $1, comment_id = 0 WHERE repo_id = $2 AND number = $3`,
		store.ParkCommenting, x.Repo.ID, n)
	x.exec(t, 1, `DELETE FROM trail_comments WHERE repo_id = $1 AND number = $2 AND comment_id = $3`, x.Repo.ID, n, commentID)
}

// TestParkCommentPostInterruptedIsAdopted: a park comment posted to GitHub
// whose record was lost (stage "commenting") is adopted by the timer pass
// and by the park command handled a second time, never posted again; with
// no comment on GitHub the pass posts exactly one.
func TestParkCommentPostInterruptedIsAdopted(t *testing.T) {
	t.Parallel()

	t.Run("the timer pass adopts the posted comment", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		n, pc, _ := x.parkedByHand(t, "Move the uploads to object storage")
		x.loseParkComment(t, n, pc.ID)
		writes := x.simWrites()
		x.MustSweep(t)

		pcs := x.parkComments(n)
		if len(pcs) != 1 || pcs[0].ID != pc.ID {
			t.Fatalf("#%d has park comments %+v after the interrupted post, want only %d", n, pcs, pc.ID)
		}
		if stage, cid := x.parkRow(t, n); stage != store.ParkCommented || cid != pc.ID {
			t.Errorf("park record of #%d: stage %q comment %d, want %q %d (the adopted comment)", n, stage, cid, store.ParkCommented, pc.ID)
		}
		if w := x.simWrites() - writes; w != 0 {
			t.Errorf("adopting the park comment made %d GitHub writes, want none", w)
		}
		// Done: another pass changes nothing.
		x.MustSweep(t)
		if pcs := x.parkComments(n); len(pcs) != 1 {
			t.Errorf("#%d has %d park comments after another pass, want 1", n, len(pcs))
		}
	})

	t.Run("the park command handled again adopts the posted comment", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		n, pc, cmdID := x.parkedByHand(t, "Move the backups to object storage")
		x.loseParkComment(t, n, pc.ID)
		fenceBefore := x.fence(t, n)

		// The /backlog park delivery handled a second time (its replica
		// stopped before the command's answer was logged and the delivery
		// recorded done), before any pass.
		x.exec(t, 1, `DELETE FROM command_log WHERE repo_id = $1 AND comment_id = $2`, x.Repo.ID, cmdID)
		x.rehandleComment(t, n, cmdID)

		pcs := x.parkComments(n)
		if len(pcs) != 1 || pcs[0].ID != pc.ID {
			t.Fatalf("#%d has park comments %+v after the command was handled again, want only %d", n, pcs, pc.ID)
		}
		if stage, cid := x.parkRow(t, n); stage != store.ParkCommented || cid != pc.ID {
			t.Errorf("park record of #%d: stage %q comment %d, want %q %d (the adopted comment)", n, stage, cid, store.ParkCommented, pc.ID)
		}
		if f := x.fence(t, n); f != fenceBefore {
			t.Errorf("#%d: the park was begun again (fence %d -> %d), want it resumed", n, fenceBefore, f)
		}
		if answered := x.commandLogged(t, cmdID); !answered {
			t.Errorf("#%d: the /backlog park handled again was not answered", n)
		}
	})

	t.Run("no comment on GitHub", func(t *testing.T) {
		t.Parallel()
		x := newE2E(t)
		n, pc, _ := x.parkedByHand(t, "Move the logs to object storage")
		// The comment never reached GitHub: it is not on the issue, and
		// not in the trail.
		x.Sim.Locked(func() {
			i := x.Repo.Issues[n]
			delete(x.Repo.Comments, pc.ID)
			for k, id := range i.CommentIDs {
				if id == pc.ID {
					i.CommentIDs = append(i.CommentIDs[:k:k], i.CommentIDs[k+1:]...)
					break
				}
			}
		})
		if pcs := x.parkComments(n); len(pcs) != 0 {
			t.Fatalf("#%d still shows park comments %+v", n, pcs)
		}
		x.loseParkComment(t, n, pc.ID)
		x.MustSweep(t)

		pcs := x.parkComments(n)
		if len(pcs) != 1 {
			t.Fatalf("#%d has %d park comments after the pass, want exactly one: %+v", n, len(pcs), x.comments(n))
		}
		if pcs[0].ID == pc.ID {
			t.Fatalf("#%d: the park comment kept the lost id %d", n, pc.ID)
		}
		if stage, cid := x.parkRow(t, n); stage != store.ParkCommented || cid != pcs[0].ID {
			t.Errorf("park record of #%d: stage %q comment %d, want %q %d", n, stage, cid, store.ParkCommented, pcs[0].ID)
		}
		x.MustSweep(t)
		if pcs := x.parkComments(n); len(pcs) != 1 {
			t.Errorf("#%d has %d park comments after another pass, want 1", n, len(pcs))
		}
	})
}

// fence is the fence of issue n's park record.
func (x *e2e) fence(t *testing.T, n int) int64 {
	t.Helper()
	var f int64
	if err := x.Service.DB.Read.QueryRowContext(context.Background(),
		`SELECT fence FROM item_parks WHERE repo_id = $1 AND number = $2`, x.Repo.ID, n).Scan(&f); err != nil {
		t.Fatalf("read the park fence of #%d: %v", n, err)
	}
	return f
}

// rehandleComment runs warden's issue_comment handler a second time on the
// created delivery of comment commentID on issue n, then settles.
func (x *e2e) rehandleComment(t *testing.T, n int, commentID int64) {
	t.Helper()
	handled := false
	for _, d := range x.Sim.Deliveries() {
		if d.Event != "issue_comment" || d.Action != "created" {
			continue
		}
		var p struct {
			Issue struct {
				Number int `json:"number"`
			} `json:"issue"`
			Comment struct {
				ID int64 `json:"id"`
			} `json:"comment"`
			Sender struct {
				Login string `json:"login"`
			} `json:"sender"`
		}
		if err := json.Unmarshal(d.Payload, &p); err != nil || p.Issue.Number != n || p.Comment.ID != commentID {
			continue
		}
		ev := mirror.Event{Name: d.Event, Action: d.Action, DeliveryID: d.GUID, Installation: d.InstallationID,
			Payload: d.Payload, FromSelf: p.Sender.Login == x.Sim.BotLogin()}
		if _, err := x.Service.Mirror.HandleIssueComment(context.Background(), ev); err != nil {
			t.Fatalf("handling issue_comment.created %s again: %v", d.GUID, err)
		}
		handled = true
	}
	if !handled {
		t.Fatalf("no issue_comment.created delivery of comment %d on #%d", commentID, n)
	}
	x.MustSettle(t)
}

// commandLogged reports whether warden logged its answer to the command in
// comment commentID.
func (x *e2e) commandLogged(t *testing.T, commentID int64) bool {
	t.Helper()
	var k int
	if err := x.Service.DB.Read.QueryRowContext(context.Background(),
		`SELECT COUNT(*) FROM command_log WHERE repo_id = $1 AND comment_id = $2`, x.Repo.ID, commentID).Scan(&k); err != nil {
		t.Fatalf("read the command log: %v", err)
	}
	return k == 1
}
