package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v66/github"
)

// The App's installations and their repositories, read from GitHub rather
// than learnt from deliveries: GET /app/installations (the App's JWT),
// GET /app/installations/{id} and GET /installation/repositories (each
// installation's token). Every listing is read whole, page by page, through
// the access layer, so each request is counted and rate-limited like any
// other. The installation's listing is conditional (the ETag cache: an
// unchanged page costs a 304, which GitHub does not charge). The App's are
// not: GitHub's ETags depend on the Authorization header, and the App's JWT
// is signed anew for every request, so GitHub never answers one of them 304.

// ListedInstallation is one installation of the App, as GET
// /app/installations lists it.
type ListedInstallation struct {
	// ID is the installation's id.
	ID int64
	// Account is the login of the account the App is installed on.
	Account string
	// Suspended is true when the installation is suspended (suspended_at
	// is set): GitHub refuses its tokens until it is unsuspended.
	Suspended bool
}

// ListedRepository is one repository an installation can reach, as GET
// /installation/repositories lists it.
type ListedRepository struct {
	// ID is the repository's id.
	ID int64
	// FullName is owner/name.
	FullName string
	// DefaultBranch is the repository's default branch.
	DefaultBranch string
}

// ErrInstallationNotFound is what [App.GetInstallation] returns (wrapped)
// when GitHub answers 404: the App is not, or no longer, installed there.
var ErrInstallationNotFound = errors.New("app: installation not found")

const (
	// listPerPage is the page size of the listings: GitHub's maximum.
	listPerPage = 100
	// maxListPages bounds one listing (1,000 pages of 100), so that a
	// server whose Link header never ends cannot keep a caller reading.
	maxListPages = 1000
)

// ListInstallations lists the App's installations, suspended ones included
// (GET /app/installations with the App's JWT, every page). An installation
// a shifting listing shows twice is listed once. It fails as a whole: a page
// that cannot be read is an error, never a shorter list.
func (a *App) ListInstallations(ctx context.Context) ([]ListedInstallation, error) {
	out := []ListedInstallation{}
	seen := map[int64]bool{}
	opt := &github.ListOptions{PerPage: listPerPage}
	for pages := 1; ; pages++ {
		if pages > maxListPages {
			return nil, fmt.Errorf("app: GET /app/installations: more than %d pages", maxListPages)
		}
		ins, resp, err := a.appClient.Apps.ListInstallations(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("app: GET /app/installations (page %d): %w", max(opt.Page, 1), err)
		}
		for _, in := range ins {
			id := in.GetID()
			if id <= 0 {
				return nil, fmt.Errorf("app: GET /app/installations (page %d) lists an installation without an id", max(opt.Page, 1))
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, listedInstallation(in))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// GetInstallation reads one installation of the App (GET
// /app/installations/{id} with the App's JWT). When GitHub answers 404 the
// error wraps [ErrInstallationNotFound].
func (a *App) GetInstallation(ctx context.Context, id int64) (ListedInstallation, error) {
	if id <= 0 {
		return ListedInstallation{}, fmt.Errorf("app: installation id must be positive, got %d", id)
	}
	in, resp, err := a.appClient.Apps.GetInstallation(ctx, id)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return ListedInstallation{}, fmt.Errorf("app: GET /app/installations/%d: %w: %w", id, ErrInstallationNotFound, err)
		}
		return ListedInstallation{}, fmt.Errorf("app: GET /app/installations/%d: %w", id, err)
	}
	if in.GetID() != id {
		return ListedInstallation{}, fmt.Errorf("app: GET /app/installations/%d answered installation %d", id, in.GetID())
	}
	return listedInstallation(in), nil
}

func listedInstallation(in *github.Installation) ListedInstallation {
	return ListedInstallation{ID: in.GetID(), Account: in.GetAccount().GetLogin(), Suspended: in.SuspendedAt != nil}
}

// ListInstallationRepos lists the repositories installation can reach (GET
// /installation/repositories with the installation's token, every page;
// unchanged pages are 304s). It fails as a whole: a page that cannot be
// read, a repository without an id or an owner/name, or a listing that
// changed while it was read (pages disagreeing on total_count, or fewer or
// more repositories than it) is an error, never a shorter list, since a
// caller takes a repository missing from the list for one removed.
func (a *App) ListInstallationRepos(ctx context.Context, installation int64) ([]ListedRepository, error) {
	gh, err := a.Installation(installation)
	if err != nil {
		return nil, err
	}
	out := []ListedRepository{}
	seen := map[int64]bool{}
	total := -1
	opt := &github.ListOptions{PerPage: listPerPage}
	for pages := 1; ; pages++ {
		page := max(opt.Page, 1)
		if pages > maxListPages {
			return nil, fmt.Errorf("app: installation %d: GET /installation/repositories: more than %d pages", installation, maxListPages)
		}
		lr, resp, err := gh.Apps.ListRepos(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("app: installation %d: GET /installation/repositories (page %d): %w", installation, page, err)
		}
		if lr == nil || lr.TotalCount == nil {
			return nil, fmt.Errorf("app: installation %d: GET /installation/repositories (page %d): no total_count", installation, page)
		}
		if total >= 0 && *lr.TotalCount != total {
			return nil, fmt.Errorf("app: installation %d: GET /installation/repositories changed while it was read (total_count %d, then %d on page %d)",
				installation, total, *lr.TotalCount, page)
		}
		total = *lr.TotalCount
		for _, r := range lr.Repositories {
			full := r.GetFullName()
			if owner, name, ok := strings.Cut(full, "/"); r.GetID() <= 0 || !ok || owner == "" || name == "" {
				return nil, fmt.Errorf("app: installation %d: GET /installation/repositories (page %d) lists a repository without an id or owner/name: id %d, %q",
					installation, page, r.GetID(), full)
			}
			if seen[r.GetID()] {
				continue
			}
			seen[r.GetID()] = true
			out = append(out, ListedRepository{ID: r.GetID(), FullName: full, DefaultBranch: r.GetDefaultBranch()})
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(out) != total {
		return nil, fmt.Errorf("app: installation %d: GET /installation/repositories listed %d repositories of a total_count of %d: it changed while it was read",
			installation, len(out), total)
	}
	return out, nil
}
