package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// maxBackfillPages bounds the comments read for one issue (100 a page).
const maxBackfillPages = 50

// backfill reads the history of an item whose history warden has no record
// of (an existing issue that gains the item label; an item whose admission
// act is missing) once, paged: every comment into the trail, as if it had
// been delivered (a comment already edited is held to the text first
// seen). It reports what it did; an item already read is not read again.
func (m *Mirror) backfill(ctx context.Context, repo store.Repo, set gating.Settings, n int) (string, error) {
	done, err := m.Acts.Backfilled(ctx, repo.ID, n)
	if err != nil || done {
		return "", err
	}
	count, err := m.readComments(ctx, repo, n, time.Time{})
	if err != nil {
		return "", err
	}
	out := fmt.Sprintf("history of %s read: %d comments", gating.IDFor(n), count)
	if err := m.Acts.MarkBackfilled(ctx, repo.ID, n, count, m.now()); err != nil {
		return "", err
	}
	return out, nil
}

// readComments reads issue n's comments updated since since (zero: all of
// them), paged, into the trail, as if each had been delivered (a comment
// already edited is held to the text first seen), and returns how many it
// read.
func (m *Mirror) readComments(ctx context.Context, repo store.Repo, n int, since time.Time) (int, error) {
	gc, err := m.callsFor(repo)
	if err != nil {
		return 0, err
	}
	count, page := 0, 0
	for pages := 0; pages < maxBackfillPages; pages++ {
		cs, next, err := gc.issueComments(ctx, n, since, page)
		if err != nil {
			return 0, fmt.Errorf("read the comments of %s#%d: %w", repo.FullName, n, err)
		}
		for _, c := range cs {
			created, updated := c.GetCreatedAt().UTC(), c.GetUpdatedAt().UTC()
			if updated.Before(created) {
				updated = created
			}
			r := store.TrailRecord{CommentID: c.GetID(), Author: c.GetUser().GetLogin(), AuthorType: c.GetUser().GetType(),
				CreatedAt: created, CurrentBody: c.GetBody(), CurrentAt: updated, EarliestBody: c.GetBody(), EarliestAt: created}
			if updated.After(created) {
				r.EarliestAt, r.Edited = updated, true
			}
			m.trustAuthor(ctx, repo, &r, strings.EqualFold(r.Author, m.botLogin()) && r.Author != "")
			if _, err := m.Ledger.RecordTrailComment(ctx, repo.ID, n, r); err != nil {
				return 0, err
			}
			count++
		}
		if next == 0 {
			break
		}
		page = next
	}
	return count, nil
}

// repairAdmission settles admission-unrecorded (the admission label is off
// the issue and no admission act is on record, as a snapshot showed) by
// reading the issue's label events once: a human with triage+ who removed
// it admitted the item (the act is recorded); anything else puts the label
// back (fail closed: it only narrows); the label on the issue after all (a
// delivery was behind, or reordered) is noted in the recorded issue state,
// so the read is not undone by a delivery older than it (see
// store.Ledger.NoteLabel). reread reports that the ledger may now say
// otherwise than the snapshot that showed the defect (always, unless
// nothing was read: dry_run): the caller judges the item again before it
// publishes anything.
func (m *Mirror) repairAdmission(ctx context.Context, repo store.Repo, set gating.Settings, n int) (out string, reread bool, err error) {
	if set.DryRun {
		return "", false, nil
	}
	adm, err := m.Acts.Admission(ctx, repo.ID, n)
	if err != nil {
		return "", true, err
	}
	st, err := m.Ledger.IssueState(ctx, repo.ID, n)
	if err != nil {
		return "", true, err
	}
	if adm != nil || st == nil || st.HasLabel(set.AdmissionLabel) {
		// Recorded since the snapshot was read: nothing to repair.
		return "", true, nil
	}
	c, err := m.callsFor(repo)
	if err != nil {
		return "", true, err
	}
	act, err := m.lastLabelAct(ctx, c, repo, n, set.AdmissionLabel)
	if err != nil {
		return "", true, err
	}
	id := gating.IDFor(n)
	if act.Known && act.Present {
		// lastLabelAct noted it in the recorded state.
		return fmt.Sprintf("%s: %s is on the issue after all (label events read; a delivery was behind)", id, set.AdmissionLabel), true, nil
	}
	who := person{}
	if act.Known && act.Action == "unlabeled" {
		who = m.judge(ctx, repo, act.Actor, act.ActorType)
	}
	if who.Human {
		// No payload shows the text the human admitted: the recorded text
		// as of the act, as far as the logged edits tell.
		spec, err := m.specAsOf(ctx, repo, n, act.At)
		if err != nil {
			return "", true, err
		}
		if err := m.admit(ctx, repo, n, who.Login, act.At, "label events: removed "+set.AdmissionLabel, spec); err != nil {
			return "", true, err
		}
		return fmt.Sprintf("admission by %s recorded from the label events", who.Login), true, nil
	}
	if err := m.addLabel(ctx, c, repo, set, n, set.AdmissionLabel); err != nil {
		return "", true, err
	}
	return fmt.Sprintf("no human admission on record: %s added", set.AdmissionLabel), true, nil
}
