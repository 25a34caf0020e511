package ghsim

// The conformance scenario: one call per row, through go-github v66 as
// warden's app package builds it (the App's JWT client and an installation
// client), some raw (gh.NewRequest / gh.Do). It answers every route the core
// of the simulator serves with a 2xx, and the documented errors, so that
// TestMain's validation sees every one of them. Rows for routes added later
// belong to the tests of whoever adds them; adding one here is one row.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

// confEnv is the scenario's world: a fixture (installation "acme" with
// acme/app, and acme/lib added), a second installation, a suspended one, a
// repository outside every installation, and the App's and the
// installation's clients.
type confEnv struct {
	f          *fixture
	app        *github.Client // the App, with its JWT
	inst       *github.Client // installation acme
	other      *Installation
	frozen     *Installation
	deliveryID int64 // a row of the App's delivery log, found by a row
}

// confCase is one call: the route it exercises (as Sim.Routes lists it), the
// status the simulator must answer, and the call.
type confCase struct {
	name   string
	route  string
	status int
	call   func(ctx context.Context, e *confEnv) (*github.Response, error)
}

var confScenario = []confCase{
	{"the App", "GET /app", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		a, resp, err := e.app.Apps.Get(ctx, "")
		if err == nil && a.GetSlug() != e.f.sim.opt.AppSlug {
			err = errors.New("slug " + a.GetSlug())
		}
		return resp, err
	}},
	{"installations, one per page", "GET /app/installations", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		ins, resp, err := e.app.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 1})
		if err == nil && (len(ins) != 1 || resp.NextPage != 2) {
			err = errors.New("want one installation and a next page")
		}
		return resp, err
	}},
	{"installations, all", "GET /app/installations", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 100})
		return resp, err
	}},
	{"an installation", "GET /app/installations/{id}", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		in, resp, err := e.app.Apps.GetInstallation(ctx, e.f.inst.ID)
		if err == nil && in.GetAccount().GetLogin() != "acme" {
			err = errors.New("account " + in.GetAccount().GetLogin())
		}
		return resp, err
	}},
	{"an unknown installation", "GET /app/installations/{id}", 404, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.GetInstallation(ctx, 999999999)
		return resp, err
	}},
	{"an installation token", "POST /app/installations/{id}/access_tokens", 201, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		tok, resp, err := e.app.Apps.CreateInstallationToken(ctx, e.other.ID, nil)
		if err == nil && !strings.HasPrefix(tok.GetToken(), "ghs_") {
			err = errors.New("token " + tok.GetToken())
		}
		return resp, err
	}},
	{"a token for an unknown installation", "POST /app/installations/{id}/access_tokens", 404, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.CreateInstallationToken(ctx, 999999999, nil)
		return resp, err
	}},
	{"a token for a suspended installation", "POST /app/installations/{id}/access_tokens", 403, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.CreateInstallationToken(ctx, e.frozen.ID, nil)
		return resp, err
	}},
	{"a repository's installation", "GET /repos/{owner}/{repo}/installation", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		in, resp, err := e.app.Apps.FindRepositoryInstallation(ctx, "acme", "app")
		if err == nil && in.GetID() != e.f.inst.ID {
			err = errors.New("wrong installation")
		}
		return resp, err
	}},
	{"an unknown repository's installation", "GET /repos/{owner}/{repo}/installation", 404, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.FindRepositoryInstallation(ctx, "nobody", "nothing")
		return resp, err
	}},
	{"the delivery log, one per page", "GET /app/hook/deliveries", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		rows, resp, err := e.app.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: 1})
		if err == nil && (len(rows) != 1 || resp.Cursor == "") {
			err = errors.New("want one row and a cursor")
		}
		if err == nil {
			e.deliveryID = rows[0].GetID()
		}
		return resp, err
	}},
	{"the delivery log, all", "GET /app/hook/deliveries", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: 100})
		return resp, err
	}},
	{"a delivery", "GET /app/hook/deliveries/{id}", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		d, resp, err := e.app.Apps.GetHookDelivery(ctx, e.deliveryID)
		if err == nil && d.GetID() != e.deliveryID {
			err = errors.New("wrong delivery")
		}
		return resp, err
	}},
	{"a redelivery", "POST /app/hook/deliveries/{id}/attempts", 202, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.app.Apps.RedeliverHookDelivery(ctx, e.deliveryID)
		var accepted *github.AcceptedError
		if errors.As(err, &accepted) {
			err = nil
		}
		return resp, err
	}},
	{"a redelivery past GitHub's 3 days", "POST /app/hook/deliveries/{id}/attempts", 422, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		h := e.f.sim.hooks
		h.mu.Lock()
		for _, d := range h.log {
			if d.ID == e.deliveryID {
				d.DeliveredAt = d.DeliveredAt.Add(-4 * 24 * time.Hour)
			}
		}
		h.mu.Unlock()
		_, resp, err := e.app.Apps.RedeliverHookDelivery(ctx, e.deliveryID)
		return resp, err
	}},
	{"the rate limit (raw request)", "GET /rate_limit", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		req, err := e.inst.NewRequest(http.MethodGet, "rate_limit", nil)
		if err != nil {
			return nil, err
		}
		var body struct {
			Resources struct {
				Core struct{ Limit int } `json:"core"`
			} `json:"resources"`
		}
		resp, err := e.inst.Do(ctx, req, &body)
		if err == nil && body.Resources.Core.Limit != 5000 {
			err = errors.New("core limit not 5000")
		}
		return resp, err
	}},
	{"the installation's repositories, one per page", "GET /installation/repositories", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		lr, resp, err := e.inst.Apps.ListRepos(ctx, &github.ListOptions{PerPage: 1})
		if err == nil && (lr.GetTotalCount() != 2 || len(lr.Repositories) != 1 || resp.NextPage != 2) {
			err = errors.New("want one of two repositories and a next page")
		}
		return resp, err
	}},
	{"the installation's repositories, all", "GET /installation/repositories", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		lr, resp, err := e.inst.Apps.ListRepos(ctx, &github.ListOptions{PerPage: 100})
		if err == nil && (lr.GetTotalCount() != 2 || len(lr.Repositories) != 2 || lr.Repositories[0].GetFullName() != "acme/app") {
			err = errors.New("want acme's two repositories")
		}
		return resp, err
	}},
	{"a repository", "GET /repos/{owner}/{repo}", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		r, resp, err := e.inst.Repositories.Get(ctx, "acme", "app")
		if err == nil && r.GetDefaultBranch() != "main" {
			err = errors.New("default branch " + r.GetDefaultBranch())
		}
		return resp, err
	}},
	{"a repository (raw request)", "GET /repos/{owner}/{repo}", 200, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		req, err := e.inst.NewRequest(http.MethodGet, "repos/acme/app", nil)
		if err != nil {
			return nil, err
		}
		var body map[string]any
		return e.inst.Do(ctx, req, &body)
	}},
	{"a repository outside the installation", "GET /repos/{owner}/{repo}", 404, func(ctx context.Context, e *confEnv) (*github.Response, error) {
		_, resp, err := e.inst.Repositories.Get(ctx, "other", "secret")
		return resp, err
	}},
}

