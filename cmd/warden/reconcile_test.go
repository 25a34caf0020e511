package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wardenhq/warden/internal/harness"
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
}
