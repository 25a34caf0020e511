package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// Tokens of the fixture (each at least 16 characters).
const (
	tokPM      = "pm-token-0123456789"
	tokWorker1 = "w1-token-0123456789"
	tokWorker2 = "w2-token-0123456789"
	tokHuman   = "alice-token-0123456789"
	tokLimited = "limited-token-0123456789"
)

var testTokens = []config.APIToken{
	{Name: "pm", Token: tokPM, Role: "pm"},
	{Name: "w1", Token: tokWorker1, Role: "worker"},
	{Name: "w2", Token: tokWorker2, Role: "worker"},
	{Name: "alice", Token: tokHuman, Role: "human"},
	{Name: "limited", Token: tokLimited, Role: "pm", Repos: []string{"acme/other"}},
}

// fixture is the agent API over a real SQLite ledger, with the GitHub
// adapter pointed at the simulator (one installation, acme/app).
type fixture struct {
	t      *testing.T
	sim    *ghsim.Sim
	srv    *ghsim.Server
	inst   *ghsim.Installation
	repo   *ghsim.Repo
	app    *app.App
	db     *db.DB
	ledger *store.Ledger
	acts   *store.Acts
	mrepo  store.Repo
	store  *flakyStore
	gh     GitHub
	api    *httptest.Server
	clock  *clock.Manual
	opt    Options
}

// flakyStore is the ledger with a failure injected into Create.
type flakyStore struct {
	*store.Ledger
	failCreates atomic.Int32
}

var errInjected = errors.New("injected: the database went away")

func (s *flakyStore) Create(ctx context.Context, repoID int64, in store.NewItem, actor store.Actor, o store.WriteOptions) (store.Item, error) {
	if s.failCreates.Add(-1) >= 0 {
		return store.Item{}, errInjected
	}
	s.failCreates.Store(0)
	return s.Ledger.Create(ctx, repoID, in, actor, o)
}

func newFixture(t *testing.T, adjust ...func(*fixture)) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, clock: clock.New(time.Now().UTC())}
	sim, err := ghsim.New(ghsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.sim = sim
	f.srv = sim.Start()
	t.Cleanup(func() { f.srv.Close(); sim.Close() })
	f.inst = sim.Install("acme", "alice")
	f.repo = sim.AddRepo(f.inst, "acme/app", "main")
	sim.SetRole(f.repo, "alice", "admin")
	f.app, err = app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: f.srv.URL + "/", Retries: -1, MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.db, err = db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "warden.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	st, err := store.Open(ctx, f.db, store.Config{Region: "local", LeaseDefault: 30 * time.Second, LeaseMax: 30 * time.Minute, Quarantine: time.Hour, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.ledger, f.acts = st.Ledger, st.Acts
	f.mrepo = store.Repo{ID: f.repo.ID, FullName: "acme/app", Installation: f.inst.ID, DefaultBranch: "main"}
	if err := f.ledger.PutRepo(ctx, f.mrepo); err != nil {
		t.Fatal(err)
	}
	f.store = &flakyStore{Ledger: f.ledger}
	f.gh = AppGitHub(f.app)
	f.opt = Options{Region: "local", Admissions: f.acts, RepoKeys: map[string]string{"app": "acme/app"}}
	for _, a := range adjust {
		a(f)
	}
	f.start()
	return f
}

// start (re)starts the API server: a new handler has no memory of earlier
// requests, like a restarted process.
func (f *fixture) start() {
	if f.api != nil {
		f.api.Close()
	}
	r := chi.NewRouter()
	r.Mount("/api/v1", newHandler(f.store, f.gh, testTokens, f.opt, slog.New(slog.NewTextHandler(io.Discard, nil))))
	f.api = httptest.NewServer(r)
	f.t.Cleanup(f.api.Close)
}

// resp is an answer from the API.
type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r resp) str(k string) string {
	s, _ := r.body[k].(string)
	return s
}

func (r resp) num(k string) float64 {
	n, _ := r.body[k].(float64)
	return n
}

