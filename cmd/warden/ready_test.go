package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror"
)

func TestReadyCommand(t *testing.T) {
	env := itemsEnv(t)
	code, out, errs := runCLI(env, "ready", "--repo", "acme/app")
	if code != exitOK {
		t.Fatalf("ready: %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"acme/app: 5 items, 2 ready, 0 in flight, 1 blocked, 0 stalled, 0 parked, 1 awaiting admission, 0 complete",
		"Ready (claim order):", "Batch the WAL fsyncs", "Next to the WAL",
		"Excluded:", "awaiting-admission", "foreign-region", "blocked", "blockedBy issue-3 (live)",
		// issue-4 names a region no replica here serves: an alarm and a defect.
		"ALARM: unrouted-region: issue-4", "unrouted-region",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ready output lacks %q:\n%s", want, out)
		}
	}
	// Claim order: issue-3 before issue-9 (same priority, created first).
	if i3, i9 := strings.Index(out, "issue-3 "), strings.Index(out, "issue-9 "); i3 < 0 || i9 < 0 || i3 > i9 {
		t.Errorf("ready order:\n%s", out)
	}

	code, out, errs = runCLI(env, "ready", "--repo", "ACME/app", "--json")
	var got struct {
		Ready []struct {
			Item  string `json:"item"`
			Title string `json:"title"`
		} `json:"ready"`
		Excluded []struct {
			Item   string `json:"item"`
			Reason string `json:"reason"`
		} `json:"excluded"`
		Defects    []any `json:"defects"`
		Alarms     []any `json:"alarms"`
		ReadyCount int   `json:"readyCount"`
		Report     struct {
			Summary struct {
				Items int `json:"items"`
			} `json:"summary"`
			CleanReclaims []any `json:"cleanReclaims"`
		} `json:"report"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("ready --json: %d %s %s", code, out, errs)
	}
	if len(got.Ready) != 2 || got.Ready[0].Item != "issue-3" || got.Ready[0].Title != "Batch the WAL fsyncs" || got.ReadyCount != 2 ||
		len(got.Excluded) != 3 || got.Defects == nil || got.Alarms == nil || got.Report.Summary.Items != 5 || got.Report.CleanReclaims == nil {
		t.Fatalf("ready --json: %s", out)
	}

	// A claim moves the item from ready to in flight.
	if code, _, errs := runCLI(env, "items", "claim", "--repo", "acme/app", "issue-3", "--owner", "alice/cli", "--branch", "feat/wal"); code != exitOK {
		t.Fatalf("claim: %s", errs)
	}
	_, out, _ = runCLI(env, "ready", "--repo", "acme/app")
	if !strings.Contains(out, "In flight:") || !strings.Contains(out, "alice/cli") || !strings.Contains(out, "feat/wal") {
		t.Fatalf("ready after a claim:\n%s", out)
	}
	// A claim on an item that is not ready names the exclusion.
	code, _, errs = runCLI(env, "items", "claim", "--repo", "acme/app", "issue-11", "--owner", "alice/cli")
	if code != exitFailed || !strings.Contains(errs, "not-ready (awaiting-admission)") {
		t.Fatalf("not-ready claim: %d %q", code, errs)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ready"}, exitSetting, "--repo OWNER/REPO is required"},
		{[]string{"ready", "--repo", "acme"}, exitSetting, "not OWNER/REPO"},
		{[]string{"ready", "--repo", "acme/app", "extra"}, exitSetting, "unexpected argument"},
		{[]string{"ready", "--repo", "acme/other"}, exitFailed, "does not serve acme/other"},
	} {
		if code, _, errs := runCLI(env, c.args...); code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d %q, want %d %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// TestReadyCommandAgainstTheService runs `warden ready` on the database of a
// running warden (the harness), after items were made through GitHub and
// the agent API.
func TestReadyCommandAgainstTheService(t *testing.T) {
	dir := t.TempDir()
	e := harness.New(t, harness.Options{Dir: dir})
	ctx := context.Background()
	for _, c := range []struct{ token, title string }{{harness.HumanToken, "Admitted by its maker"}, {harness.PMToken, "Awaiting a human"}} {
		if code, err := e.API(ctx, c.token, http.MethodPost, "/items", map[string]any{"title": c.title, "specification": "spec"}, nil); err != nil || code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, err)
		}
	}
	e.MustSettle(t)
	env := map[string]string{"WARDEN_DATABASE": "sqlite:" + filepath.Join(dir, "warden.db")}
	code, out, errs := runCLI(env, "ready", "--repo", "acme/app")
	if code != exitOK || !strings.Contains(out, "1 ready") || !strings.Contains(out, "Admitted by its maker") ||
		!strings.Contains(out, "issue-2  awaiting-admission") {
		t.Fatalf("ready: %d\n%s%s", code, out, errs)
	}
}

// TestReadyCommandEqualsTheService: `warden ready --json` on a running
// warden's database answers exactly what its GET /ready answers, findings
// included (the CLI adds the report): a settings file with mistakes (settings-invalid), a pull request
// that links no item (pr-without-item), an item awaiting admission. The CLI
// opens the store as the service assembles it (service.OpenRecords), with
// the repository's settings in effect and its findings.
func TestReadyCommandEqualsTheService(t *testing.T) {
	dir := t.TempDir()
	e := harness.New(t, harness.Options{Dir: dir})
	ctx := context.Background()
	e.Sim.SetRole(e.Repo, "maria", "maintain")
	maria := e.Sim.As("maria")
	if _, err := maria.Push(e.Repo, "main", "", map[string]string{mirror.SettingsPath: "poision_threshold: 2\nrequire_item: yes please\n"}, "backlog settings"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ token, title string }{{harness.HumanToken, "Admitted by its maker"}, {harness.PMToken, "Awaiting a human"}} {
		if code, err := e.API(ctx, c.token, http.MethodPost, "/items", map[string]any{"title": c.title, "specification": "spec"}, nil); err != nil || code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, err)
		}
	}
	if _, err := maria.Push(e.Repo, "loose", "main", map[string]string{"loose.txt": "x"}, "a change for no item"); err != nil {
		t.Fatal(err)
	}
	if _, err := maria.OpenPR(e.Repo, "loose", "main", "A change for no item", "no link here", false); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)
	if _, err := e.Reconcile(ctx, mirror.ReconcileOptions{}); err != nil {
		t.Fatal(err)
	}
	e.MustSettle(t)

	var service any
	if code, err := e.API(ctx, harness.WorkerToken, http.MethodGet, "/ready", nil, &service); err != nil || code != http.StatusOK {
		t.Fatalf("GET /ready: %d %v", code, err)
	}
	env := map[string]string{"WARDEN_DATABASE": "sqlite:" + filepath.Join(dir, "warden.db")}
	code, out, errs := runCLI(env, "ready", "--repo", "acme/app", "--json")
	var cli any
	if code != exitOK || json.Unmarshal([]byte(out), &cli) != nil {
		t.Fatalf("ready --json: %d %s %s", code, out, errs)
	}
	codes := map[string]bool{}
	for _, d := range service.(map[string]any)["defects"].([]any) {
		codes[d.(map[string]any)["code"].(string)] = true
	}
	for _, want := range []string{"settings-invalid", "pr-without-item"} {
		if !codes[want] {
			t.Errorf("GET /ready reports no %s (the scenario did not make one): %v", want, codes)
		}
	}
	// The CLI's answer adds the report (the status page's sections) to
	// GET /ready's fields; everything GET /ready says, it says the same.
	delete(cli.(map[string]any), "report")
	if !reflect.DeepEqual(cli, service) {
		s, _ := json.MarshalIndent(service, "", "  ")
		t.Fatalf("warden ready --json differs from GET /ready\nCLI:\n%s\nGET /ready:\n%s", out, s)
	}
}
