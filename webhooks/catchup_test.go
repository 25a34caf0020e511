package webhooks_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/webhooks"
)

const catchUpSecret = "catch-up-secret"

// catchUpEnv is the simulator delivering to a real ingress and inbox, and
// the App's JWT client on the simulator.
type catchUpEnv struct {
	sim   *ghsim.Sim
	clk   *clock.Offset
	inbox *webhooks.Inbox
	app   *app.App
	repo  *ghsim.Repo
	alice *ghsim.Actor
	// swallow makes the receiver answer 200 without storing (an OK attempt
	// the inbox never saw).
	swallow atomic.Bool
	// lists counts GET /app/hook/deliveries requests.
	lists atomic.Int32
	// dsn names the inbox's database.
	dsn string
	// asks counts redelivery requests (POST /app/hook/deliveries/{id}/attempts).
	asks atomic.Int32
	// refuseAsk makes GitHub answer 502 to redelivery requests for this
	// delivery-log row.
	refuseAsk atomic.Int64
}

type countingTransport struct {
	e    *catchUpEnv
	base http.RoundTripper
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/app/hook/deliveries") {
		c.e.lists.Add(1)
	}
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/app/hook/deliveries/") && strings.HasSuffix(r.URL.Path, "/attempts") {
		c.e.asks.Add(1)
		if id := c.e.refuseAsk.Load(); id != 0 && strings.HasSuffix(r.URL.Path, "/"+strconv.FormatInt(id, 10)+"/attempts") {
			return &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"message":"Bad Gateway"}`)),
				Request: r}, nil
		}
	}
	return c.base.RoundTrip(r)
}

func handlesIssues(event string) bool { return event == "issues" }

func newCatchUpEnv(t *testing.T) *catchUpEnv {
	t.Helper()
	return newCatchUpEnvOn(t, "sqlite:"+filepath.Join(t.TempDir(), "inbox.db"))
}

// newCatchUpEnvOn is newCatchUpEnv with the inbox in the database dsn names.
func newCatchUpEnvOn(t *testing.T, dsn string) *catchUpEnv {
	t.Helper()
	ctx := context.Background()
	e := &catchUpEnv{clk: &clock.Offset{}, dsn: dsn}
	sim, err := ghsim.New(ghsim.Options{Now: e.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	t.Cleanup(func() { srv.Close(); sim.Close() })
	e.sim = sim
	d, err := db.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if e.inbox, err = webhooks.OpenInbox(ctx, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.inbox.Close)
	log := slog.New(slog.DiscardHandler)
	ing := webhooks.NewIngress(e.inbox, nil, log, webhooks.IngressOptions{
		Secrets: [][]byte{[]byte(catchUpSecret)}, Handles: handlesIssues})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.swallow.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		ing.ServeHTTP(w, r)
	}))
	t.Cleanup(recv.Close)
	sim.SetWebhook(recv.URL, catchUpSecret)
	if e.app, err = app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: srv.URL + "/",
		Transport: countingTransport{e, http.DefaultTransport}, Logger: log, RetryBase: time.Millisecond, MaxWait: time.Second}); err != nil {
		t.Fatal(err)
	}
	inst := sim.Install("acme", "alice")
	e.repo = sim.AddRepo(inst, "acme/app", "main")
	e.alice = sim.As("alice")
	sim.SetRole(e.repo, "alice", "admin")
	e.flush(t)
	return e
}

func (e *catchUpEnv) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.sim.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// open opens an issue and returns its "issues" delivery's guid.
func (e *catchUpEnv) open(t *testing.T, title string) string {
	t.Helper()
	if _, err := e.alice.OpenIssue(e.repo, title, "body"); err != nil {
		t.Fatal(err)
	}
	e.flush(t)
	log := e.sim.Deliveries()
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Event == "issues" && log[i].Action == "opened" {
			return log[i].GUID
		}
	}
	t.Fatal("no issues.opened delivery logged")
	return ""
}

func (e *catchUpEnv) catchUp(t *testing.T, o webhooks.CatchUpOptions) webhooks.CatchUpResult {
	t.Helper()
	res, err := webhooks.CatchUp(context.Background(), e.app.AppClient(), e.inbox, handlesIssues, o)
	if err != nil {
		t.Fatalf("catch-up: %v (result %+v)", err, res)
	}
	e.flush(t)
	return res
}

func (e *catchUpEnv) stored(t *testing.T, guids ...string) map[string]bool {
	t.Helper()
	m, err := e.inbox.Stored(context.Background(), guids)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// attempts counts the delivery log's rows for guid: all, and redeliveries.
func (e *catchUpEnv) attempts(guid string) (all, redeliveries int) {
	for _, d := range e.sim.Deliveries() {
		if d.GUID == guid {
			all++
			if d.Redelivery {
				redeliveries++
			}
		}
	}
	return all, redeliveries
}

// redeliver asks GitHub to redeliver attempt id (not through CatchUp).
func (e *catchUpEnv) redeliver(t *testing.T, id int64) {
	t.Helper()
	_, _, err := e.app.AppClient().Apps.RedeliverHookDelivery(context.Background(), id)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		t.Fatal(err)
	}
	e.flush(t)
}

func TestCatchUpRedeliversDroppedOnce(t *testing.T) {
	e := newCatchUpEnv(t)
	e.sim.DropDeliveries(true)
	lost := e.open(t, "lost while warden was down")
	// An event warden does not handle, lost too: not asked for again.
	if _, err := e.alice.Comment(e.repo, 1, "a comment"); err != nil {
		t.Fatal(err)
	}
	e.flush(t)
	e.sim.DropDeliveries(false)
	if e.stored(t, lost)[lost] {
		t.Fatal("a dropped delivery is in the inbox")
	}
	res := e.catchUp(t, webhooks.CatchUpOptions{})
	if res.Missing != 1 || res.Redelivered != 1 || res.Failed != 0 || res.TooOld != 0 {
		t.Errorf("result %+v, want 1 missing, 1 redelivered", res)
	}
	if !e.stored(t, lost)[lost] {
		t.Errorf("the redelivered %s is not in the inbox", lost)
	}
	if all, re := e.attempts(lost); all != 2 || re != 1 {
		t.Errorf("%s has %d attempts (%d redeliveries), want 2 (1)", lost, all, re)
	}
	for _, d := range e.sim.Deliveries() {
		if d.Event == "issue_comment" && d.Redelivery {
			t.Errorf("an unhandled event (issue_comment %s) was redelivered", d.GUID)
		}
	}
	// Now stored and OK: a second run asks for nothing.
	if res := e.catchUp(t, webhooks.CatchUpOptions{}); res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("second run %+v, want nothing missing or redelivered", res)
	}
	if all, _ := e.attempts(lost); all != 2 {
		t.Errorf("%s has %d attempts after a second run, want 2", lost, all)
	}
}

func TestCatchUpOneRedeliveryPerGUID(t *testing.T) {
	e := newCatchUpEnv(t)
	e.sim.DropDeliveries(true)
	lost := e.open(t, "lost twice")
	// GitHub's own retry (a redelivery) also failed: two failed rows.
	var id int64
	for _, d := range e.sim.Deliveries() {
		if d.GUID == lost {
			id = d.ID
		}
	}
	e.redeliver(t, id)
	e.flush(t)
	e.sim.DropDeliveries(false)
	if all, _ := e.attempts(lost); all != 2 {
		t.Fatalf("%s has %d failed attempts, want 2", lost, all)
	}
	res := e.catchUp(t, webhooks.CatchUpOptions{})
	if res.Missing != 1 || res.Redelivered != 1 {
		t.Errorf("result %+v, want 1 missing, 1 redelivered", res)
	}
	if all, re := e.attempts(lost); all != 3 || re != 2 {
		t.Errorf("%s has %d attempts (%d redeliveries), want 3 (2): one redelivery per run", lost, all, re)
	}
}

func TestCatchUpLeavesDelivered(t *testing.T) {
	e := newCatchUpEnv(t)
	ok := e.open(t, "delivered")
	if !e.stored(t, ok)[ok] {
		t.Fatalf("%s was delivered but is not stored", ok)
	}
	res := e.catchUp(t, webhooks.CatchUpOptions{})
	if res.Listed == 0 {
		t.Errorf("the delivery log was not read: %+v", res)
	}
	if res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("result %+v, want nothing missing or redelivered", res)
	}
	if all, _ := e.attempts(ok); all != 1 {
		t.Errorf("%s has %d attempts, want 1", ok, all)
	}
}

func TestCatchUpLeavesFailedThenOK(t *testing.T) {
	e := newCatchUpEnv(t)
	e.sim.DropDeliveries(true)
	g := e.open(t, "failed, then delivered")
	e.sim.DropDeliveries(false)
	// The retry reached a receiver that answered 200 without storing (say
	// another deployment): GitHub logs it OK, and that is final.
	e.swallow.Store(true)
	var id int64
	for _, d := range e.sim.Deliveries() {
		if d.GUID == g {
			id = d.ID
		}
	}
	e.redeliver(t, id)
	e.flush(t)
	e.swallow.Store(false)
	if e.stored(t, g)[g] {
		t.Fatal("the swallowed delivery is stored")
	}
	res := e.catchUp(t, webhooks.CatchUpOptions{})
	if res.Missing != 0 || res.Redelivered != 0 {
		t.Errorf("result %+v, want nothing missing or redelivered (an OK attempt exists)", res)
	}
	if all, _ := e.attempts(g); all != 2 {
		t.Errorf("%s has %d attempts, want 2", g, all)
	}
}

func TestCatchUpSkipsPastWindow(t *testing.T) {
	e := newCatchUpEnv(t)
	// The old deliveries happen three days and an hour ago.
	e.clk.Set(-(webhooks.RedeliveryWindow + time.Hour))
	e.sim.DropDeliveries(true)
	var old []string
	for i := range 4 {
		old = append(old, e.open(t, "old "+string(rune('a'+i))))
	}
	e.clk.Set(0)
	var fresh []string
	for i := range 3 {
		fresh = append(fresh, e.open(t, "fresh "+string(rune('a'+i))))
	}
	e.sim.DropDeliveries(false)
	e.lists.Store(0)
	res := e.catchUp(t, webhooks.CatchUpOptions{PerPage: 2})
	if res.Redelivered != 3 || res.Missing != 3 || res.Failed != 0 {
		t.Errorf("result %+v, want the 3 fresh deliveries alone redelivered", res)
	}
	if res.TooOld < 1 {
		t.Errorf("result %+v, want the old deliveries seen counted too old", res)
	}
	got := e.stored(t, fresh...)
	for _, g := range fresh {
		if !got[g] {
			t.Errorf("the fresh %s was not redelivered", g)
		}
	}
	for _, g := range old {
		if all, _ := e.attempts(g); all != 1 {
			t.Errorf("old %s has %d attempts, want 1 (past GitHub's window)", g, all)
		}
	}
	// Newest first at 2 a page: fresh, fresh | fresh, old | old, old | ...
	// Paging stops at the first page reaching past the window (the
	// second), not at the log's end.
	if n := e.lists.Load(); n != 2 {
		t.Errorf("%d pages read, want 2 (stop at the window)", n)
	}
}

func TestCatchUpPagesAndCaps(t *testing.T) {
	e := newCatchUpEnv(t)
	e.sim.DropDeliveries(true)
	var lost []string
	for i := range 5 {
		lost = append(lost, e.open(t, "lost "+string(rune('a'+i))))
	}
	e.sim.DropDeliveries(false)
	e.lists.Store(0)
	res := e.catchUp(t, webhooks.CatchUpOptions{PerPage: 2, MaxRedeliveries: 3})
	if res.Missing != 5 || res.Redelivered != 3 || res.Deferred != 2 {
		t.Errorf("first run %+v, want 5 missing, 3 redelivered, 2 deferred", res)
	}
	if n := e.lists.Load(); n < 3 {
		t.Errorf("%d pages read, want at least 3", n)
	}
	res = e.catchUp(t, webhooks.CatchUpOptions{PerPage: 2, MaxRedeliveries: 3})
	if res.Missing != 2 || res.Redelivered != 2 || res.Deferred != 0 {
		t.Errorf("second run %+v, want the 2 deferred redelivered", res)
	}
	got := e.stored(t, lost...)
	for _, g := range lost {
		if !got[g] {
			t.Errorf("%s was not redelivered", g)
		}
		if _, re := e.attempts(g); re != 1 {
			t.Errorf("%s redelivered %d times, want once", g, re)
		}
	}
}
