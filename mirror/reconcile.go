package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// sinceMargin is how far back a pass re-reads issues before the previous
// pass's start: GitHub's updated_at has one-second resolution and its
// listing is eventually consistent.
const sinceMargin = time.Minute

// DefaultPassBudget is the most GitHub requests one pass may make for one
// repository (304s included: they are requests, though not charged), and
// never more than a quarter of the installation's remaining rate limit, so
// webhooks keep their headroom.
const DefaultPassBudget = 500

// Pass phases, in order.
const (
	phasePulls  = "pulls"  // list the open pull requests
	phaseIssues = "issues" // the census: every issue (unchanged pages are 304s)
	phaseGone   = "gone"   // read the items' issues the census did not list
	phaseGreens = "greens" // read the checks of PRs that could be resumed
	phaseDerive = "derive" // divergences, parks, check runs, dashboard
)

var phases = []string{phasePulls, phaseIssues, phaseGone, phaseGreens, phaseDerive}

// ReconcileOptions shape one pass.
type ReconcileOptions struct {
	// DryRun reads GitHub and reports what it finds, and writes nothing to
	// GitHub (the repository's dry_run setting does the same).
	DryRun bool
	// Budget caps the pass's GitHub requests (0: DefaultPassBudget, and a
	// quarter of the installation's remaining rate limit).
	Budget int
}

// PassResult is what one pass did.
type PassResult struct {
	Repo     string
	Complete bool
	// Stopped says where a pass that ran out of budget stopped (the next
	// pass resumes there).
	Stopped  string
	Calls    app.CallCounts
	Findings []gating.Defect
	Actions  []string
	// Adopted is how many labelled issues this pass made items of;
	// Unadopted how many the census has found and not adopted yet (a
	// repository with a large backlog adopts across passes); PullsRead how
	// many pull requests it read that warden had not recorded as they are;
	// TrailsRead how many items' comments it read again because their
	// issue changed after what warden recorded (deliveries were missed).
	Adopted, Unadopted, PullsRead, TrailsRead int
}

// errBudget stops a pass that would exceed its budget.
var errBudget = errors.New("the pass's GitHub budget is spent")

// pass is one reconcile pass over one repository.
type pass struct {
	m       *Mirror
	repo    store.Repo
	set     gating.Settings
	gh      *github.Client
	owner   string
	name    string
	dry     bool
	budget  int
	counter *app.CallCounter
	res     *PassResult
	// seen are the issue numbers the census listed; census says it listed
	// every page in this pass (only then is an item missing from it gone).
	seen   map[int]bool
	census bool
}

// spend checks, before a request, that the pass may make it: the budget
// counts what GitHub charges to the rate limit (a 304 is free).
func (p *pass) spend() error {
	if charged(p.counter.Counts()) >= p.budget {
		return errBudget
	}
	return nil
}

// charged is the requests GitHub charges to the primary rate limit.
func charged(c app.CallCounts) int { return c.Reads - c.NotModified + c.Writes }

// budgeter is the access layer's view of an installation's rate limit
// (*app.App).
type budgeter interface {
	Budget(installation int64) app.Budget
}

