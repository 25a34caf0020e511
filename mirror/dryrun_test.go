package mirror

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// TestDryRunGuardRefusesWrites: a client behind the guard sends reads as
// they are and no write while the repository is in dry run, or while its
// settings cannot be read; the caller gets errDryRun, and the request's
// body is closed.
func TestDryRunGuardRefusesWrites(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet || strings.Contains(r.URL.Path, "/issues/3/labels") {
			fmt.Fprint(w, `[]`)
			return
		}
		fmt.Fprint(w, `{"id":5}`)
	}))
	defer srv.Close()
	gh, err := github.NewClient(nil).WithEnterpriseURLs(srv.URL+"/", srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	gh.BaseURL.Path, gh.UploadURL.Path = "/", "/"
	repo := store.Repo{ID: 1, FullName: "acme/app", Installation: 7}
	var dry bool
	var unknown error
	c := guardedClient(gh, repo, func(context.Context) (bool, error) { return dry, unknown }, discardLog())
	ctx := context.Background()
	writes := func() []error {
		_, _, e1 := c.Issues.AddLabelsToIssue(ctx, "acme", "app", 3, []string{"needs-specification"})
		_, _, e2 := c.Issues.CreateComment(ctx, "acme", "app", 3, &github.IssueComment{Body: github.String("x")})
		_, e3 := c.Issues.RemoveLabelForIssue(ctx, "acme", "app", 3, "stale")
		_, _, e4 := c.Issues.EditComment(ctx, "acme", "app", 9, &github.IssueComment{Body: github.String("y")})
		_, _, e5 := c.Checks.CreateCheckRun(ctx, "acme", "app", github.CreateCheckRunOptions{Name: "backlog", HeadSHA: "abc"})
		_, _, e6 := c.Issues.CreateLabel(ctx, "acme", "app", &github.Label{Name: github.String("backlog")})
		return []error{e1, e2, e3, e4, e5, e6}
	}
	for _, tc := range []struct {
		name    string
		dry     bool
		unknown error
	}{{"dry_run", true, nil}, {"settings unknown", false, errSettingsUnknown}} {
		dry, unknown = tc.dry, tc.unknown
		got = nil
		if _, _, err := c.Issues.ListLabels(ctx, "acme", "app", nil); err != nil {
			t.Errorf("%s: a read was refused: %v", tc.name, err)
		}
		for i, err := range writes() {
			if !errors.Is(err, errDryRun) {
				t.Errorf("%s: write %d answered %v, want errDryRun", tc.name, i, err)
			}
		}
		if len(got) != 1 || got[0] != "GET /repos/acme/app/labels" {
			t.Errorf("%s: the server received %v, want the read only", tc.name, got)
		}
	}
	dry, unknown, got = false, nil, nil
	for i, err := range writes() {
		if err != nil {
			t.Errorf("not in dry run: write %d failed: %v", i, err)
		}
	}
	if len(got) != 6 {
		t.Errorf("not in dry run: the server received %v, want six writes", got)
	}
}

// TestDryRunBeforeSettingsRead: a repository served before its settings
// file was read (nothing stored: an older warden's database, a read that
// failed) has the file read before warden acts on a delivery about it. A
// file saying dry_run then holds the admission label an agent's item
// would get; the same file saying dry_run: false lets it through (the
// control).
func TestDryRunBeforeSettingsRead(t *testing.T) {
	for _, dry := range []bool{true, false} {
		t.Run(fmt.Sprintf("dry_run %t", dry), func(t *testing.T) {
			sim, err := ghsim.New(ghsim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv := sim.Start()
			t.Cleanup(func() { srv.Close(); sim.Close() })
			var mu sync.Mutex
			var writes []string
			sim.Observe(func(x ghsim.Exchange) {
				if x.Method != http.MethodGet && strings.HasPrefix(x.Path, "/repos/") {
					mu.Lock()
					writes = append(writes, x.Method+" "+x.Path)
					mu.Unlock()
				}
			}, nil)
			gh, err := app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: srv.URL + "/",
				Retries: -1, MaxWait: -1, Logger: discardLog()})
			if err != nil {
				t.Fatal(err)
			}
			inst := sim.Install("acme", "installer")
			ghRepo := sim.AddRepo(inst, "acme/app", "main")
			sim.SetRole(ghRepo, "builder[bot]", "write")
			if _, err := sim.As("maria").Push(ghRepo, "main", "", map[string]string{SettingsPath: fmt.Sprintf("dry_run: %t\n", dry)}, "settings"); err != nil {
				t.Fatal(err)
			}
			iss, err := sim.As("builder[bot]").OpenIssue(ghRepo, "Proposed by an agent", "spec", "backlog")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := sim.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var payload []byte
			for _, d := range sim.Deliveries() {
				if d.Event == "issues" && d.Action == "opened" {
					payload = d.Payload
				}
			}
			d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "dry.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			st := testStore(t, d)
			ss, err := OpenSettingsStore(st, gh, nil, discardLog())
			if err != nil {
				t.Fatal(err)
			}
			repo := store.Repo{ID: ghRepo.ID, FullName: "acme/app", Installation: inst.ID, DefaultBranch: "main"}
			if err := st.Ledger.PutRepo(ctx, repo); err != nil {
				t.Fatal(err)
			}
			m := &Mirror{Ledger: st.Ledger, Acts: st.Acts, GitHub: gh, Perms: NewPermissions(), Region: "local",
				Log: discardLog(), Settings: ss.Get, SettingsStore: ss, Now: time.Now}
			out, err := m.HandleIssues(ctx, Event{Name: "issues", Action: "opened", Installation: inst.ID, Payload: payload})
			if err != nil {
				t.Fatal(err)
			}
			if got := ss.Get(ctx, repo).DryRun; got != dry {
				t.Errorf("the settings in effect say dry_run %t after the delivery, want %t (the file read first)", got, dry)
			}
			mu.Lock()
			defer mu.Unlock()
			want := 0
			if !dry {
				want = 1 // the admission label
			}
			if len(writes) != want {
				t.Errorf("#%d (%s): warden wrote %v, want %d writes", iss.Number, out, writes, want)
			}
		})
	}
}

// TestGitHubClientsAreGuarded: every GitHub client this package makes goes
// through the dry-run guard (guardedClient) but for those of the files
// that only read (the settings file, the anchors): each file may make as
// many clients as listed here, and a write path added anywhere cannot
// forget dry_run.
func TestGitHubClientsAreGuarded(t *testing.T) {
	allowed := map[string]int{
		"dryrun.go":          1, // Mirror.repoClient: the guard itself
		"reports_write.go":   1, // Reports.client, behind the guard
		"dashboard_write.go": 1, // Dashboards.client, behind the guard
		"settingsload.go":    1, // reads the settings file, compares commits
		"anchors.go":         1, // reads anchor files
		"anchorpush.go":      1, // compares commits
	}
	call := regexp.MustCompile(`\.Installation\(`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var hits []string
		for i, line := range strings.Split(string(b), "\n") {
			if call.MatchString(line) && !strings.Contains(line, "Installation(id int64)") {
				hits = append(hits, fmt.Sprintf("%s:%d: %s", f, i+1, strings.TrimSpace(line)))
			}
		}
		if len(hits) > allowed[f] {
			t.Errorf("%s makes %d GitHub clients, %d behind no dry-run guard (use Mirror.repoClient or callsFor):\n%s",
				f, len(hits), len(hits)-allowed[f], strings.Join(hits, "\n"))
		}
	}
}
