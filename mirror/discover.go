package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/mirror/store"
)

// Discovery: the repositories warden serves are read from GitHub, not only
// learnt from installation deliveries (a new database, a delivery lost
// beyond the delivery log's reach). Discover lists the App's installations
// and each one's repositories and brings the served set in step, through
// the same serve and unserve an installation delivery goes through
// (installation.go): a repository it did not serve is served (its labels
// created where missing), one no longer listed is not served any more, and
// so are those of a suspended installation or of one that is gone.
//
// It fails closed. A failed read is not a removal: when the installations
// cannot be listed nothing changes, and an installation whose repositories
// cannot be listed keeps the ones it had. An installation that holds served
// repositories and is missing from the listing is taken for gone only when
// GitHub answers 404 for it.

// InstallationLister is what Discover reads GitHub through (*app.App): the
// App's installations, one installation by id (its error wraps
// app.ErrInstallationNotFound when GitHub answers 404), and the
// repositories an installation can reach. A listing is whole (every page)
// or an error, never a shorter list.
type InstallationLister interface {
	ListInstallations(ctx context.Context) ([]app.ListedInstallation, error)
	GetInstallation(ctx context.Context, id int64) (app.ListedInstallation, error)
	ListInstallationRepos(ctx context.Context, installation int64) ([]app.ListedRepository, error)
}

// DiscoveryResult is what one discovery run found and did.
type DiscoveryResult struct {
	// Installations is how many installations GitHub listed (suspended
	// ones included); Repositories how many repositories their listings
	// held.
	Installations, Repositories int
	// Served are the repositories served by this run (full names): new to
	// warden, or served again under another name or installation.
	Served []string
	// Unserved are the repositories no longer served.
	Unserved []string
	// Skipped are the installations left as they were because GitHub
	// could not be read for them.
	Skipped []int64
	// Calls are the GitHub requests the run made (304s included in Reads).
	Calls app.CallCounts
}

