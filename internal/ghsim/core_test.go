package ghsim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/webhooks"
)

// fixture is a simulator with one installation and repository, warden's
// App client pointed at it, and a receiver that records deliveries.
type fixture struct {
	sim  *Sim
	srv  *Server
	app  *app.App
	inst *Installation
	repo *Repo
	mu   sync.Mutex
	got  []received
}

type received struct {
	event, id string
	body      []byte
	sigOK     bool
	header    http.Header
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ok := webhooks.VerifySignature([][]byte{[]byte("s3cret")}, r.Header.Get("X-Hub-Signature-256"), b) == nil
		f.mu.Lock()
		f.got = append(f.got, received{r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery"), b, ok, r.Header.Clone()})
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(recv.Close)
	sim, err := New(Options{WebhookURL: recv.URL, WebhookSecret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	f.sim = sim
	f.srv = sim.Start()
	t.Cleanup(func() { f.srv.Close(); sim.Close() })
	f.inst = sim.Install("acme", "alice")
	f.repo = sim.AddRepo(f.inst, "acme/app", "main")
	a, err := app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: f.srv.URL + "/", Retries: -1, MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.app = a
	return f
}

func (f *fixture) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.sim.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCoreAuthAndIdentity(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id, err := f.app.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.Slug != "warden-sim" || id.BotLogin != f.sim.BotLogin() {
		t.Fatalf("identity %+v", id)
	}
	gh, err := f.app.Installation(f.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	repo, resp, err := gh.Repositories.Get(ctx, "acme", "app")
	if err != nil {
		t.Fatal(err)
	}
	if repo.GetDefaultBranch() != "main" || resp.Rate.Limit != 5000 || resp.Rate.Remaining != 4999 {
		t.Fatalf("repo %v rate %+v", repo.GetDefaultBranch(), resp.Rate)
	}
	// A repository outside the installation is hidden.
	other := f.sim.AddRepo(nil, "other/secret", "main")
	_ = other
	if _, resp, err := gh.Repositories.Get(ctx, "other", "secret"); err == nil || resp.StatusCode != 404 {
		t.Fatalf("out-of-installation repository: %v", err)
	}
	// Unauthenticated and forged credentials are refused.
	for _, auth := range []string{"", "token ghs_forged", "Bearer a.b.c"} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/repos/acme/app", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 401 || body["message"] == "" {
			t.Fatalf("auth %q: %d %v", auth, resp.StatusCode, body)
		}
	}
}

func TestCoreETagsAreFreeAndPerCredential(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	req, _ := gh.NewRequest("GET", "repos/acme/app", nil)
	resp, err := gh.Do(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	etag := resp.Header.Get("ETag")
	before := f.sim.Remaining(f.inst.ID)
	req, _ = gh.NewRequest("GET", "repos/acme/app", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = gh.Do(ctx, req, nil)
	if resp == nil || resp.StatusCode != 304 {
		t.Fatalf("conditional request: %v %v", resp, err)
	}
	if after := f.sim.Remaining(f.inst.ID); after != before {
		t.Fatalf("a 304 was charged: %d -> %d", before, after)
	}
	if c := f.sim.Calls(f.inst.ID); c.NotModified != 1 {
		t.Fatalf("calls %+v", c)
	}
}

func TestCoreRateLimitAndFaults(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	f.sim.SetRemaining(f.inst.ID, 0)
	// The simulator answers 403 with x-ratelimit-remaining: 0; warden's
	// access layer turns that into a RateLimitedError.
	_, _, err := gh.Repositories.Get(ctx, "acme", "app")
	if rl, ok := app.IsRateLimited(err); !ok || rl.Secondary {
		t.Fatalf("exhausted budget not seen as a primary rate limit: %T %v", err, err)
	}
	f.sim.SetRemaining(f.inst.ID, 100)
	// A fresh client: go-github remembers the exhausted budget until reset.
	a2, _ := app.New(app.Config{AppID: f.sim.AppID(), PrivateKey: f.sim.PrivateKeyPEM(), BaseURL: f.srv.URL + "/", Retries: -1, MaxWait: -1})
	gh, _ = a2.Installation(f.inst.ID)
	f.sim.SecondaryLimitNext(1, 403, 30, "GET", "/repos/")
	_, _, err = gh.Repositories.Get(ctx, "acme", "app")
	if rl, ok := app.IsRateLimited(err); !ok || !rl.Secondary || time.Until(rl.Reset) < 20*time.Second {
		t.Fatalf("secondary limit (Retry-After 30): %T %v", err, err)
	}
	a3, _ := app.New(app.Config{AppID: f.sim.AppID(), PrivateKey: f.sim.PrivateKeyPEM(), BaseURL: f.srv.URL + "/", Retries: -1, MaxWait: -1})
	gh, _ = a3.Installation(f.inst.ID)
	f.sim.FailNext(1, 502, "GET", "/repos/")
	if _, resp, err := gh.Repositories.Get(ctx, "acme", "app"); err == nil || resp.StatusCode != 502 {
		t.Fatalf("injected 502: %v", err)
	}
	if _, _, err = gh.Repositories.Get(ctx, "acme", "app"); err != nil {
		t.Fatalf("after the fault: %v", err)
	}
}

func TestCoreWebhooksSignedAndLogged(t *testing.T) {
	f := newFixture(t)
	f.flush(t)
	f.mu.Lock()
	got := append([]received(nil), f.got...)
	f.mu.Unlock()
	if len(got) != 2 || got[0].event != "installation" || got[1].event != "installation_repositories" {
		t.Fatalf("deliveries %v", got)
	}
	for _, g := range got {
		if !g.sigOK || !strings.HasPrefix(g.header.Get("User-Agent"), "GitHub-Hookshot/") || g.header.Get("X-Hub-Signature") == "" {
			t.Fatalf("delivery %s headers %v", g.id, g.header)
		}
	}
	ctx := context.Background()
	rows, _, err := f.app.AppClient().Apps.ListHookDeliveries(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].GetEvent() != "installation_repositories" || rows[0].GetStatus() != "OK" {
		t.Fatalf("log %v", rows)
	}
	// Redelivery keeps the guid and is marked.
	f.sim.DropDeliveries(true)
	f.sim.AddRepo(f.inst, "acme/two", "main")
	f.flush(t)
	f.sim.DropDeliveries(false)
	rows, _, _ = f.app.AppClient().Apps.ListHookDeliveries(ctx, nil)
	if rows[0].GetStatus() == "OK" {
		t.Fatalf("dropped delivery logged OK: %v", rows[0])
	}
	_, _, err = f.app.AppClient().Apps.RedeliverHookDelivery(ctx, rows[0].GetID())
	if err != nil && !strings.Contains(err.Error(), "job scheduled") {
		t.Fatalf("redeliver: %v", err)
	}
	f.flush(t)
	f.mu.Lock()
	last := f.got[len(f.got)-1]
	f.mu.Unlock()
	if last.id != rows[0].GetGUID() {
		t.Fatalf("redelivered guid %s, want %s", last.id, rows[0].GetGUID())
	}
}
