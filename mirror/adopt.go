package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// An issue that carries the item label and is not an item yet (a
// repository with a backlog when the App was installed, a new database, a
// delivery missed) is adopted by the reconcile's census, as if the label
// had just been added: the item is made with the default tags, the issue's
// whole comment history is read once into the trail (so its claim, outcome
// and takeover markers count toward attempts exactly as if warden had
// recorded them live, and the item's fence continues above the highest
// token they name), admission is decided from the label events, and a
// parked label is judged by who added it.

// newItemTags are the tags a new item gets: the item label's tag and the
// defaults of the mandatory tags.
func (m *Mirror) newItemTags(repo store.Repo, set gating.Settings) []string {
	return []string{"backlog", "priority:" + set.DefaultPriority, "phase:" + set.DefaultPhase,
		"homeRegion:" + m.Region, "baseBranch:" + repo.DefaultBranch}
}

// adopt makes an item of issue is (it carries the item label and is not an
// item) and settles its trail, admission and park. The history is read
// first and the item made after it, so a read that fails (a GitHub error,
// the budget) leaves no item and the next census adopts it whole; each
// later step is idempotent, and a failure among them fails closed (no
// admission on record: the item awaits one, and the settle repairs it).
func (m *Mirror) adopt(ctx context.Context, repo store.Repo, set gating.Settings, is *github.Issue) (string, error) {
	n := is.GetNumber()
	id := gating.IDFor(n)
	var outs []string
	if out, err := m.backfill(ctx, repo, set, n); err != nil {
		return "", err
	} else if out != "" {
		outs = append(outs, out)
	}
	in := store.NewItem{Number: n, Title: is.GetTitle(), Author: is.GetUser().GetLogin(),
		Body:       ResumeBody(n, is.GetHTMLURL(), nil),
		Provenance: "github: adopted by the reconcile (the issue carried " + set.ItemLabel + ")",
		Tags:       m.newItemTags(repo, set)}
	if _, err := m.Ledger.Create(ctx, repo.ID, in, store.Actor{Role: gating.RoleWarden, Name: "warden"}, store.WriteOptions{}); err != nil && !errors.Is(err, store.ErrExists) {
		return "", fmt.Errorf("adopt %s: %w", id, err)
	}
	outs = append([]string{"adopted " + string(id)}, outs...)
	if out, err := m.adoptTrailFence(ctx, repo, n); err != nil {
		return "", err
	} else if out != "" {
		outs = append(outs, out)
	}
	it, err := m.Ledger.Get(ctx, repo.ID, id)
	if err != nil {
		return "", err
	}
	labels := make([]string, 0, len(is.Labels))
	for _, l := range is.Labels {
		labels = append(labels, l.GetName())
	}
	spec := gating.SpecState{Digest: specDigest(is.GetTitle(), is.GetBody()), At: is.GetUpdatedAt().UTC()}
	out, err := m.adoptAdmission(ctx, repo, set, &it, labels, is.GetUser(), spec)
	if err != nil {
		return "", err
	}
	outs = append(outs, out)
	if store.HasLabel(labels, set.ParkedLabel) {
		out, err := m.parkedLabelAdded(ctx, repo, set, n, &it)
		if err != nil {
			return "", err
		}
		outs = append(outs, out)
	}
	return strings.Join(outs, "; "), nil
}

// adoptAdmission decides an adopted item's admission from the issue's label
// events (CONTRACT.md §5): a human with triage+ who removed the admission
// label admitted it; anyone else's removal is reverted and reported; a label
// never on the issue admits it when the issue's author is a human with
// triage+, and otherwise the item is gated (the label is added). Anything
// unclear gates: an item awaiting admission costs a glance. spec is the
// issue's text as the census listed it: what an admission found admits.
func (m *Mirror) adoptAdmission(ctx context.Context, repo store.Repo, set gating.Settings, it *store.Item, labels []string, author *github.User, spec gating.SpecState) (string, error) {
	n := it.ID.Number()
	if adm, err := m.Acts.Admission(ctx, repo.ID, n); err != nil {
		return "", err
	} else if adm != nil {
		return "admission on record", nil
	}
	if store.HasLabel(labels, set.AdmissionLabel) {
		return "gated: " + set.AdmissionLabel + " is on the issue", nil
	}
	c, ok, err := m.confirm(ctx, repo, n, set.AdmissionLabel, false)
	if err != nil {
		return "", err
	}
	if ok {
		return m.admissionRemovedBy(ctx, c, repo, set, n, it, spec)
	}
	if !c.act.Known {
		// Never on the issue: the issue's author decides, as the item
		// label's adder does live.
		who := m.judge(ctx, repo, author.GetLogin(), author.GetType())
		if who.Human {
			if err := m.admit(ctx, repo, n, who.Login, m.now(), "adopted: opened by a human with triage+, never gated", spec); err != nil {
				return "", err
			}
			return fmt.Sprintf("admitted: opened by %s, the admission label never on it", who.Login), nil
		}
		if err := m.addLabel(ctx, c.calls, repo, set, n, set.AdmissionLabel); err != nil {
			return "", fmt.Errorf("gate %s: %w", it.ID, err)
		}
		return fmt.Sprintf("gated: opened by %s (%s), %s added", author.GetLogin(), who.Why, set.AdmissionLabel), nil
	}
	// The label is on the issue after all (the listing was behind), or its
	// last act was warden's own (a /backlog admit whose record this
	// database lacks): no human act is on record, so the item is gated
	// again and a human admits it once more.
	if c.act.Present {
		return "gated: " + set.AdmissionLabel + " is on the issue", nil
	}
	if err := m.addLabel(ctx, c.calls, repo, set, n, set.AdmissionLabel); err != nil {
		return "", fmt.Errorf("gate %s: %w", it.ID, err)
	}
	return fmt.Sprintf("gated: no human admission on record, %s added", set.AdmissionLabel), nil
}

// adoptTrailFence raises item n's fence to the highest token its trail's
// trusted markers name, when the ledger's grant log does not reach it (a
// new database, a restore, missed deliveries): the ledger continues above
// it, so no token a worker held is issued again.
func (m *Mirror) adoptTrailFence(ctx context.Context, repo store.Repo, n int) (string, error) {
	id := gating.IDFor(n)
	recs, err := m.Ledger.TrailComments(ctx, repo.ID, id)
	if err != nil {
		return "", err
	}
	cs := make([]gating.TrailComment, len(recs))
	for i, r := range recs {
		cs[i] = r.TrailComment()
	}
	f, _ := gating.TrailFence(id, cs)
	if f == 0 {
		return "", nil
	}
	raised, err := m.Ledger.AdoptFence(ctx, repo.ID, n, f)
	if err != nil || !raised {
		return "", err
	}
	return fmt.Sprintf("fence raised to %d (the trail's highest)", f), nil
}