// call sends method path (relative to /api/v1/repos/acme/app unless it
// starts with /) with token and a JSON body (a string is sent as is).
func (f *fixture) call(method, path, token string, body any, headers ...string) resp {
	f.t.Helper()
	if !strings.HasPrefix(path, "/") {
		path = "/repos/acme/app/" + path
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, f.api.URL+"/api/v1"+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out.body)
	}
	return out
}

// must checks the status of an answer.
func (f *fixture) must(r resp, status int) resp {
	f.t.Helper()
	if r.status != status {
		f.t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// problemIs checks an answer is a problem document with status and reason
// (and field, when given).
func (f *fixture) problemIs(r resp, status int, reason string, field ...string) {
	f.t.Helper()
	if r.status != status || r.str("reason") != reason {
		f.t.Fatalf("got %d %q, want %d %q: %s", r.status, r.str("reason"), status, reason, r.raw)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		f.t.Fatalf("Content-Type %q: %s", ct, r.raw)
	}
	for _, k := range []string{"type", "title", "detail", "reason"} {
		if r.str(k) == "" {
			f.t.Fatalf("problem without %s: %s", k, r.raw)
		}
	}
	if int(r.num("status")) != status {
		f.t.Fatalf("problem status %v, want %d", r.body["status"], status)
	}
	if len(field) > 0 && r.str("field") != field[0] {
		f.t.Fatalf("problem names field %q, want %q: %s", r.str("field"), field[0], r.raw)
	}
}

// issue returns a copy of what the simulator holds for issue n.
type simIssue struct {
	ID     int64
	Title  string
	Body   string
	Author string
	Labels []string
	Parent int
	IsPull bool
}

func (f *fixture) issue(n int) (simIssue, bool) {
	var out simIssue
	ok := false
	f.sim.Locked(func() {
		i := f.repo.Issues[n]
		if i == nil || i.Deleted {
			return
		}
		ok = true
		out = simIssue{ID: i.ID, Title: i.Title, Body: i.Body, Author: i.User.Login, IsPull: i.IsPull}
		for _, l := range i.Labels {
			out.Labels = append(out.Labels, l.Name)
		}
		if i.Parent != nil {
			out.Parent = i.Parent.Number
		}
	})
	return out, ok
}

// issueCount counts the repository's issues (pull requests excluded).
func (f *fixture) issueCount() int {
	n := 0
	f.sim.Locked(func() {
		for _, i := range f.repo.Issues {
			if !i.IsPull && !i.Deleted {
				n++
			}
		}
	})
	return n
}

// seed writes an item straight into the ledger (no GitHub issue) as a human.
func (f *fixture) seed(number int, tags []string, links ...gating.Link) store.Item {
	f.t.Helper()
	base := []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local", "baseBranch:main"}
	all := append([]string{}, base...)
	for _, t := range tags {
		p, _, _ := strings.Cut(t, ":")
		replaced := false
		for i, b := range all {
			if bp, _, _ := strings.Cut(b, ":"); bp == p && strings.Contains(t, ":") && p != "backlog" {
				all[i], replaced = t, true
			}
		}
		if !replaced {
			all = append(all, t)
		}
	}
	it, err := f.ledger.Create(context.Background(), f.mrepo.ID, store.NewItem{Number: number, Title: "seeded", Tags: all, Links: links},
		store.Actor{Role: gating.RoleHuman, Name: "seed"}, store.WriteOptions{})
	if err != nil {
		f.t.Fatalf("seed issue-%d: %v", number, err)
	}
	f.admit(number)
	return it
}

// admit makes a seeded item admitted as the claim rules read it: a recorded
// human admission act and issue labels without the admission label (the
// ledger fails closed without either).
func (f *fixture) admit(number int) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.acts.RecordAdmission(ctx, f.mrepo.ID, number, store.Admission{By: "alice", At: f.clock.Now(), How: "test"}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.ledger.RecordIssueState(ctx, f.mrepo.ID, number, store.IssueState{State: store.IssueOpen, Labels: []string{"backlog"}, UpdatedAt: f.clock.Now()}); err != nil {
		f.t.Fatal(err)
	}
}

func hasLabel(labels []string, name string) bool {
	for _, l := range labels {
		if strings.EqualFold(l, name) {
			return true
		}
	}
	return false
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