// Reconcile runs one pass over a repository (CONTRACT.md §3, the reconcile
// loop): it reads GitHub (the open pull requests, every issue (a census in
// which unchanged pages cost free 304s), the items' issues the census did
// not list, the checks of pull requests that could be resumed), records
// what it read, derives the
// divergences and brings GitHub in step (report comments, parks, check
// runs, the dashboard), writing only what differs. Reads are conditional
// (the access layer's ETag cache: an unchanged page costs a 304, which
// GitHub does not charge). A pass that would exceed its budget stops, says
// where, and the next resumes there.
func (m *Mirror) Reconcile(ctx context.Context, repo store.Repo, o ReconcileOptions) (PassResult, error) {
	res := PassResult{Repo: repo.FullName, Findings: []gating.Defect{}}
	// One pass per repository at a time, across replicas (CONTRACT.md §10):
	// `warden reconcile` waits for a replica's pass, and the reverse.
	unlock, err := m.Ledger.Lock(ctx, fmt.Sprintf("reconcile/%d", repo.ID))
	if err != nil {
		return res, fmt.Errorf("reconcile %s: %w", repo.FullName, err)
	}
	defer unlock()
	counter := &app.CallCounter{}
	ctx = app.WithCallCounter(ctx, counter)
	gh, err := m.repoClient(repo)
	if err != nil {
		return res, err
	}
	set := m.settings(ctx, repo)
	p := &pass{m: m, repo: repo, set: set, gh: gh, dry: o.DryRun || set.DryRun, budget: o.Budget, counter: counter, res: &res}
	p.owner, p.name, _ = strings.Cut(repo.FullName, "/")
	if p.budget <= 0 {
		p.budget = DefaultPassBudget
		if b, ok := m.GitHub.(budgeter); ok {
			if bud := b.Budget(repo.Installation); bud.Known && bud.Remaining/4 < p.budget {
				p.budget = max(bud.Remaining/4, 0)
			}
		}
	}
	st, err := m.Ledger.ReconcileState(ctx, repo.ID)
	if err != nil {
		return res, err
	}
	started := m.now()
	since := st.Since
	startPhase, startPage := phasePulls, 1
	if st.ResumePhase != "" {
		startPhase, startPage, since = st.ResumePhase, st.ResumePage, st.ResumeSince
	}
	run := false
	var err2 error
	for _, ph := range phases {
		if ph == startPhase {
			run = true
		}
		if !run {
			continue
		}
		page := 1
		if ph == startPhase {
			page = startPage
		}
		stoppedAt, err := p.phase(ctx, ph, page, since)
		if ph == phaseIssues && (err == nil || errors.Is(err, errBudget)) {
			// What the census has found and not adopted yet: progress,
			// for the status page and warden reconcile.
			if res.Unadopted, err2 = m.Ledger.Unadopted(ctx, repo.ID, set.ItemLabel); err2 != nil {
				return res, err2
			}
		}
		if errors.Is(err, errBudget) {
			res.Stopped = fmt.Sprintf("budget of %d requests spent in phase %s (page %d); the next pass resumes there", p.budget, ph, stoppedAt)
			res.Calls = counter.Counts()
			next := store.ReconcileState{Since: st.Since, ResumePhase: ph, ResumePage: stoppedAt, ResumeSince: since, LastStarted: started.UnixMilli()}
			return res, m.Ledger.PutReconcileState(ctx, repo.ID, next, m.now().UnixMilli(), res.Stopped)
		}
		if err != nil {
			res.Calls = counter.Counts()
			return res, fmt.Errorf("reconcile %s (%s): %w", repo.FullName, ph, err)
		}
	}
	res.Complete, res.Calls = true, counter.Counts()
	// The next pass reads what changed since this one began (the resumed
	// part of a pass began with the pass it resumed).
	begin := started
	if st.ResumePhase != "" && st.LastStarted > 0 {
		begin = time.UnixMilli(st.LastStarted)
	}
	next := store.ReconcileState{Since: begin.Add(-sinceMargin).UnixMilli()}
	return res, m.Ledger.PutReconcileState(ctx, repo.ID, next, m.now().UnixMilli(), "complete")
}

// phase runs one phase from page; on errBudget it returns the page to
// resume at.
func (p *pass) phase(ctx context.Context, ph string, page int, since int64) (int, error) {
	switch ph {
	case phasePulls:
		return 1, p.readPulls(ctx)
	case phaseIssues:
		return p.readIssues(ctx, page, since)
	case phaseGone:
		return 1, p.readUnknownIssues(ctx)
	case phaseGreens:
		return 1, p.readGreens(ctx)
	case phaseDerive:
		return 1, p.derive(ctx)
	}
	return 1, fmt.Errorf("unknown phase %q", ph)
}

