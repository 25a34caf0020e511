package mirror

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// readPulls lists the open pull requests (every page: unchanged pages are
// 304s) and records them; a PR recorded open that the list no longer shows
// is read once to learn how it closed.
func (p *pass) readPulls(ctx context.Context) error {
	seen := map[int]bool{}
	opt := &github.PullRequestListOptions{State: "open", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		if err := p.spend(); err != nil {
			return err
		}
		prs, resp, err := p.gh.PullRequests.List(ctx, p.owner, p.name, opt)
		if err != nil {
			return fmt.Errorf("list open pull requests: %w", err)
		}
		for _, pr := range prs {
			seen[pr.GetNumber()] = true
			if err := p.recordPull(ctx, pr); err != nil {
				return err
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	recorded, err := p.m.Ledger.OpenPulls(ctx, p.repo.ID)
	if err != nil {
		return err
	}
	for _, r := range recorded {
		if seen[r.Number] {
			continue
		}
		if err := p.spend(); err != nil {
			return err
		}
		pr, resp, err := p.gh.PullRequests.Get(ctx, p.owner, p.name, r.Number)
		if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone) {
			r.State, r.UpdatedAt = "closed", p.m.now()
			if _, err := p.m.Ledger.RecordPull(ctx, p.repo.ID, r); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read pull request #%d: %w", r.Number, err)
		}
		if err := p.recordPull(ctx, pr); err != nil {
			return err
		}
	}
	return nil
}

func (p *pass) recordPull(ctx context.Context, pr *github.PullRequest) error {
	_, err := p.m.Ledger.RecordPull(ctx, p.repo.ID, pullRecordOf(pr))
	return err
}

// readIssues is the census: it lists every issue, oldest first (state
// all, sorted by creation, so a page changes only when one of its issues
// does: an unchanged page is a free 304), and records each one's labels and
// state. Issues changed since the last pass are on the pages that come back
// 200. A census that ran from its first page to its last in this pass also
// says which items' issues are gone (not listed).
//
// The census converges warden with what it never saw: an issue that
// carries the item label and is not an item is adopted (adopt), and a pull
// request (GitHub's issue listing includes them) that is not recorded, or
// is recorded older than the listing shows, is read once and recorded. Both
// are budgeted like every read: a pass that runs out stops at the page it
// was on, and the next resumes there.
func (p *pass) readIssues(ctx context.Context, page int, _ int64) (int, error) {
	opt := &github.IssueListByRepoOptions{State: "all", Sort: "created", Direction: "asc", ListOptions: github.ListOptions{PerPage: 100, Page: page}}
	p.seen = map[int]bool{}
	items, err := p.m.Ledger.ItemNumbers(ctx, p.repo.ID)
	if err != nil {
		return opt.Page, err
	}
	pulls, err := p.m.Ledger.PullsUpdatedAt(ctx, p.repo.ID)
	if err != nil {
		return opt.Page, err
	}
	states, err := p.m.Ledger.IssuesUpdatedAt(ctx, p.repo.ID)
	if err != nil {
		return opt.Page, err
	}
	for {
		if err := p.spend(); err != nil {
			return opt.Page, err
		}
		read := p.m.now()
		issues, resp, err := p.gh.Issues.ListByRepo(ctx, p.owner, p.name, opt)
		if err != nil {
			return opt.Page, fmt.Errorf("list issues: %w", err)
		}
		for _, is := range issues {
			n := is.GetNumber()
			p.seen[n] = true
			if is.IsPullRequest() {
				if at, ok := pulls[n]; ok && !at.Before(is.GetUpdatedAt().UTC().Truncate(time.Second)) {
					continue
				}
				if err := p.readPull(ctx, n); err != nil {
					return opt.Page, err
				}
				continue
			}
			if at, ok := states[n]; ok && items[n] && is.GetUpdatedAt().UTC().Truncate(time.Second).After(at) {
				// The item's issue changed after everything warden recorded
				// of it: deliveries were missed (a restore, a downtime). Its
				// comments since then go into the trail, so no attempt made
				// meanwhile goes uncounted.
				if err := p.spend(); err != nil {
					return opt.Page, err
				}
				k, err := p.m.readComments(ctx, p.repo, n, at.Add(-sinceMargin))
				if err != nil {
					return opt.Page, err
				}
				p.res.TrailsRead++
				if k > 0 {
					p.res.Actions = append(p.res.Actions, fmt.Sprintf("%s: %d comments read that warden had missed", gating.IDFor(n), k))
					out, err := p.m.adoptTrailFence(ctx, p.repo, n)
					if err != nil {
						return opt.Page, err
					}
					if out != "" {
						p.res.Actions = append(p.res.Actions, string(gating.IDFor(n))+": "+out)
					}
				}
			}
			// The text's digest too: an admitted item's text that differs
			// from what was admitted is judged by derive (specsToJudge).
			st := store.IssueState{State: is.GetState(), UpdatedAt: is.GetUpdatedAt().UTC(), Labels: make([]string, 0, len(is.Labels)),
				SpecDigest: specDigest(is.GetTitle(), is.GetBody())}
			for _, l := range is.Labels {
				st.Labels = append(st.Labels, l.GetName())
			}
			changed, err := p.m.Ledger.RecordIssueStateRead(ctx, p.repo.ID, n, st, read)
			if err != nil {
				return opt.Page, err
			}
			if items[n] {
				if changed && !p.dry {
					if err := p.itemLabelSeen(ctx, n, st, is.GetUpdatedAt().UTC()); err != nil {
						return opt.Page, err
					}
				}
				continue
			}
			if !store.HasLabel(st.Labels, p.set.ItemLabel) {
				continue
			}
			if err := p.spend(); err != nil {
				return opt.Page, err
			}
			if p.dry {
				p.res.Actions = append(p.res.Actions, fmt.Sprintf("would adopt %s (it carries %s)", gating.IDFor(n), p.set.ItemLabel))
				continue
			}
			out, err := p.m.adopt(ctx, p.repo, p.set, is)
			if err != nil {
				return opt.Page, err
			}
			items[n] = true
			p.res.Adopted++
			p.res.Actions = append(p.res.Actions, out)
		}
		if resp.NextPage == 0 {
			p.census = page == 1
			return opt.Page, nil
		}
		opt.Page = resp.NextPage
	}
}

// itemLabelSeen records what the census read of an item's item label: an
// issue that lost it left the backlog (item-label-removed: the item is not
// offered, and stays in the ledger); one that carries it again is back.
func (p *pass) itemLabelSeen(ctx context.Context, n int, st store.IssueState, updated time.Time) error {
	if store.HasLabel(st.Labels, p.set.ItemLabel) {
		return p.m.Acts.CloseLabelFinding(ctx, p.repo.ID, n, CodeItemLabelRemoved)
	}
	detail := fmt.Sprintf("the census read #%d without the item label %s; the item stays in the ledger (forgetting an item is explicit: DELETE /items/%s, or add the label back)",
		n, p.set.ItemLabel, gating.IDFor(n))
	_, err := p.m.Acts.NoteLabelFinding(ctx, p.repo.ID, n, CodeItemLabelRemoved, "", detail, "census:"+updated.Format(time.RFC3339), updated)
	return err
}

// readPull reads one pull request the census listed and warden has not
// recorded as it is now, and records it.
func (p *pass) readPull(ctx context.Context, n int) error {
	if err := p.spend(); err != nil {
		return err
	}
	pr, resp, err := p.gh.PullRequests.Get(ctx, p.owner, p.name, n)
	if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone) {
		return nil // gone since the listing: nothing to record
	}
	if err != nil {
		return fmt.Errorf("read pull request #%d: %w", n, err)
	}
	p.res.PullsRead++
	return p.recordPull(ctx, pr)
}

// readUnknownIssues reads, once each, the items' issues the census did not
// list (when it listed every page in this pass), or that warden has no
// record of: gone (404, 410) or moved to another repository is issue-gone.
func (p *pass) readUnknownIssues(ctx context.Context) error {
	rs, err := p.m.Ledger.Snapshot(ctx, p.repo.ID)
	if err != nil {
		return err
	}
	known, err := p.m.Ledger.IssueFacts(ctx, p.repo.ID)
	if err != nil {
		return err
	}
	for _, c := range rs.Snapshot.Items {
		n := c.Item.ID.Number()
		f, ok := known[n]
		if ok && !f.Exists {
			continue // already known gone
		}
		if ok && (!p.census || p.seen[n]) {
			continue
		}
		if err := p.spend(); err != nil {
			return err
		}
		is, resp, err := p.gh.Issues.Get(ctx, p.owner, p.name, n)
		st := store.IssueState{UpdatedAt: p.m.now()}
		switch {
		case resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone):
			st.State = store.IssueDeleted
		case err != nil:
			return fmt.Errorf("read issue #%d: %w", n, err)
		case is.GetRepositoryURL() != "" && !strings.HasSuffix(strings.ToLower(is.GetRepositoryURL()), "/repos/"+strings.ToLower(p.repo.FullName)):
			// GitHub followed a transfer's redirect to the issue's new home.
			st.State = store.IssueTransferred
		default:
			st.State, st.UpdatedAt, st.SpecDigest = is.GetState(), is.GetUpdatedAt().UTC(), specDigest(is.GetTitle(), is.GetBody())
			for _, l := range is.Labels {
				st.Labels = append(st.Labels, l.GetName())
			}
		}
		if _, err := p.m.Ledger.RecordIssueState(ctx, p.repo.ID, n, st); err != nil {
			return err
		}
	}
	return nil
}

