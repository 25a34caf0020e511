package ghsim

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"
)

// TestInstallationReposPagedAndConditional: GET /installation/repositories
// lists the token's installation's repositories (no other's), by id, paged
// with Link headers and total_count; an unchanged page answers its ETag
// with a free 304, a changed one with a 200.
func TestInstallationReposPagedAndConditional(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.sim.AddRepo(f.inst, "acme/b", "trunk")
	c := f.sim.AddRepo(f.inst, "acme/c", "main")
	other := f.sim.Install("globex", "bob")
	f.sim.AddRepo(other, "globex/hidden", "main")
	gh, err := f.app.Installation(f.inst.ID)
	if err != nil {
		t.Fatal(err)
	}

	lr, resp, err := gh.Apps.ListRepos(ctx, &github.ListOptions{PerPage: 2})
	if err != nil {
		t.Fatal(err)
	}
	if lr.GetTotalCount() != 3 || len(lr.Repositories) != 2 || resp.NextPage != 2 || resp.LastPage != 2 {
		t.Fatalf("page 1: total %d, %d repositories, next %d, last %d; want 3, 2, 2, 2", lr.GetTotalCount(), len(lr.Repositories), resp.NextPage, resp.LastPage)
	}
	if got := []string{lr.Repositories[0].GetFullName(), lr.Repositories[1].GetFullName()}; got[0] != "acme/app" || got[1] != "acme/b" {
		t.Errorf("page 1 lists %v, want acme/app, acme/b (by id)", got)
	}
	if lr.Repositories[1].GetDefaultBranch() != "trunk" || lr.Repositories[1].GetID() != b.ID {
		t.Errorf("acme/b listed as %d on %q, want %d on trunk", lr.Repositories[1].GetID(), lr.Repositories[1].GetDefaultBranch(), b.ID)
	}
	lr, resp, err = gh.Apps.ListRepos(ctx, &github.ListOptions{PerPage: 2, Page: 2})
	if err != nil {
		t.Fatal(err)
	}
	if lr.GetTotalCount() != 3 || len(lr.Repositories) != 1 || lr.Repositories[0].GetID() != c.ID || resp.NextPage != 0 || resp.PrevPage != 1 {
		t.Fatalf("page 2: total %d, %d repositories, next %d, prev %d; want 3, acme/c alone, 0, 1", lr.GetTotalCount(), len(lr.Repositories), resp.NextPage, resp.PrevPage)
	}

	// Raw requests, to see the 304 (the App's ETag cache would hide it).
	get := func(etag string) *http.Response {
		t.Helper()
		req, _ := gh.NewRequest(http.MethodGet, "installation/repositories?per_page=100", nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := gh.Do(ctx, req, nil)
		if resp == nil {
			t.Fatalf("GET /installation/repositories: %v", err)
		}
		return resp.Response
	}
	first := get("")
	etag := first.Header.Get("ETag")
	if first.StatusCode != 200 || etag == "" {
		t.Fatalf("GET /installation/repositories: %d, ETag %q", first.StatusCode, etag)
	}
	before, calls := f.sim.Remaining(f.inst.ID), f.sim.Calls(f.inst.ID)
	if r := get(etag); r.StatusCode != http.StatusNotModified {
		t.Fatalf("unchanged listing with its ETag: %d, want 304", r.StatusCode)
	}
	if after := f.sim.Remaining(f.inst.ID); after != before {
		t.Errorf("the 304 was charged: %d -> %d", before, after)
	}
	if got := f.sim.Calls(f.inst.ID); got.NotModified != calls.NotModified+1 || got.Reads != calls.Reads {
		t.Errorf("calls %+v -> %+v, want one more 304 and no read", calls, got)
	}

	// A repository taken out of the installation: gone from the listing
	// (its old ETag answered 200), out of the token's reach, announced.
	f.sim.RemoveFromInstallation(f.inst, b)
	r := get(etag)
	if r.StatusCode != 200 {
		t.Fatalf("changed listing with the old ETag: %d, want 200", r.StatusCode)
	}
	lr, _, err = gh.Apps.ListRepos(ctx, &github.ListOptions{PerPage: 100})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range lr.Repositories {
		names = append(names, r.GetFullName())
	}
	if lr.GetTotalCount() != 2 || strings.Join(names, " ") != "acme/app acme/c" {
		t.Errorf("after the removal: total %d, %v; want 2, acme/app and acme/c", lr.GetTotalCount(), names)
	}
	if _, resp, err := gh.Repositories.Get(ctx, "acme", "b"); err == nil || resp.StatusCode != 404 {
		t.Errorf("the removed repository through the installation's token: %v, want 404", err)
	}
	f.flush(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	removed := false
	for _, d := range f.got {
		if d.event == "installation_repositories" && strings.Contains(string(d.body), `"action":"removed"`) &&
			strings.Contains(string(d.body), `"repositories_removed":[{`) && strings.Contains(string(d.body), `"full_name":"acme/b"`) {
			removed = true
		}
	}
	if !removed {
		t.Error("no installation_repositories.removed delivery names acme/b")
	}
}

// TestAppInstallationsPagedAndConditional: GET /app/installations is paged
// with Link headers and answers a matching ETag with a 304, free; a
// suspended installation is listed with its suspended_at.
func TestAppInstallationsPagedAndConditional(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	frozen := f.sim.Install("frozen", "carol")
	f.sim.Locked(func() { frozen.Suspended = true })
	gh := f.app.AppClient()
	ins, resp, err := gh.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].GetID() != f.inst.ID || ins[0].SuspendedAt != nil || resp.NextPage != 2 || resp.LastPage != 2 {
		t.Fatalf("page 1: %d installations, next %d, last %d; want acme's alone, unsuspended, 2, 2", len(ins), resp.NextPage, resp.LastPage)
	}
	ins, resp, err = gh.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 1, Page: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || ins[0].GetID() != frozen.ID || ins[0].SuspendedAt == nil || resp.NextPage != 0 {
		t.Fatalf("page 2: %d installations (suspended_at %v), next %d; want frozen's alone, suspended, last", len(ins), ins[0].SuspendedAt, resp.NextPage)
	}
	req, _ := gh.NewRequest(http.MethodGet, "app/installations", nil)
	first, err := gh.Do(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	etag := first.Header.Get("ETag")
	before, calls := f.sim.Remaining(0), f.sim.Calls(0)
	req, _ = gh.NewRequest(http.MethodGet, "app/installations", nil)
	req.Header.Set("If-None-Match", etag)
	again, _ := gh.Do(ctx, req, nil)
	if etag == "" || again == nil || again.StatusCode != http.StatusNotModified {
		t.Fatalf("unchanged listing with its ETag %q: %v, want 304", etag, again)
	}
	if after := f.sim.Remaining(0); after != before {
		t.Errorf("the 304 was charged: %d -> %d", before, after)
	}
	if got := f.sim.Calls(0); got.NotModified != calls.NotModified+1 {
		t.Errorf("App calls %+v -> %+v, want one more 304", calls, got)
	}
}
