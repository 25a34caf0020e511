package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// maintenanceLease is the lease of warden's own maintenance claims: long
// enough for one tag write, short enough that a crash frees the item soon.
const maintenanceLease = 60.0

// PoisonQuestion is the question warden's own park asks its ruling owner.
const PoisonQuestion = "This item reached its poison threshold: agents kept taking it and none finished it. " +
	"What has to change before another attempt: the specification, a split into smaller items, a blocker to add, or dropping it?"

// parkCalls are the GitHub calls that finish a park: the parked label, and
// the park comment, posted once (a post whose record was lost is looked
// for first).
type parkCalls interface {
	labelCalls
	ownCommentCalls
	// createComment posts body on issue n and returns the comment's id.
	createComment(ctx context.Context, n int, body string) (int64, error)
}

// errMaintenanceRefused is a maintenance claim the ledger did not grant
// (the item is held): the delivery is retried.
var errMaintenanceRefused = errors.New("maintenance claim not granted")

// maintain runs fn under a maintenance claim on the item (advancing the
// fence, so a vanished holder's later writes are refused) and releases it
// whatever fn returns.
func (m *Mirror) maintain(ctx context.Context, repo store.Repo, id gating.ItemID, actor store.Actor, fn func(token int64) error) error {
	lease := maintenanceLease
	res, err := m.Ledger.Claim(ctx, repo.ID, id, store.ClaimRequest{Owner: "warden/maintenance", LeaseSeconds: &lease, Purpose: "maintenance"}, actor)
	if err != nil {
		return fmt.Errorf("maintenance claim on %s: %w", id, err)
	}
	if !res.Granted || res.FencingToken == nil {
		reason := "refused"
		if res.Reason != nil {
			reason = *res.Reason
		}
		return fmt.Errorf("%w on %s: %s", errMaintenanceRefused, id, reason)
	}
	token := *res.FencingToken
	ferr := fn(token)
	if _, err := m.Ledger.Release(ctx, repo.ID, id, token, actor); err != nil {
		return errors.Join(ferr, fmt.Errorf("release the maintenance claim on %s: %w", id, err))
	}
	return ferr
}

// routeTags are the item's ruling-owner:* and ruling-topic:* tags, but for
// those in keep (a park's new route keeps what it re-writes).
func routeTags(it *store.Item, keep ...string) []string {
	var out []string
	for _, t := range it.Tags {
		if (strings.HasPrefix(t, "ruling-owner:") || strings.HasPrefix(t, "ruling-topic:")) && !slices.Contains(keep, t) {
			out = append(out, t)
		}
	}
	return out
}

// unparked records what follows a human's unpark, however it was made (a
// label removal, /backlog unpark, a human token's write): a new attempt
// epoch from at, the park record forgotten, the park findings closed.
func (m *Mirror) unparked(ctx context.Context, repo store.Repo, n int, at time.Time, by string) error {
	if err := m.Acts.StartEpoch(ctx, repo.ID, n, at, by); err != nil {
		return err
	}
	if err := m.Acts.ClearParkRecord(ctx, repo.ID, n); err != nil {
		return err
	}
	for _, c := range []string{CodeAgentRemovedPark, CodeParkWithoutQuestion, CodeParkLabelWithoutTag} {
		if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, c); err != nil {
			return err
		}
	}
	return nil
}

// unpark is a human's unpark (label removal or /backlog unpark): it removes
// state:parked and the route, starts a new attempt epoch and closes the park
// findings.
func (m *Mirror) unpark(ctx context.Context, repo store.Repo, n int, by string, at time.Time, how string) (string, error) {
	id := gating.IDFor(n)
	it, err := m.Ledger.Get(ctx, repo.ID, id)
	if err != nil {
		return "", err
	}
	if it.HasTag("state:parked") {
		remove := append([]string{"state:parked"}, routeTags(&it)...)
		actor := store.Actor{Role: gating.RoleHuman, Name: by}
		err := m.maintain(ctx, repo, id, actor, func(token int64) error {
			_, err := m.Ledger.Update(ctx, repo.ID, id, store.Patch{RemoveTags: remove, FencingToken: &token}, actor, store.WriteOptions{})
			return err
		})
		if err != nil {
			return "", fmt.Errorf("unpark %s: %w", id, err)
		}
	}
	if err := m.unparked(ctx, repo, n, at, by); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s unparked by %s (%s): a new attempt epoch", id, by, how), nil
}