// readGreens reads, for each open PR that delivers an item with no live
// claim and no state:complete (a resume candidate), whether its head is
// green: mergeable, and every check run but backlog and every commit status
// passed. Conditional reads: an unchanged head costs 304s.
func (p *pass) readGreens(ctx context.Context) error {
	f, err := p.m.repoFacts(ctx, p.repo)
	if err != nil {
		return err
	}
	byNum := map[int]gating.PullRequest{}
	for _, pr := range f.OpenPRs {
		byNum[pr.Number] = pr
	}
	for _, n := range gating.ResumeCandidates(f) {
		pr := byNum[n]
		green, err := p.green(ctx, pr)
		if err != nil {
			return err
		}
		if err := p.m.Ledger.SetGreen(ctx, p.repo.ID, pr.Number, pr.HeadSHA, green); err != nil {
			return err
		}
	}
	return nil
}

func (p *pass) green(ctx context.Context, pr gating.PullRequest) (bool, error) {
	if err := p.spend(); err != nil {
		return false, err
	}
	full, _, err := p.gh.PullRequests.Get(ctx, p.owner, p.name, pr.Number)
	if err != nil {
		return false, fmt.Errorf("read pull request #%d: %w", pr.Number, err)
	}
	// The head moved since it was recorded, or it cannot be green whatever
	// its checks say: no need to read them.
	if full.GetHead().GetSHA() != pr.HeadSHA || !gating.Green(full.Mergeable, full.GetDraft(), nil, "", 0) {
		return false, nil
	}
	var runs []gating.CheckResult
	opt := &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		if err := p.spend(); err != nil {
			return false, err
		}
		page, resp, err := p.gh.Checks.ListCheckRunsForRef(ctx, p.owner, p.name, pr.HeadSHA, opt)
		if err != nil {
			return false, fmt.Errorf("check runs of %s: %w", shortSHA(pr.HeadSHA), err)
		}
		for _, r := range page.CheckRuns {
			runs = append(runs, gating.CheckResult{Name: r.GetName(), Status: r.GetStatus(), Conclusion: r.GetConclusion()})
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if !gating.Green(full.Mergeable, full.GetDraft(), runs, "", 0) {
		return false, nil // a failing check: the statuses cannot make it green
	}
	if err := p.spend(); err != nil {
		return false, err
	}
	cs, _, err := p.gh.Repositories.GetCombinedStatus(ctx, p.owner, p.name, pr.HeadSHA, &github.ListOptions{PerPage: 100})
	if err != nil {
		return false, fmt.Errorf("statuses of %s: %w", shortSHA(pr.HeadSHA), err)
	}
	return gating.Green(full.Mergeable, full.GetDraft(), runs, cs.GetState(), cs.GetTotalCount()), nil
}
