package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// CheckRunName is the name of warden's check run (CONTRACT.md §8).
const CheckRunName = "backlog"

// checkCalls are the GitHub calls of the check run: the compares that
// judge an epic member's head, and the run's own reads and writes.
type checkCalls interface {
	// compare compares base...head (one commit's page: the status, the
	// counts and the merge base); a ref GitHub does not know (404) is
	// errNotFound.
	compare(ctx context.Context, base, head string) (*github.CommitsComparison, error)
	// checkRunsFor lists the check runs named name on sha (one page of
	// 100, every run, not only the latest); a commit GitHub does not know
	// (404, 422) has none.
	checkRunsFor(ctx context.Context, sha, name string) ([]*github.CheckRun, error)
	// createCheckRun creates a check run and returns its id; a commit
	// GitHub does not know (422) is errUnprocessable.
	createCheckRun(ctx context.Context, opts github.CreateCheckRunOptions) (int64, error)
	// updateCheckRun edits check run id; a run that is gone (404) is
	// errNotFound.
	updateCheckRun(ctx context.Context, id int64, opts github.UpdateCheckRunOptions) error
}

// checkHead brings the `backlog` check run on one head commit in step: it
// judges every open PR with that head against the items each links
// (gating.CheckRunVerdict), takes the worst conclusion over them, and
// creates the run once or edits it when the verdict changed. It reads the
// ledger; GitHub is called for a compare only when a delivered item is an
// epic's member, and for the write only when something changed.
func (m *Mirror) checkHead(ctx context.Context, repo store.Repo, sha string) (string, error) {
	set := m.settings(ctx, repo)
	if !set.CheckRun {
		return "", nil
	}
	rs, err := m.Ledger.Snapshot(ctx, repo.ID)
	if err != nil {
		return "", err
	}
	return m.checkHeadIn(ctx, repo, set, rs, sha)
}

// checkHeadIn is checkHead over a snapshot the caller already loaded (a
// pass judges every head against one snapshot).
func (m *Mirror) checkHeadIn(ctx context.Context, repo store.Repo, set gating.Settings, rs *store.Snapshot, sha string) (string, error) {
	if !set.CheckRun {
		return "", nil
	}
	// One evaluation per head at a time, across replicas on PostgreSQL, so
	// a head never gets two check runs created (CONTRACT.md §10).
	unlock, err := m.Ledger.Lock(ctx, fmt.Sprintf("head/%d/%s", repo.ID, sha))
	if err != nil {
		return "", fmt.Errorf("check run of %s: %w", shortSHA(sha), err)
	}
	defer unlock()
	prs, err := m.Ledger.PullsWithHead(ctx, repo.ID, sha)
	if err != nil || len(prs) == 0 {
		return "", err
	}
	verdict, err := m.judgeHead(ctx, repo, set, rs, prs)
	if err != nil {
		return "", err
	}
	return m.writeCheckRun(ctx, repo, set, sha, verdict)
}

// judgeHead judges one head: the first PR with every other open PR of the
// same head (gating.CheckRunVerdict takes the worst over all of them).
func (m *Mirror) judgeHead(ctx context.Context, repo store.Repo, set gating.Settings, rs *store.Snapshot, prs []store.PullRecord) (gating.CheckVerdict, error) {
	var all []gating.CheckPR
	for _, p := range prs {
		links := gating.PRLinks(p.PullRequest, repo.FullName, rs.Snapshot)
		fromDefault, err := m.headsFromDefault(ctx, repo, rs, p.PullRequest, links)
		if err != nil {
			return gating.CheckVerdict{}, err
		}
		all = append(all, gating.CheckPR{PR: p.PullRequest, Links: links, HeadFromDefault: fromDefault})
	}
	return gating.CheckRunVerdict(gating.CheckInput{PR: all[0].PR, Links: all[0].Links, HeadFromDefault: all[0].HeadFromDefault,
		OtherPRs: all[1:], Snapshot: rs.Snapshot, RepoFullName: repo.FullName, RequireItem: set.RequireItem}), nil
}

// headsFromDefault answers, for each delivered item that is an epic's
// member, whether the PR's head was cut from the default branch rather than
// from the epic's branch (pr-not-from-base): the merge base of the head and
// the epic branch is an ancestor of the default branch, though the epic
// branch has commits of its own. Two compares per epic branch; none for
// items outside epics.
func (m *Mirror) headsFromDefault(ctx context.Context, repo store.Repo, rs *store.Snapshot, pr gating.PullRequest, links []gating.PRLink) (map[gating.ItemID]bool, error) {
	out := map[gating.ItemID]bool{}
	byBranch := map[string]bool{}
	for _, l := range links {
		it := rs.Items[l.Item]
		if it == nil {
			continue
		}
		s := it.Snapshot()
		base, _ := s.Tag("baseBranch")
		if len(s.Targets(gating.PartOf)) == 0 || base == "" || base == repo.DefaultBranch || base == pr.HeadRef {
			continue
		}
		v, ok := byBranch[base]
		if !ok {
			var err error
			if v, err = m.cutFromDefault(ctx, repo, base, pr.HeadSHA); err != nil {
				return nil, err
			}
			byBranch[base] = v
		}
		out[l.Item] = v
	}
	return out, nil
}