// manualPark is a human's park (the parked label added by a human with
// triage+, or /backlog park): state:parked with the route in one write,
// under a maintenance claim; then the label; then, with a question, the park
// comment. Without a question it is reported park-without-question until
// one is posted (/backlog park carries it).
func (m *Mirror) manualPark(ctx context.Context, repo store.Repo, set gating.Settings, n int, by, owner, topic, question string, at time.Time) (string, error) {
	id := gating.IDFor(n)
	rec, err := m.beginManualPark(ctx, repo, n, by, owner, topic, question, at)
	if err != nil {
		return "", err
	}
	out := fmt.Sprintf("%s parked by %s (ruling-owner:%s ruling-topic:%s)", id, by, owner, topic)
	if err := m.finishPark(ctx, repo, set, n, rec); err != nil {
		return "", err
	}
	if strings.TrimSpace(question) == "" {
		detail := fmt.Sprintf("%s parked the item without a question for its ruling owner; post one with `/backlog park ruling-owner=%s ruling-topic=%s` and the question on the lines below", by, owner, topic)
		if _, err := m.Acts.NoteLabelFinding(ctx, repo.ID, n, CodeParkWithoutQuestion, by, detail, fmt.Sprintf("park:%d", at.UnixMilli()), at); err != nil {
			return "", err
		}
		return out + "; no question yet", nil
	}
	if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeParkWithoutQuestion); err != nil {
		return "", err
	}
	return out, nil
}

