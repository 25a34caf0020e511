package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestListInstallationsEveryPage: the App's installations, over more than
// one page of 100, suspended ones flagged.
func TestListInstallationsEveryPage(t *testing.T) {
	e := newSimEnv(t, nil)
	ctx := context.Background()
	frozen := e.sim.Install("frozen", "carol")
	e.sim.Locked(func() { frozen.Suspended = true })
	for i := range 100 {
		e.sim.Install(fmt.Sprintf("org-%03d", i), "installer")
	}
	before := e.sim.Calls(AppInstallation)
	ins, err := e.app.ListInstallations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 102 {
		t.Fatalf("listed %d installations, want 102", len(ins))
	}
	seen := map[int64]ListedInstallation{}
	for _, in := range ins {
		seen[in.ID] = in
	}
	if got := seen[e.inst.ID]; got.Account != "acme" || got.Suspended {
		t.Errorf("acme's installation listed as %+v", got)
	}
	if got := seen[frozen.ID]; got.Account != "frozen" || !got.Suspended {
		t.Errorf("the suspended installation listed as %+v, want suspended", got)
	}
	if got := e.sim.Calls(AppInstallation); got.Reads-before.Reads != 2 {
		t.Errorf("the listing took %d JWT reads, want 2 pages", got.Reads-before.Reads)
	}
}

// TestListInstallationReposEveryPageThen304s: an installation's
// repositories over two pages; the second listing of an unchanged
// installation costs two 304s, and a removal is seen.
func TestListInstallationReposEveryPageThen304s(t *testing.T) {
	e := newSimEnv(t, nil)
	ctx := context.Background()
	for i := range 149 {
		e.sim.AddRepo(e.inst, fmt.Sprintf("acme/r%03d", i), "trunk")
	}
	other := e.sim.Install("globex", "bob")
	e.sim.AddRepo(other, "globex/hidden", "main")
	repos, err := e.app.ListInstallationRepos(ctx, e.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 150 {
		t.Fatalf("listed %d repositories, want 150", len(repos))
	}
	if repos[0] != (ListedRepository{ID: e.repo.ID, FullName: "acme/app", DefaultBranch: "main"}) {
		t.Errorf("first repository %+v", repos[0])
	}
	for _, r := range repos {
		if strings.HasPrefix(r.FullName, "globex/") {
			t.Errorf("another installation's repository listed: %s", r.FullName)
		}
	}
	before := e.sim.Calls(e.inst.ID)
	again, err := e.app.ListInstallationRepos(ctx, e.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 150 {
		t.Fatalf("second listing: %d repositories, want 150", len(again))
	}
	if got := e.sim.Calls(e.inst.ID); got.Reads != before.Reads || got.NotModified != before.NotModified+2 {
		t.Errorf("second listing: calls %+v -> %+v, want two 304s and no charged read", before, got)
	}
	e.sim.RemoveFromInstallation(e.inst, e.repo)
	after, err := e.app.ListInstallationRepos(ctx, e.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 149 || after[0].FullName == "acme/app" {
		t.Errorf("after a removal: %d repositories, first %s; want 149 without acme/app", len(after), after[0].FullName)
	}
}

// TestGetInstallationNotFound: a 404 is ErrInstallationNotFound; an
// installation that is there is read.
func TestGetInstallationNotFound(t *testing.T) {
	e := newSimEnv(t, nil)
	ctx := context.Background()
	in, err := e.app.GetInstallation(ctx, e.inst.ID)
	if err != nil || in.ID != e.inst.ID || in.Account != "acme" {
		t.Fatalf("GetInstallation: %+v, %v", in, err)
	}
	_, err = e.app.GetInstallation(ctx, 987654321)
	if !errors.Is(err, ErrInstallationNotFound) {
		t.Fatalf("unknown installation: %v, want ErrInstallationNotFound", err)
	}
	if _, err := e.app.GetInstallation(ctx, 0); err == nil || errors.Is(err, ErrInstallationNotFound) {
		t.Errorf("installation 0: %v, want a refusal that is not a not-found", err)
	}
}

// TestListInstallationReposFailsWhole: a listing that changed while it was
// read, a repository without an id, a page that fails: an error, never a
// shorter list (a caller takes what is missing for removed).
func TestListInstallationReposFailsWhole(t *testing.T) {
	repo := func(id int, name string) string {
		return fmt.Sprintf(`{"id":%d,"full_name":%q,"default_branch":"main"}`, id, name)
	}
	for _, c := range []struct {
		name  string
		pages map[string]string // page -> body; a missing page is a 500
		want  string
	}{
		{"total_count changes between pages", map[string]string{
			"1": `{"total_count":3,"repositories":[` + repo(1, "o/a") + `,` + repo(2, "o/b") + `]}`,
			"2": `{"total_count":2,"repositories":[` + repo(3, "o/c") + `]}`,
		}, "changed while it was read (total_count 3, then 2"},
		{"fewer repositories than total_count", map[string]string{
			"1": `{"total_count":4,"repositories":[` + repo(1, "o/a") + `,` + repo(2, "o/b") + `]}`,
			"2": `{"total_count":4,"repositories":[` + repo(2, "o/b") + `]}`,
		}, "listed 2 repositories of a total_count of 4"},
		{"a repository without an id", map[string]string{
			"1": `{"total_count":2,"repositories":[` + repo(1, "o/a") + `,` + repo(0, "o/b") + `]}`,
			"2": `{"total_count":2,"repositories":[]}`,
		}, "without an id or owner/name"},
		{"a repository without an owner", map[string]string{
			"1": `{"total_count":1,"repositories":[` + repo(1, "nameonly") + `]}`,
		}, "without an id or owner/name"},
		{"no total_count", map[string]string{
			"1": `{"repositories":[` + repo(1, "o/a") + `]}`,
		}, "no total_count"},
		{"a page that fails", map[string]string{
			"1": `{"total_count":3,"repositories":[` + repo(1, "o/a") + `,` + repo(2, "o/b") + `]}`,
		}, "(page 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f *fakeGitHub
			f = newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if r.URL.Path != "/installation/repositories" {
					http.NotFound(w, r)
					return
				}
				pg := r.URL.Query().Get("page")
				if pg == "" {
					pg = "1"
				}
				body, ok := c.pages[pg]
				if !ok {
					w.WriteHeader(http.StatusInternalServerError)
					fmt.Fprint(w, `{"message":"Server Error"}`)
					return
				}
				if _, more := c.pages["2"]; pg == "1" && (more || c.name == "a page that fails") {
					w.Header().Set("Link", fmt.Sprintf(`<%s/installation/repositories?page=2&per_page=2>; rel="next"`, f.srv.URL))
				}
				fmt.Fprint(w, body)
			})
			a := newTestApp(t, f, func(c *Config) { c.Retries = -1 })
			repos, err := a.ListInstallationRepos(context.Background(), 7)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ListInstallationRepos: %v, %v; want an error with %q", repos, err, c.want)
			}
			if repos != nil {
				t.Errorf("a failed listing returned %d repositories", len(repos))
			}
		})
	}
}