// derive computes the divergences from what the pass recorded and brings
// GitHub in step: report comments of the items whose findings changed,
// the specification of admitted items whose recorded text is not the
// admitted one, parks (the sweep's backstop), every open PR's check run,
// the dashboard.
// A dry run computes and reports, and writes nothing.
func (p *pass) derive(ctx context.Context) error {
	if p.dry {
		ds, err := p.m.divergences(ctx, p.repo)
		if err != nil {
			return err
		}
		p.res.Findings = append(p.res.Findings, ds...)
		rs, err := p.m.Ledger.Snapshot(ctx, p.repo.ID)
		if err != nil {
			return err
		}
		p.res.Findings = append(p.res.Findings, rs.Ready().Defects...)
		return nil
	}
	// Writes count against the budget too: derive stops between items
	// when it is spent, and the next pass derives again (it recomputes
	// everything from what was recorded, so nothing is lost).
	changed, err := p.m.refreshDivergences(ctx, p.repo)
	if err != nil {
		return err
	}
	// And the admitted items whose recorded text is not the admitted one
	// (the census read an edit warden had no delivery of): settling them
	// judges the text (specStep). Derived from what is recorded, so a pass
	// cut short, or a dry one, leaves them for the next.
	respec, err := p.m.Acts.SpecsToJudge(ctx, p.repo.ID, p.set.AdmissionLabel)
	if err != nil {
		return err
	}
	for _, n := range respec {
		if !slices.Contains(changed, n) {
			changed = append(changed, n)
		}
	}
	for _, n := range changed {
		if err := p.spend(); err != nil {
			return err
		}
		out, err := p.m.settleItem(ctx, p.repo, n)
		if err != nil {
			return err
		}
		if out != "" {
			p.res.Actions = append(p.res.Actions, fmt.Sprintf("%s: %s", gating.IDFor(n), out))
		}
	}
	if err := p.spend(); err != nil {
		return err
	}
	acted, err := p.m.sweepRepo(ctx, p.repo)
	if err != nil {
		return err
	}
	p.res.Actions = append(p.res.Actions, acted...)
	open, err := p.m.Ledger.OpenPulls(ctx, p.repo.ID)
	if err != nil {
		return err
	}
	// Every head is judged against one snapshot of the ledger.
	rs, err := p.m.Ledger.Snapshot(ctx, p.repo.ID)
	if err != nil {
		return err
	}
	heads := map[string]bool{}
	for _, pr := range open {
		if heads[pr.HeadSHA] {
			continue
		}
		heads[pr.HeadSHA] = true
		if err := p.spend(); err != nil {
			return err
		}
		out, err := p.m.checkHeadIn(ctx, p.repo, p.set, rs, pr.HeadSHA)
		if err != nil {
			return err
		}
		if out != "" {
			p.res.Actions = append(p.res.Actions, out)
		}
	}
	if err := p.spend(); err != nil {
		return err
	}
	ready := rs.Ready()
	p.res.Findings = append(p.res.Findings, ready.Defects...)
	if out, err := p.m.syncDashboard(ctx, p.repo, p.set, rs, ready); err != nil {
		return err
	} else if out != "" {
		p.res.Actions = append(p.res.Actions, out)
	}
	return nil
}

// ReconcileAll runs one pass over every served repository, one after the
// other; a repository's failure does not stop the others.
func (m *Mirror) ReconcileAll(ctx context.Context, o ReconcileOptions) ([]PassResult, error) {
	repos, err := m.Ledger.Repos(ctx)
	if err != nil {
		return nil, err
	}
	var out []PassResult
	var errs []error
	for _, r := range repos {
		res, err := m.Reconcile(ctx, r, o)
		out = append(out, res)
		if err != nil {
			errs = append(errs, err)
			m.Log.Warn("reconcile pass failed", "repo", r.FullName, "err", err)
			continue
		}
		m.Log.Info("reconcile pass", "repo", r.FullName, "complete", res.Complete, "stopped", res.Stopped,
			"reads", res.Calls.Reads, "not_modified", res.Calls.NotModified, "writes", res.Calls.Writes, "findings", len(res.Findings))
	}
	return out, errors.Join(errs...)
}