// TestConformanceScenario runs confScenario against one simulator and
// checks each row answered its route with its status.
func TestConformanceScenario(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.flush(t) // the delivery log holds the installation's deliveries
	e := &confEnv{f: f, app: f.app.AppClient()}
	var err error
	if e.inst, err = f.app.Installation(f.inst.ID); err != nil {
		t.Fatal(err)
	}
	e.other = f.sim.Install("globex", "bob")
	e.frozen = f.sim.Install("frozen", "carol")
	f.sim.Locked(func() { e.frozen.Suspended = true })
	f.sim.AddRepo(nil, "other/secret", "main")
	f.sim.AddRepo(f.inst, "acme/lib", "main")
	f.flush(t)

	served := f.sim.Routes()
	covered := map[string]bool{}
	for _, c := range confScenario {
		if !slices.Contains(served, c.route) {
			t.Errorf("%s: the simulator no longer serves %s", c.name, c.route)
			continue
		}
		before := len(confRec.exchangesOf(f.sim))
		resp, err := c.call(ctx, e)
		got := 0
		if resp != nil {
			got = resp.StatusCode
		}
		switch {
		case c.status < 300 && err != nil:
			t.Errorf("%s (%s): %v", c.name, c.route, err)
			continue
		case c.status >= 300 && got != c.status:
			t.Errorf("%s (%s): status %d (%v), want %d", c.name, c.route, got, err, c.status)
			continue
		}
		// The recorder saw the route answer with that status.
		seen := false
		for _, x := range confRec.exchangesOf(f.sim)[before:] {
			if confListedForm(x.Method, x.Pattern) == c.route && x.Status == c.status {
				seen = true
			}
		}
		if !seen {
			t.Errorf("%s: no %d answer of %s was recorded", c.name, c.status, c.route)
			continue
		}
		covered[c.route] = true
	}
	f.flush(t)
	var others []string
	for _, r := range served {
		if !covered[r] && !slices.Contains(others, r) {
			others = append(others, r)
		}
	}
	t.Logf("%d rows; %d of the %d routes served answered here; the rest are left to their own tests: %s",
		len(confScenario), len(covered), len(served), strings.Join(others, ", "))
}