// String is the run in a line: what it served and stopped serving.
func (r DiscoveryResult) String() string {
	s := fmt.Sprintf("%s, %s listed", plural(r.Installations, "installation"), repositories(r.Repositories))
	if len(r.Served) > 0 {
		s += "; serving " + strings.Join(r.Served, ", ")
	}
	if len(r.Unserved) > 0 {
		s += "; stopped serving " + strings.Join(r.Unserved, ", ")
	}
	if len(r.Served) == 0 && len(r.Unserved) == 0 {
		s += "; nothing to change"
	}
	switch len(r.Skipped) {
	case 0:
	case 1:
		s += "; 1 installation not read, left as it was"
	default:
		s += fmt.Sprintf("; %d installations not read, left as they were", len(r.Skipped))
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// listedRepo is a repository a listing holds, with its installation.
type listedRepo struct {
	installation int64
	ref          repoRef
}

// Discover brings the repositories warden serves in step with the App's
// installations on GitHub, as read through gh (see the top of this file).
// It is idempotent: a second run over an unchanged GitHub changes nothing
// (and, through the access layer's ETag cache, costs 304s for the
// installations' listings). The error joins every failure; the result says
// what was done all the same.
func (m *Mirror) Discover(ctx context.Context, gh InstallationLister) (DiscoveryResult, error) {
	var res DiscoveryResult
	counter := &app.CallCounter{}
	ctx = app.WithCallCounter(ctx, counter)

	// The served set is read before GitHub: a repository a delivery serves
	// while GitHub is being read is then not taken for one removed.
	known, err := m.Ledger.Repos(ctx)
	if err != nil {
		return res, fmt.Errorf("discover: %w", err)
	}
	insts, err := gh.ListInstallations(ctx)
	if err != nil {
		res.Calls = counter.Counts()
		m.Log.Warn("discovery: the App's installations could not be listed; nothing changed", "err", err)
		return res, fmt.Errorf("discover: list the App's installations: %w", err)
	}
	res.Installations = len(insts)
	slices.SortFunc(insts, func(a, b app.ListedInstallation) int { return cmp.Compare(a.ID, b.ID) })

	var errs []error
	skip := func(inst int64, err error) {
		res.Skipped = append(res.Skipped, inst)
		errs = append(errs, err)
		m.Log.Warn("discovery: an installation could not be read; its served repositories are left as they were",
			"installation", inst, "err", err)
	}
	// settled: the installations whose repositories are known (listed
	// whole), or which serve none (suspended, gone).
	settled := map[int64]bool{}
	listed := map[int64]bool{}
	want := map[int64]listedRepo{}
	for _, in := range insts {
		listed[in.ID] = true
		if in.Suspended {
			settled[in.ID] = true
			continue
		}
		repos, err := gh.ListInstallationRepos(ctx, in.ID)
		if err != nil {
			skip(in.ID, fmt.Errorf("discover: installation %d: %w", in.ID, err))
			continue
		}
		settled[in.ID] = true
		res.Repositories += len(repos)
		for _, r := range repos {
			want[r.ID] = listedRepo{installation: in.ID, ref: repoRef{ID: r.ID, FullName: r.FullName}}
		}
	}
	// An installation that serves a repository no listing holds, and that
	// the App's listing lacks, is gone if GitHub says so (a listing that
	// shifted while it was read can miss one that is still there).
	for _, r := range known {
		if _, ok := want[r.ID]; ok || listed[r.Installation] || settled[r.Installation] || slices.Contains(res.Skipped, r.Installation) {
			continue
		}
		_, err := gh.GetInstallation(ctx, r.Installation)
		switch {
		case errors.Is(err, app.ErrInstallationNotFound):
			settled[r.Installation] = true
		case err != nil:
			skip(r.Installation, fmt.Errorf("discover: installation %d, not listed: %w", r.Installation, err))
		default:
			skip(r.Installation, fmt.Errorf("discover: installation %d is not in the App's listing but GitHub answers for it", r.Installation))
		}
	}

	// Stop serving what the settled installations no longer list.
	served := map[int64]store.Repo{}
	byInst := map[int64][]repoRef{}
	for _, r := range known {
		served[r.ID] = r
		if _, ok := want[r.ID]; ok || !settled[r.Installation] {
			continue
		}
		byInst[r.Installation] = append(byInst[r.Installation], repoRef{ID: r.ID, FullName: r.FullName})
	}
	for _, inst := range slices.Sorted(maps.Keys(byInst)) {
		for _, rr := range byInst[inst] {
			if _, err := m.unserve(ctx, inst, []repoRef{rr}); err != nil {
				errs = append(errs, fmt.Errorf("discover: stop serving %s: %w", rr.FullName, err))
				continue
			}
			res.Unserved = append(res.Unserved, rr.FullName)
		}
	}

	// Serve what is listed and not served as listed: new, renamed, or
	// moved to another installation.
	for _, id := range slices.Sorted(maps.Keys(want)) {
		w := want[id]
		if r, ok := served[id]; ok && r.Installation == w.installation && r.FullName == w.ref.FullName {
			continue
		}
		// A delivery may have served it since the served set was read.
		if r, err := m.Ledger.RepoByID(ctx, id); err == nil && r.Installation == w.installation && r.FullName == w.ref.FullName {
			continue
		}
		if _, err := m.serve(ctx, w.installation, []repoRef{w.ref}); err != nil {
			errs = append(errs, fmt.Errorf("discover: serve %s: %w", w.ref.FullName, err))
			continue
		}
		res.Served = append(res.Served, w.ref.FullName)
	}

	res.Calls = counter.Counts()
	attrs := []any{"installations", res.Installations, "repositories", res.Repositories,
		"served", res.Served, "unserved", res.Unserved, "skipped", res.Skipped,
		"github_reads", res.Calls.Reads, "github_not_modified", res.Calls.NotModified, "github_writes", res.Calls.Writes}
	switch {
	case len(errs) > 0:
		m.Log.Warn("discovery done, with errors: "+res.String(), append(attrs, "err", errors.Join(errs...))...)
	case len(res.Served) > 0 || len(res.Unserved) > 0:
		m.Log.Info("discovery done: "+res.String(), attrs...)
	default:
		m.Log.Debug("discovery done: "+res.String(), attrs...)
	}
	return res, errors.Join(errs...)
}