func (m *Mirror) cutFromDefault(ctx context.Context, repo store.Repo, epicBranch, head string) (bool, error) {
	calls, err := m.callsFor(repo)
	if err != nil {
		return false, err
	}
	c, err := calls.compare(ctx, epicBranch, head)
	if errors.Is(err, errNotFound) {
		return false, nil // the epic branch is gone: nothing to judge against
	}
	if err != nil {
		return false, fmt.Errorf("compare %s...%s on %s: %w", epicBranch, shortSHA(head), repo.FullName, err)
	}
	mb := c.GetMergeBaseCommit().GetSHA()
	if mb == "" {
		return false, nil
	}
	d, err := calls.compare(ctx, repo.DefaultBranch, mb)
	if err != nil {
		return false, fmt.Errorf("compare %s...%s on %s: %w", repo.DefaultBranch, shortSHA(mb), repo.FullName, err)
	}
	// The merge base is on the default branch (identical or behind): the
	// head shares nothing of the epic branch's own history.
	switch d.GetStatus() {
	case "identical", "behind":
		e, err := calls.compare(ctx, repo.DefaultBranch, epicBranch)
		if err != nil {
			return false, fmt.Errorf("compare %s...%s on %s: %w", repo.DefaultBranch, epicBranch, repo.FullName, err)
		}
		return e.GetAheadBy() > 0, nil
	}
	return false, nil
}

// writeCheckRun creates the head's `backlog` check run once, then edits it
// only when the verdict's conclusion, title or summary changed. Nothing is
// written in dry_run.
func (m *Mirror) writeCheckRun(ctx context.Context, repo store.Repo, set gating.Settings, sha string, v gating.CheckVerdict) (string, error) {
	return m.writeRun(ctx, repo, set.DryRun, checkRunWrite{name: CheckRunName, key: sha, sha: sha,
		conclusion: v.Conclusion, title: v.Title, summary: v.Summary})
}

// checkRunCreating is the written hash of a check run record whose create
// was begun but not recorded (no real hash has this form).
const checkRunCreating = "creating"

// checkRunHash is what a check run's record keeps of what was written: a
// digest of its conclusion, title and summary.
func checkRunHash(conclusion, title, summary string) string {
	sum := sha256.Sum256([]byte(conclusion + "\x00" + title + "\x00" + summary))
	return hex.EncodeToString(sum[:16])
}

// newHeadKey marks a context handling a delivery that brought a new head
// commit: its check run is created without looking on GitHub first (no run
// can be there yet); any other head with no record is looked for first.
type newHeadKey struct{}

// withNewHead returns ctx for a delivery that brought head sha.
func withNewHead(ctx context.Context, sha string) context.Context {
	return context.WithValue(ctx, newHeadKey{}, sha)
}

// newHead is the new head ctx's delivery brought ("" for none).
func newHead(ctx context.Context) string { v, _ := ctx.Value(newHeadKey{}).(string); return v }

// findCheckRun returns the id of warden's check run named name on sha, if
// GitHub has one (0 if not), and the hash of what it says: one read,
// filtered by name, matched to warden's App by its slug. Without warden's
// identity it refuses rather than risk a second run.
func (m *Mirror) findCheckRun(ctx context.Context, c checkCalls, sha, name string) (int64, string, error) {
	bot := ""
	if m.Bot != nil {
		bot = m.Bot()
	}
	slug, ok := strings.CutSuffix(bot, "[bot]")
	if !ok || slug == "" {
		return 0, "", fmt.Errorf("find the check run on %s: warden's own App is not known yet", shortSHA(sha))
	}
	runs, err := c.checkRunsFor(ctx, sha, name)
	if err != nil {
		return 0, "", fmt.Errorf("find the check run on %s: %w", shortSHA(sha), err)
	}
	for _, r := range runs {
		if r.GetApp().GetSlug() == slug && r.GetName() == name {
			return r.GetID(), checkRunHash(r.GetConclusion(), r.GetOutput().GetTitle(), r.GetOutput().GetSummary()), nil
		}
	}
	return 0, "", nil
}
