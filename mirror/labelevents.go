package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

// labelAct is what an issue's label events say about one label now: whether
// the issue carries it, and the last labeled or unlabeled event for it (who,
// when, its id). Known is false when no event names the label.
type labelAct struct {
	Present   bool
	Known     bool
	Action    string // labeled, unlabeled
	Actor     string
	ActorType string
	At        time.Time
	EventID   int64
}

// eventKey identifies the act for counting repeats once.
func (a labelAct) eventKey() string { return fmt.Sprintf("event:%d", a.EventID) }

// maxEventPages bounds how far back the confirming read walks for a label's
// last event (100 events a page): an issue whose label was last touched
// more than that many events ago reads as unknown (fail closed: no act).
const maxEventPages = 5

// labelEventCalls is the GitHub read the gate confirms a label act with.
type labelEventCalls interface {
	// issueEvents is one page of issue n's events, oldest first (100 a
	// page; page 0 is the first), and the number of the last page.
	issueEvents(ctx context.Context, n, page int) (evs []*github.IssueEvent, lastPage int, err error)
}

// lastLabelAct confirms a label delivery against GitHub: the issue's
// label events, read newest page first (GitHub lists them oldest first, so
// one request when they fit a page, else the last page and back). It never
// trusts the delivery's order: the last event for the label decides.
func (m *Mirror) lastLabelAct(ctx context.Context, c labelEventCalls, repo store.Repo, number int, label string) (labelAct, error) {
	evs, lastPage, err := c.issueEvents(ctx, number, 0)
	if err != nil {
		return labelAct{}, fmt.Errorf("read the label events of %s#%d: %w", repo.FullName, number, err)
	}
	page := 1
	if lastPage > 1 {
		page = lastPage
		if evs, _, err = c.issueEvents(ctx, number, page); err != nil {
			return labelAct{}, fmt.Errorf("read the label events of %s#%d (page %d): %w", repo.FullName, number, page, err)
		}
	}
	for walked := 1; ; walked++ {
		if a, ok := lastActIn(evs, label); ok {
			// What the read showed is the issue's state as of that event.
			// The event's time is GitHub's, to the second: a delivery older
			// than that second cannot undo the note, one of the same
			// second may (it is not known to be older); settleItem then
			// reads again before it publishes anything from it.
			if err := m.Ledger.NoteLabel(ctx, repo.ID, number, label, a.Present, a.At); err != nil {
				return labelAct{}, err
			}
			return a, nil
		}
		if page <= 1 || walked >= maxEventPages {
			return labelAct{}, nil
		}
		page--
		if evs, _, err = c.issueEvents(ctx, number, page); err != nil {
			return labelAct{}, fmt.Errorf("read the label events of %s#%d (page %d): %w", repo.FullName, number, page, err)
		}
	}
}

// lastActIn finds the last labeled/unlabeled event for label in one page
// (oldest first; ties by id).
func lastActIn(evs []*github.IssueEvent, label string) (labelAct, bool) {
	var best *github.IssueEvent
	for _, e := range evs {
		if e.GetEvent() != "labeled" && e.GetEvent() != "unlabeled" {
			continue
		}
		if e.Label == nil || !strings.EqualFold(e.Label.GetName(), label) {
			continue
		}
		if best == nil || e.GetCreatedAt().After(best.GetCreatedAt().Time) ||
			e.GetCreatedAt().Equal(best.GetCreatedAt()) && e.GetID() > best.GetID() {
			best = e
		}
	}
	if best == nil {
		return labelAct{}, false
	}
	return labelAct{Present: best.GetEvent() == "labeled", Known: true, Action: best.GetEvent(),
		Actor: best.GetActor().GetLogin(), ActorType: best.GetActor().GetType(), At: best.GetCreatedAt().UTC(), EventID: best.GetID()}, true
}
