package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror/store"
)

// itemsEnv is a database holding a served repository with five items.
func itemsEnv(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	d, err := db.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := store.Open(ctx, d, store.Config{Region: "local"})
	if err != nil {
		t.Fatal(err)
	}
	l, acts := st.Ledger, st.Acts
	if err := l.PutRepo(ctx, store.Repo{ID: 77, FullName: "acme/app", Installation: 5, DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	tags := func(extra ...string) []string {
		return append([]string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main"}, extra...)
	}
	seed := []store.NewItem{
		{Number: 3, Title: "Batch the WAL fsyncs", Body: "See #3", Tags: tags()},
		{Number: 4, Title: "Elsewhere", Tags: []string{"backlog", "priority:P3", "phase:research", "homeRegion:far", "baseBranch:main"}},
		{Number: 9, Title: "Next to the WAL", Tags: tags(), Links: []gating.Link{{Rel: gating.Related, Target: "issue-50"}}},
		{Number: 10, Title: "Depends on the WAL", Tags: []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local", "baseBranch:main"}, Links: []gating.Link{{Rel: gating.BlockedBy, Target: "issue-3"}}},
		{Number: 11, Title: "Proposed by an agent", Tags: tags()},
	}
	for _, in := range seed {
		if _, err := l.Create(ctx, 77, in, store.Actor{Role: gating.RoleHuman, Name: "seed"}, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Admitted (a recorded act, the admission label absent), except
		// issue-11, which still carries the admission label.
		labels := []string{"backlog"}
		if in.Number == 11 {
			labels = append(labels, "needs-specification")
		} else if err := acts.RecordAdmission(ctx, 77, in.Number, store.Admission{By: "alice", At: time.Now(), How: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.RecordIssueState(ctx, 77, in.Number, store.IssueState{State: store.IssueOpen, Labels: labels, UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{"WARDEN_DATABASE": "sqlite:" + path, "WARDEN_LEASE_MAX": "10m"}
}

func runCLI(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, mapEnv(env), &out, &errb)
	return code, out.String(), errb.String()
}

func TestItemsCommands(t *testing.T) {
	env := itemsEnv(t)

	code, out, errs := runCLI(env, "items", "list", "--repo", "acme/app")
	if code != exitOK || !strings.Contains(out, "ITEM") || !strings.Contains(out, "issue-3") || !strings.Contains(out, "Batch the WAL fsyncs") ||
		!strings.Contains(out, "issue-9") || strings.Index(out, "issue-3") > strings.Index(out, "issue-9") {
		t.Fatalf("list: %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(env, "items", "list", "--repo", "ACME/app", "--json")
	var views []map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &views) != nil || len(views) != 5 || views[0]["id"] != "issue-3" {
		t.Fatalf("list --json: %d %s", code, out)
	}

	// Claim, with the flags after the item.
	code, out, errs = runCLI(env, "items", "claim", "issue-3", "--repo", "acme/app", "--owner", "alice/cli", "--lease", "90s", "--branch", "feat/wal")
	if code != exitOK || !strings.Contains(out, "granted issue-3 to alice/cli: fencing token 1, lease 90s") {
		t.Fatalf("claim: %d %q %q", code, out, errs)
	}
	// Contended for another owner: exit 1, the reason named.
	code, _, errs = runCLI(env, "items", "claim", "--repo", "acme/app", "3", "--owner", "bob/cli")
	if code != exitFailed || !strings.Contains(errs, "not granted: contended") {
		t.Fatalf("contended claim: %d %q", code, errs)
	}
	// The lease is clamped to WARDEN_LEASE_MAX; --json prints the result.
	code, out, _ = runCLI(env, "items", "claim", "--repo", "acme/app", "issue-9", "--owner", "alice/cli", "--lease", "2h", "--json")
	var res map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res["leaseSeconds"] != (10*time.Minute).Seconds() || res["granted"] != true {
		t.Fatalf("claim --json: %d %s", code, out)
	}
	code, _, errs = runCLI(env, "items", "claim", "--repo", "acme/app", "issue-4", "--owner", "alice/cli")
	if code != exitFailed || !strings.Contains(errs, "ForeignRegion") {
		t.Fatalf("foreign claim: %d %q", code, errs)
	}

	code, out, _ = runCLI(env, "items", "show", "--repo", "acme/app", "issue-3")
	for _, want := range []string{"issue-3  Batch the WAL fsyncs", "priority:P1", "attempts:    1", "held, alice/cli (fence 1, region local", "feat/wal", "See #3"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show lacks %q: %d\n%s", want, code, out)
		}
	}
	code, out, _ = runCLI(env, "items", "show", "--repo", "acme/app", "issue-9", "--json")
	var detail map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &detail) != nil || detail["attempts"] != 1.0 || len(detail["grants"].([]any)) != 1 ||
		len(detail["danglingLinks"].([]any)) != 1 {
		t.Fatalf("show --json: %d %s", code, out)
	}

	// Release on a wrong token: exit 1; on the right one: released.
	code, _, errs = runCLI(env, "items", "release", "--repo", "acme/app", "issue-3", "--token", "2")
	if code != exitFailed || !strings.Contains(errs, "not released: stale") {
		t.Fatalf("stale release: %d %q", code, errs)
	}
	code, out, _ = runCLI(env, "items", "release", "--repo", "acme/app", "issue-3", "--token", "1")
	if code != exitOK || !strings.Contains(out, "released issue-3 (fencing token 1)") {
		t.Fatalf("release: %d %q", code, out)
	}
	code, out, _ = runCLI(env, "items", "list", "--repo", "acme/app")
	if code != exitOK || !strings.Contains(out, "held by alice/cli (fence 1)") {
		t.Fatalf("list after release (issue-9 still held): %s", out)
	}

	// A maintenance claim.
	code, out, _ = runCLI(env, "items", "claim", "--repo", "acme/app", "issue-3", "--owner", "alice/repair", "--maintenance")
	if code != exitOK || !strings.Contains(out, "fencing token 2") {
		t.Fatalf("maintenance: %d %q", code, out)
	}
}

func TestItemsRefusalsAndUsage(t *testing.T) {
	env := itemsEnv(t)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"items"}, exitSetting, "name a subcommand: list, show, claim, release"},
		{"unknown subcommand", []string{"items", "delete"}, exitSetting, `unknown subcommand "delete"`},
		{"no repo", []string{"items", "list"}, exitSetting, "--repo OWNER/REPO is required"},
		{"bad repo", []string{"items", "list", "--repo", "acme"}, exitSetting, "not OWNER/REPO"},
		{"unknown flag", []string{"items", "list", "--repo", "acme/app", "--colour"}, exitSetting, "unknown flag: --"},
		{"list takes no item", []string{"items", "list", "--repo", "acme/app", "issue-3"}, exitSetting, "unexpected argument"},
		{"show without an item", []string{"items", "show", "--repo", "acme/app"}, exitSetting, "name one item"},
		{"show two items", []string{"items", "show", "--repo", "acme/app", "issue-3", "issue-4"}, exitSetting, "name one item"},
		{"bad item", []string{"items", "show", "--repo", "acme/app", "issue-x"}, exitSetting, "not an item id"},
		{"claim without owner", []string{"items", "claim", "--repo", "acme/app", "issue-3"}, exitSetting, "--owner is required"},
		{"claim waiting too long", []string{"items", "claim", "--repo", "acme/app", "issue-3", "--owner", "a/b", "--wait", "2m"}, exitSetting, "--wait"},
		{"release without token", []string{"items", "release", "--repo", "acme/app", "issue-3"}, exitSetting, "--token N is required"},
		{"token flag only on release", []string{"items", "claim", "--repo", "acme/app", "issue-3", "--token", "1"}, exitSetting, "unknown flag: --"},
		{"repository not served", []string{"items", "list", "--repo", "acme/other"}, exitFailed, "does not serve acme/other"},
		{"missing item", []string{"items", "show", "--repo", "acme/app", "issue-404"}, exitFailed, "no such item"},
		{"owner with a space", []string{"items", "claim", "--repo", "acme/app", "issue-3", "--owner", "a b"}, exitFailed, "refused (invalid-request)"},
		{"release of an unclaimed item", []string{"items", "release", "--repo", "acme/app", "issue-4", "--token", "1"}, exitFailed, "not released: unclaimed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(env, c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d (want %d), stderr %q, stdout %q; want %q", code, c.code, errs, out, c.want)
			}
		})
	}
	// A bad database setting is exit 2, as for every command.
	bad := map[string]string{"WARDEN_DATABASE": "sqlite:" + filepath.Join(t.TempDir(), "no", "such", "w.db")}
	if code, _, errs := runCLI(bad, "items", "list", "--repo", "acme/app"); code != exitSetting || !strings.Contains(errs, "WARDEN_DATABASE") {
		t.Fatalf("bad database: %d %q", code, errs)
	}
}