// beginManualPark writes a human's park's tags under a maintenance claim and
// records the park. The same act handled a second time (its replica
// stopped before the delivery was recorded done) finds its own record, by
// the act's time and route, and returns it to be finished, so the park is
// not begun again (a second maintenance claim, a second comment).
func (m *Mirror) beginManualPark(ctx context.Context, repo store.Repo, n int, by, owner, topic, question string, at time.Time) (*store.ParkRecord, error) {
	id := gating.IDFor(n)
	old, err := m.Acts.ParkRecord(ctx, repo.ID, n)
	if err != nil {
		return nil, err
	}
	if old != nil && old.At.UnixMilli() == at.UnixMilli() && old.RulingOwner == owner && old.RulingTopic == topic && old.Question == question {
		return old, nil
	}
	it, err := m.Ledger.Get(ctx, repo.ID, id)
	if err != nil {
		return nil, err
	}
	want := []string{"state:parked", "ruling-owner:" + owner, "ruling-topic:" + topic}
	remove := routeTags(&it, want...)
	actor := store.Actor{Role: gating.RoleHuman, Name: by}
	var token int64
	err = m.maintain(ctx, repo, id, actor, func(tok int64) error {
		token = tok
		_, err := m.Ledger.Update(ctx, repo.ID, id, store.Patch{AddTags: want, RemoveTags: remove, FencingToken: &tok}, actor, store.WriteOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("park %s: %w", id, err)
	}
	rec := &store.ParkRecord{Fence: token, RulingOwner: owner, RulingTopic: topic, Question: question, Stage: store.ParkTagged, At: at}
	if err := m.Acts.PutParkRecord(ctx, repo.ID, n, *rec); err != nil {
		return nil, err
	}
	// The label another account put on the item is a park's now.
	if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag); err != nil {
		return nil, err
	}
	return rec, nil
}

// poisonPark is warden's own park (CONTRACT.md §5, the protocol's sweep
// backstop) of an item whose attempts this epoch reached the threshold with
// no claim held or lapsed: under a maintenance claim it writes state:parked
// with ruling-owner:<ruling_owner> and ruling-topic:poison-threshold,
// releases, then adds the parked label, then posts the park comment naming
// the question and each attempt's owner and outcome. Each stage is recorded
// as it completes, so an interrupted park is finished, never started over.
func (m *Mirror) poisonPark(ctx context.Context, repo store.Repo, set gating.Settings, rs *store.Snapshot, id gating.ItemID, attempts int) (string, error) {
	n := id.Number()
	it := rs.Items[id]
	if it == nil {
		return "", fmt.Errorf("park %s: not in the snapshot", id)
	}
	rec := store.ParkRecord{Attempts: attempts, RulingOwner: set.RulingOwner, RulingTopic: "poison-threshold", Question: PoisonQuestion, Stage: store.ParkTagged, At: m.now()}
	if !it.HasTag("state:parked") {
		if set.DryRun {
			// No tag either: the park is warden's write, and a tag with no
			// label and no comment would read as a park half made.
			m.heldWrite(repo, "park", "item", id, "attempts", attempts, "label", set.ParkedLabel)
			return fmt.Sprintf("%s would be parked at %d attempts (dry run)", id, attempts), nil
		}
		tags := []string{"state:parked", "ruling-owner:" + set.RulingOwner, "ruling-topic:poison-threshold"}
		remove := routeTags(it, tags...)
		actor := store.Actor{Role: gating.RoleWarden, Name: "warden"}
		err := m.maintain(ctx, repo, id, actor, func(tok int64) error {
			rec.Fence = tok
			_, err := m.Ledger.Update(ctx, repo.ID, id, store.Patch{AddTags: tags, RemoveTags: remove, FencingToken: &tok}, actor, store.WriteOptions{})
			return err
		})
		if err != nil {
			return "", fmt.Errorf("park %s: %w", id, err)
		}
		if err := m.Acts.PutParkRecord(ctx, repo.ID, n, rec); err != nil {
			return "", err
		}
		if err := m.Acts.CloseLabelFinding(ctx, repo.ID, n, CodeParkLabelWithoutTag); err != nil {
			return "", err
		}
	} else if old, err := m.Acts.ParkRecord(ctx, repo.ID, n); err != nil {
		return "", err
	} else if old != nil {
		rec = *old
	}
	if err := m.finishPark(ctx, repo, set, n, &rec); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s parked at %d attempts (ruling-owner:%s ruling-topic:poison-threshold)", id, attempts, set.RulingOwner), nil
}

// finishPark takes a park whose tags are written through its remaining
// stages: the parked label, then (with a question) the park comment. It
// runs under the item's park lock, across replicas on PostgreSQL, and
// re-reads the record once it holds it: the handler that parked and a timer
// or reconcile pass finishing the same park never both post the comment.
func (m *Mirror) finishPark(ctx context.Context, repo store.Repo, set gating.Settings, n int, rec *store.ParkRecord) error {
	if set.DryRun {
		// The record stays at its stage: the label and the comment are
		// written when dry run ends.
		m.heldWrite(repo, "finish the park (label, park comment)", "item", gating.IDFor(n), "stage", rec.Stage, "label", set.ParkedLabel)
		return nil
	}
	unlock, err := m.Ledger.Lock(ctx, fmt.Sprintf("park/%d/%d", repo.ID, n))
	if err != nil {
		return fmt.Errorf("finish the park of %s: %w", gating.IDFor(n), err)
	}
	defer unlock()
	cur, err := m.Acts.ParkRecord(ctx, repo.ID, n)
	if err != nil {
		return err
	}
	if cur != nil && cur.Fence == rec.Fence && parkStageOrder[cur.Stage] > parkStageOrder[rec.Stage] {
		*rec = *cur // another writer moved this park on meanwhile
	}
	c, err := m.callsFor(repo)
	if err != nil {
		return err
	}
	if rec.Stage == store.ParkTagged {
		st, err := m.Ledger.IssueState(ctx, repo.ID, n)
		if err != nil {
			return err
		}
		if st == nil || !st.HasLabel(set.ParkedLabel) {
			if err := m.addLabel(ctx, c, repo, set, n, set.ParkedLabel); err != nil {
				return err
			}
		}
		rec.Stage = store.ParkLabeled
		if err := m.Acts.PutParkRecord(ctx, repo.ID, n, *rec); err != nil {
			return err
		}
	}
	if (rec.Stage == store.ParkLabeled || rec.Stage == store.ParkCommenting) && strings.TrimSpace(rec.Question) != "" {
		// The intent is recorded before the post: a writer that stops
		// between the post and its record leaves the next one a reason to
		// look for the comment on GitHub first.
		resumed := rec.Stage == store.ParkCommenting
		if !resumed {
			rec.Stage = store.ParkCommenting
			if err := m.Acts.PutParkRecord(ctx, repo.ID, n, *rec); err != nil {
				return err
			}
		}
		id, err := m.postParkComment(ctx, c, repo, n, rec, resumed)
		if err != nil {
			return err
		}
		rec.Stage, rec.CommentID = store.ParkCommented, id
		if err := m.Acts.PutParkRecord(ctx, repo.ID, n, *rec); err != nil {
			return err
		}
	}
	return nil
}

// parkStageOrder ranks a park's stages.
var parkStageOrder = map[string]int{store.ParkTagged: 1, store.ParkLabeled: 2, store.ParkCommenting: 3, store.ParkCommented: 4}

// postParkComment posts the park comment with the current epoch's attempts
// read from the trail.
func (m *Mirror) postParkComment(ctx context.Context, c parkCalls, repo store.Repo, n int, rec *store.ParkRecord, resumed bool) (int64, error) {
	id := gating.IDFor(n)
	rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
	if err != nil {
		return 0, err
	}
	tr := rs.Trails[id]
	attempts := rec.Attempts
	if tr.Attempts > attempts {
		attempts = tr.Attempts
	}
	// A comment posted by an earlier try whose record was lost is not
	// posted twice.
	for _, w := range tr.Warden {
		if w.Marker.Kind == gating.KindPark {
			return w.CommentID, nil
		}
	}
	if resumed {
		if found, err := m.findParkComment(ctx, c, n, rec.At); err != nil || found != 0 {
			return found, err
		}
	}
	body := gating.ParkComment(id, attempts, rec.RulingOwner, rec.RulingTopic, rec.Question, tr.EpochHistory())
	cid, err := c.createComment(ctx, n, body)
	if err != nil {
		return 0, fmt.Errorf("post the park comment on %s#%d: %w", repo.FullName, n, err)
	}
	return cid, nil
}

// findParkComment looks on GitHub for warden's park comment on issue n
// made since the park began (a post whose record was lost).
func (m *Mirror) findParkComment(ctx context.Context, c ownCommentCalls, n int, since time.Time) (int64, error) {
	bot := ""
	if m.Bot != nil {
		bot = m.Bot()
	}
	id, err := findOwnComment(ctx, c, n, bot, gating.ParkPrefix, since, 0)
	if err != nil {
		return 0, fmt.Errorf("find the park comment: %w", err)
	}
	return id, nil
}

// repairParkLabel handles state:parked without the parked label: the tag is
// the half that has effect, so the label is added, unless the issue's label
// events show a human with triage+ removed it (then it is an unpark warden
// had not applied yet). It never re-adds a label a human removed.
func (m *Mirror) repairParkLabel(ctx context.Context, repo store.Repo, set gating.Settings, n int) (string, error) {
	id := gating.IDFor(n)
	if set.DryRun {
		m.heldWrite(repo, "add label", "issue", n, "label", set.ParkedLabel, "why", "state:parked without its label")
		return fmt.Sprintf("%s: state:parked without %s (dry run)", id, set.ParkedLabel), nil
	}
	c, removed, err := m.confirm(ctx, repo, n, set.ParkedLabel, false)
	if err != nil {
		return "", err
	}
	if c.act.Known && c.act.Present {
		return fmt.Sprintf("%s: %s present", id, set.ParkedLabel), nil
	}
	if removed && c.who.Human {
		return m.unpark(ctx, repo, n, c.who.Login, c.act.At, "removed "+set.ParkedLabel)
	}
	if err := m.addLabel(ctx, c.calls, repo, set, n, set.ParkedLabel); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: state:parked without %s: label added", id, set.ParkedLabel), nil
}
