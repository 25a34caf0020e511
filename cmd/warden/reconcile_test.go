package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror"
)

// TestReconcileCommand runs `warden reconcile` against the database and
// the simulator of a running warden (the harness): usage errors exit 2; a
// dry run reports a pull request that links no item and writes nothing to
// GitHub; an unknown repository is refused by name.
func TestReconcileCommand(t *testing.T) {
	dir := t.TempDir()
	e := harness.New(t, harness.Options{Dir: dir})
	ctx := context.Background()
	if code, err := e.API(ctx, harness.HumanToken, http.MethodPost, "/items", map[string]any{"title": "Tidy", "specification": "spec"}, nil); err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, err)
	}
	dev := e.Sim.As("dev")
	e.Sim.SetRole(e.Repo, "dev", "write")
	if _, err := dev.Push(e.Repo, "chore/x", "main", map[string]string{"x.txt": "x"}, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.OpenPR(e.Repo, "chore/x", "main", "Chore", "No item here.", false); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)

	env := map[string]string{
		"WARDEN_DATABASE":       "sqlite:" + filepath.Join(dir, "warden.db"),
		"WARDEN_GITHUB_API_URL": e.GitHub.URL + "/",
		"WARDEN_APP_ID":         strconv.FormatInt(e.Sim.AppID(), 10),
		"WARDEN_PRIVATE_KEY":    string(e.Sim.PrivateKeyPEM()),
		"WARDEN_WEBHOOK_SECRET": harness.Secret,
	}
	if code, _, errs := runCLI(env, "reconcile", "--repo", "not a repo"); code != exitSetting || !strings.Contains(errs, "not OWNER/REPO") {
		t.Fatalf("bad --repo: %d %s", code, errs)
	}
	if code, _, errs := runCLI(env, "reconcile", "--repo", "acme/nope"); code != exitFailed || !strings.Contains(errs, "does not serve acme/nope") {
		t.Fatalf("unknown repository: %d %s", code, errs)
	}
	writes := e.Sim.Calls(e.Inst.ID).Writes
	code, out, errs := runCLI(env, "reconcile", "--repo", "acme/app", "--dry-run")
	if code != exitOK || !strings.Contains(out, "acme/app: complete") || !strings.Contains(out, "pr-without-item") {
		t.Fatalf("dry run: %d\n%s%s", code, out, errs)
	}
	if after := e.Sim.Calls(e.Inst.ID).Writes; after != writes {
		t.Fatalf("a dry run wrote %d times to GitHub", after-writes)
	}
	if !strings.Contains(out, "acme/app: complete; ") || !strings.Contains(out, ", 0 writes (dry run)") {
		t.Fatalf("a dry run does not say it wrote nothing:\n%s", out)
	}
	t.Logf("dry run:\n%s", out)
}

// TestPrintPasses: a dry run says 0 writes and counts what it would write
// apart; a failed pass says why and claims no findings; a stopped one says
// where it stopped.
func TestPrintPasses(t *testing.T) {
	failure := errors.Join(errors.New("reconcile acme/other (issues): GitHub answered 502"),
		errors.New("reconcile acme/app (pulls): GET /repos/acme/app/pulls: 500 Internal Server Error\n\tretried 3 times"))
	cases := []struct {
		name   string
		res    mirror.PassResult
		dry    bool
		err    error
		want   []string
		unwant []string
	}{
		{"dry run with planned writes", mirror.PassResult{Repo: "acme/app", Complete: true, Calls: app.CallCounts{Reads: 5, Writes: 1},
			Actions: []string{"would adopt issue-4 (it carries backlog)", "would adopt issue-5 (it carries backlog)", "issue-3: 2 comments read that warden had missed"}},
			true, nil,
			[]string{"acme/app: complete; 5 reads (0 not modified), 0 writes (dry run; would write 2, listed below)", "  would: adopt issue-4", "  did: issue-3: 2 comments"},
			[]string{"1 writes"}},
		{"dry run, nothing planned", mirror.PassResult{Repo: "acme/app", Complete: true}, true, nil,
			[]string{"acme/app: complete; 0 reads (0 not modified), 0 writes (dry run)", "no findings"}, []string{"would write"}},
		{"a real pass", mirror.PassResult{Repo: "acme/app", Complete: true, Calls: app.CallCounts{Reads: 2, Writes: 3}}, false, nil,
			[]string{"acme/app: complete; 2 reads (0 not modified), 3 writes"}, []string{"dry run"}},
		{"a failed pass", mirror.PassResult{Repo: "acme/app"}, false, failure,
			[]string{"acme/app: failed: reconcile acme/app (pulls): GET /repos/acme/app/pulls: 500 Internal Server Error; retried 3 times;", "findings not derived"},
			[]string{"stopped: ;", "no findings", "acme/other"}},
		{"a stopped pass", mirror.PassResult{Repo: "acme/app", Stopped: "budget of 10 requests spent in phase issues (page 3)"}, false, nil,
			[]string{"acme/app: stopped: budget of 10 requests spent in phase issues (page 3);"}, []string{"failed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			printPasses(env{stdout: &out}, []mirror.PassResult{c.res}, c.dry, false, c.err)
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("want %q in:\n%s", w, out.String())
				}
			}
			for _, u := range c.unwant {
				if strings.Contains(out.String(), u) {
					t.Errorf("do not want %q in:\n%s", u, out.String())
				}
			}
		})
	}
}
