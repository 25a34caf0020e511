package mirror

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

var _ ReportSink = (*Reports)(nil)

const reportStatus = "https://warden.example/status"

// countingRT records every repository request warden makes ("METHOD path
// status"), after its answer arrived.
type countingRT struct {
	base  http.RoundTripper
	mu    sync.Mutex
	calls []string
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if strings.HasPrefix(req.URL.Path, "/repos/") {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		c.mu.Lock()
		c.calls = append(c.calls, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, status))
		c.mu.Unlock()
	}
	return resp, err
}

// take returns the calls recorded since the last take.
func (c *countingRT) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

type reportEnv struct {
	t      *testing.T
	ctx    context.Context
	sim    *ghsim.Sim
	ghRepo *ghsim.Repo
	repo   store.Repo
	rt     *countingRT
	clock  *clock.Manual
	r      *Reports
	rows   *store.ReportRows
	dry    atomic.Bool
	human  *ghsim.Actor
}

func newReportEnv(t *testing.T) *reportEnv {
	t.Helper()
	ctx := context.Background()
	clock := clock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	sim, err := ghsim.New(ghsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	t.Cleanup(func() { srv.Close(); sim.Close() })
	inst := sim.Install("acme", "installer")
	ghRepo := sim.AddRepo(inst, "acme/app", "main")
	rt := &countingRT{base: http.DefaultTransport}
	a, err := app.New(app.Config{AppID: sim.AppID(), PrivateKey: sim.PrivateKeyPEM(), BaseURL: srv.URL + "/",
		Transport: rt, Retries: -1, MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "reports.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	st := testStore(t, d)
	r, err := OpenReports(st, a, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e := &reportEnv{t: t, ctx: ctx, sim: sim, ghRepo: ghRepo, rt: rt, r: r, rows: st.Reports,
		clock: clock,
		repo:  store.Repo{ID: ghRepo.ID, FullName: "acme/app", Installation: inst.ID, DefaultBranch: "main"}}
	r.Now, r.StatusHint, r.Bot = e.clock.Now, reportStatus, sim.BotLogin
	r.Settings = func(context.Context, store.Repo) gating.Settings {
		s := gating.DefaultSettings()
		s.DryRun = e.dry.Load()
		return s
	}
	e.human = sim.As("alice")
	sim.SetRole(ghRepo, "alice", "admin")
	return e
}

// issue opens an issue and returns its number.
func (e *reportEnv) issue() int {
	e.t.Helper()
	i, err := e.human.OpenIssue(e.ghRepo, "An item", "spec")
	if err != nil {
		e.t.Fatal(err)
	}
	return i.Number
}

// comments returns the bodies of the issue's comments by id, and their ids
// in order.
func (e *reportEnv) comments(n int) (ids []int64, bodies map[int64]string, authors map[int64]string) {
	bodies, authors = map[int64]string{}, map[int64]string{}
	e.sim.Locked(func() {
		for _, id := range e.ghRepo.Issues[n].CommentIDs {
			c := e.ghRepo.Comments[id]
			ids = append(ids, id)
			bodies[id], authors[id] = c.Body, c.User.Login
		}
	})
	return ids, bodies, authors
}

// only returns the issue's one comment, failing when there is not exactly one.
func (e *reportEnv) only(n int) (int64, string) {
	e.t.Helper()
	ids, bodies, authors := e.comments(n)
	if len(ids) != 1 {
		e.t.Fatalf("issue %d has %d comments, want 1", n, len(ids))
	}
	if authors[ids[0]] != e.sim.BotLogin() {
		e.t.Errorf("comment by %s, want warden's bot %s", authors[ids[0]], e.sim.BotLogin())
	}
	return ids[0], bodies[ids[0]]
}

func (e *reportEnv) publish(n int, want string, fs ...gating.ReportFinding) {
	e.t.Helper()
	out, err := e.r.Publish(e.ctx, e.repo, n, fs)
	if err != nil {
		e.t.Fatalf("Publish: %v", err)
	}
	if out != want {
		e.t.Fatalf("Publish: %q, want %q", out, want)
	}
}

func (e *reportEnv) expectCalls(want ...string) {
	e.t.Helper()
	got := e.rt.take()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		e.t.Fatalf("GitHub calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (e *reportEnv) flush(want int) {
	e.t.Helper()
	n, err := e.r.Flush(e.ctx)
	if err != nil {
		e.t.Fatalf("Flush: %v", err)
	}
	if n != want {
		e.t.Fatalf("Flush wrote %d, want %d", n, want)
	}
}

func (e *reportEnv) row(n int) (pending bool, dueAt int64, body string) {
	e.t.Helper()
	w, found, err := e.rows.Get(e.ctx, e.repo.ID, n)
	if err != nil {
		e.t.Fatal(err)
	}
	if !found {
		e.t.Fatalf("no report row for %d", n)
	}
	return w.Pending, w.DueAt, w.Body
}

// setRow edits the item's stored row in place (as another writer would).
func (e *reportEnv) setRow(n int, edit func(w *store.ReportRow)) {
	e.t.Helper()
	err := e.rows.Update(e.ctx, e.repo, n, false, e.clock.Now, func(w *store.ReportRow, _ int64) (bool, error) {
		if w == nil {
			return false, fmt.Errorf("no report row for %d", n)
		}
		edit(w)
		return true, nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *reportEnv) commentID(n int) int64 {
	e.t.Helper()
	id, err := e.r.CommentID(e.ctx, e.repo.ID, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

var (
	fCycle   = gating.ReportFinding{Code: "cycle", Detail: "issue-1 -> issue-2 -> issue-1"}
	fForged  = gating.ReportFinding{Code: "forged-marker", Detail: "comment 9 by @mallory starts with a claim marker; fixes #1"}
	fUnknown = gating.ReportFinding{Code: "unknown-state", Detail: "state:done is not a recognised state"}
)

func TestReportFirstFindingCreates(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.rt.take()

	e.publish(n, ReportNotNeeded)
	e.expectCalls()
	if id := e.commentID(n); id != 0 {
		t.Fatalf("CommentID %d before any finding", id)
	}

	e.publish(n, ReportCreated, fForged, fCycle)
	e.expectCalls(fmt.Sprintf("POST /repos/acme/app/issues/%d/comments 201", n))
	id, body := e.only(n)
	if first, _, _ := strings.Cut(body, "\n"); first != fmt.Sprintf("<!-- backlog-warden: report item=issue-%d -->", n) {
		t.Errorf("first line %q", first)
	}
	if want := gating.RenderReportComment(gating.IDFor(n), []gating.ReportFinding{fForged, fCycle}, nil, reportStatus); body != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	if strings.Contains(body, "@mallory") || strings.Contains(body, "#1") {
		t.Errorf("hostile detail not defused:\n%s", body)
	}
	if got := e.commentID(n); got != id {
		t.Errorf("CommentID %d, want %d", got, id)
	}
	if p, _, _ := e.row(n); p {
		t.Errorf("pending after a write")
	}
}

func TestReportCoalescedAndFlush(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.publish(n, ReportCreated, fCycle)
	created := e.clock.Now()
	id, _ := e.only(n)
	e.rt.take()

	e.clock.Advance(10 * time.Second)
	e.publish(n, ReportCoalesced, fCycle, fUnknown)
	e.expectCalls()
	pending, due, _ := e.row(n)
	if !pending || due != created.Add(ReportInterval).UnixMilli() {
		t.Fatalf("pending %v due %d, want pending due %d", pending, due, created.Add(ReportInterval).UnixMilli())
	}
	e.clock.Advance(10 * time.Second)
	e.publish(n, ReportCoalesced, fCycle, fUnknown, fForged) // a third change joins the same edit
	e.expectCalls()
	if _, body := e.only(n); strings.Contains(body, "unknown-state") {
		t.Fatalf("a coalesced edit reached GitHub early")
	}

	e.clock.Advance(39 * time.Second) // 59s after the write
	e.flush(0)
	e.expectCalls()

	e.clock.Advance(time.Second)
	e.flush(1)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", id))
	_, body := e.only(n)
	if want := gating.RenderReportComment(gating.IDFor(n), []gating.ReportFinding{fCycle, fUnknown, fForged}, nil, reportStatus); body != want {
		t.Errorf("flushed body\n%s\nwant\n%s", body, want)
	}
	e.flush(0)
	e.expectCalls()
	if p, _, _ := e.row(n); p {
		t.Errorf("still pending after the flush")
	}
}

func TestReportUnchanged(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.publish(n, ReportCreated, fCycle, fForged)
	e.rt.take()
	for _, step := range []time.Duration{time.Second, 2 * time.Minute} {
		e.clock.Advance(step)
		e.publish(n, ReportUnchanged, fForged, fCycle, fCycle) // same set: other order, a duplicate
		e.expectCalls()
	}
	// A change reverted inside the minute leaves nothing pending.
	e.clock.Advance(time.Minute)
	e.publish(n, ReportEdited, fCycle)
	e.clock.Advance(time.Second)
	e.publish(n, ReportCoalesced, fCycle, fUnknown)
	e.publish(n, ReportUnchanged, fCycle)
	if p, _, _ := e.row(n); p {
		t.Errorf("pending after the change was reverted")
	}
	e.clock.Advance(time.Minute)
	e.flush(0)
	id, _ := e.only(n)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", id))
}

func TestReportResolvedIsKept(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.publish(n, ReportCreated, fCycle)
	id, _ := e.only(n)
	e.rt.take()
	e.clock.Advance(2 * time.Minute)
	e.publish(n, ReportEdited)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", id))
	got, body := e.only(n)
	if got != id || !strings.Contains(body, "No open findings") || strings.Contains(body, "cycle") {
		t.Errorf("comment %d (want %d) after every finding resolved:\n%s", got, id, body)
	}
	e.clock.Advance(2 * time.Minute)
	e.publish(n, ReportUnchanged)
	e.expectCalls()
}

func TestReportDeletedIsRecreated(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.publish(n, ReportCreated, fCycle)
	old, _ := e.only(n)
	if err := e.human.DeleteComment(e.ghRepo, old); err != nil {
		t.Fatal(err)
	}
	e.rt.take()
	e.clock.Advance(2 * time.Minute)
	e.publish(n, ReportRecreated, fCycle, fUnknown)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 404", old),
		fmt.Sprintf("POST /repos/acme/app/issues/%d/comments 201", n))
	id, body := e.only(n)
	if id == old || e.commentID(n) != id || !strings.Contains(body, "unknown-state") {
		t.Errorf("recreated comment %d (old %d, recorded %d):\n%s", id, old, e.commentID(n), body)
	}
	// Refresh restores a comment deleted while nothing changed.
	if err := e.human.DeleteComment(e.ghRepo, id); err != nil {
		t.Fatal(err)
	}
	e.rt.take()
	e.clock.Advance(2 * time.Minute)
	if out, err := e.r.Refresh(e.ctx, e.repo, n); err != nil || out != ReportRecreated {
		t.Fatalf("Refresh: %q %v", out, err)
	}
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 404", id),
		fmt.Sprintf("POST /repos/acme/app/issues/%d/comments 201", n))
	e.only(n)
}

func TestReportDryRun(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.rt.take()
	e.dry.Store(true)
	e.publish(n, ReportDryRun, fCycle)
	e.clock.Advance(2 * time.Minute)
	e.publish(n, ReportDryRun, fCycle, fUnknown)
	if out, err := e.r.Refuse(e.ctx, e.repo, n, "refused"); err != nil || out != ReportDryRun {
		t.Fatalf("Refuse: %q %v", out, err)
	}
	e.flush(0)
	e.expectCalls()
	if ids, _, _ := e.comments(n); len(ids) != 0 || e.commentID(n) != 0 {
		t.Fatalf("dry run wrote %d comments", len(ids))
	}
	if _, _, body := e.row(n); !strings.Contains(body, "unknown-state") || !strings.Contains(body, "refused") {
		t.Errorf("dry run did not store the rendered body:\n%s", body)
	}
	e.dry.Store(false)
	e.publish(n, ReportCreated, fCycle, fUnknown)
	e.expectCalls(fmt.Sprintf("POST /repos/acme/app/issues/%d/comments 201", n))
}

func TestReportRefuse(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.rt.take()
	out, err := e.r.Refuse(e.ctx, e.repo, n, "r1: `/backlog admit` by @bob refused: only a human with triage or more admits")
	if err != nil || out != ReportCreated {
		t.Fatalf("Refuse: %q %v", out, err)
	}
	e.expectCalls(fmt.Sprintf("POST /repos/acme/app/issues/%d/comments 201", n))
	id, body := e.only(n)
	if !strings.Contains(body, "No open findings") || !strings.Contains(body, "**Refused commands**") ||
		!strings.Contains(body, "by @\u200bbob refused") {
		t.Fatalf("body after a refusal:\n%s", body)
	}
	for i := 2; i <= 7; i++ {
		e.clock.Advance(time.Second)
		if out, err := e.r.Refuse(e.ctx, e.repo, n, fmt.Sprintf("r%d refused", i)); err != nil || out != ReportCoalesced {
			t.Fatalf("Refuse %d: %q %v", i, out, err)
		}
	}
	// Findings published later keep the refusals.
	e.publish(n, ReportCoalesced, fCycle)
	e.expectCalls()
	e.clock.Advance(time.Minute)
	e.flush(1)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", id))
	_, body = e.only(n)
	for i := 1; i <= 7; i++ {
		if has := strings.Contains(body, fmt.Sprintf("r%d", i)); has != (i >= 3) {
			t.Errorf("r%d shown %v; want the newest %d refusals:\n%s", i, has, ReportRefusals, body)
		}
	}
	if !strings.Contains(body, "cycle") {
		t.Errorf("finding missing:\n%s", body)
	}
	if _, err := e.r.Refuse(e.ctx, e.repo, n, "  "); err == nil {
		t.Errorf("an empty refusal line was accepted")
	}
}

func TestReportRefreshWritesAgain(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	if out, err := e.r.Refresh(e.ctx, e.repo, n); err != nil || out != ReportNotNeeded {
		t.Fatalf("Refresh with nothing: %q %v", out, err)
	}
	e.publish(n, ReportCreated, fCycle)
	id, _ := e.only(n)
	// A hand edit is put right by /backlog status.
	if _, err := e.human.EditComment(e.ghRepo, id, "tampered"); err != nil {
		t.Fatal(err)
	}
	e.rt.take()
	e.clock.Advance(10 * time.Second)
	if out, err := e.r.Refresh(e.ctx, e.repo, n); err != nil || out != ReportCoalesced {
		t.Fatalf("Refresh inside the minute: %q %v", out, err)
	}
	e.expectCalls()
	e.clock.Advance(time.Minute)
	e.flush(1)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", id))
	if _, body := e.only(n); !strings.HasPrefix(body, gating.ReportCommentStart) {
		t.Errorf("body not restored: %q", body)
	}
}

func TestReportFlushErrorKeepsPending(t *testing.T) {
	e := newReportEnv(t)
	a, b := e.issue(), e.issue()
	e.publish(a, ReportCreated, fCycle)
	e.publish(b, ReportCreated, fCycle)
	idA, _ := e.only(a)
	idB, _ := e.only(b)
	e.clock.Advance(time.Second)
	e.publish(a, ReportCoalesced, fUnknown)
	e.publish(b, ReportCoalesced, fUnknown)
	e.rt.take()
	e.sim.FailNext(1, http.StatusBadGateway, http.MethodPatch, fmt.Sprintf("/repos/acme/app/issues/comments/%d", idA))
	e.clock.Advance(time.Minute)
	n, err := e.r.Flush(e.ctx)
	if n != 1 || err == nil {
		t.Fatalf("Flush: %d %v; want 1 written and an error", n, err)
	}
	calls := strings.Join(e.rt.take(), "\n")
	if !strings.Contains(calls, fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 502", idA)) ||
		!strings.Contains(calls, fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", idB)) {
		t.Fatalf("calls:\n%s", calls)
	}
	if p, _, _ := e.row(a); !p {
		t.Fatalf("the failed edit is not pending")
	}
	e.flush(0) // not yet due again
	e.clock.Advance(reportRetry)
	e.flush(1)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", idA))
	if _, body := e.only(a); !strings.Contains(body, "unknown-state") {
		t.Errorf("retried edit missing:\n%s", body)
	}
}

func TestReportConcurrentCreate(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.publish(n, ReportNotNeeded) // warm the installation token
	e.rt.take()
	e.sim.SetLatency(30 * time.Millisecond) // the first writer is still at GitHub when the others decide
	const writers = 8
	outs := make([]string, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			fs := []gating.ReportFinding{fCycle}
			if i%2 == 1 {
				fs = append(fs, fUnknown)
			}
			outs[i], errs[i] = e.r.Publish(e.ctx, e.repo, n, fs)
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		switch outs[i] {
		case ReportCreated:
			created++
		case ReportBusy, ReportCoalesced, ReportUnchanged:
		default:
			t.Errorf("writer %d: %q", i, outs[i])
		}
	}
	if created != 1 {
		t.Errorf("%d writers created the comment, want 1 (%q)", created, outs)
	}
	calls := e.rt.take()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "POST ") {
		t.Errorf("calls %q, want one POST", calls)
	}
	e.sim.SetLatency(0)
	id, _ := e.only(n)
	// Whatever was desired last reaches GitHub at the next due flush.
	e.clock.Advance(ReportInterval)
	if _, err := e.r.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	_, _, want := e.row(n)
	if got, body := e.only(n); got != id || body != want {
		t.Errorf("after the flush comment %d (want %d) body\n%s\nwant\n%s", got, id, body, want)
	}
}

func TestReportCutComment(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	var fs []gating.ReportFinding
	for i := range 40 {
		fs = append(fs, gating.ReportFinding{Code: "unbacked-marker", Detail: fmt.Sprintf("%03d %s", i, strings.Repeat("€", 3000))})
	}
	e.publish(n, ReportCreated, fs...)
	_, body := e.only(n)
	if len([]rune(body)) > gating.MaxReportChars || !strings.Contains(body, "left out") || !strings.Contains(body, reportStatus) {
		t.Errorf("comment of %d runes, cut note present %v", len([]rune(body)), strings.Contains(body, "left out"))
	}
}

func TestReportLapsedLease(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	e.publish(n, ReportCreated, fCycle)
	id, _ := e.only(n)
	// Another writer took the lease and vanished before recording its write.
	e.clock.Advance(2 * time.Minute)
	until := e.clock.Now().Add(reportLease).UnixMilli()
	e.setRow(n, func(w *store.ReportRow) {
		w.LeaseOwner, w.LeaseUntil, w.Pending, w.DueAt = "gone", until, true, e.clock.Now().UnixMilli()
	})
	e.rt.take()
	e.publish(n, ReportBusy, fCycle, fUnknown)
	e.flush(0)
	e.clock.Advance(reportLease - time.Second)
	e.flush(0)
	e.expectCalls()
	e.clock.Advance(time.Second)
	e.flush(1)
	e.expectCalls(fmt.Sprintf("PATCH /repos/acme/app/issues/comments/%d 200", id))
	if _, body := e.only(n); !strings.Contains(body, "unknown-state") {
		t.Errorf("edit after the lapsed lease missing:\n%s", body)
	}
}

// A writer that created the comment and stopped before recording it (its
// lease lapses with no comment recorded): the next write finds that comment
// on GitHub and edits it, rather than post a second.
func TestReportLapsedCreateIsAdopted(t *testing.T) {
	for _, known := range []bool{true, false} {
		t.Run(fmt.Sprintf("own login known %v", known), func(t *testing.T) {
			e := newReportEnv(t)
			e.clock.Set(time.Now().UTC()) // GitHub's clock: comments are looked for by their times
			n := e.issue()
			e.publish(n, ReportCreated, fCycle)
			id, _ := e.only(n)
			e.setRow(n, func(w *store.ReportRow) {
				w.CommentID, w.WrittenHash, w.WrittenAt = 0, "", 0
				w.LeaseOwner, w.LeaseUntil = "gone", e.clock.Now().Add(reportLease).UnixMilli()
				w.Pending, w.DueAt = true, e.clock.Now().UnixMilli()
			})
			if !known {
				e.r.Bot = func() string { return "" }
			}
			e.rt.take()
			e.clock.Advance(reportLease + time.Second)
			_, err := e.r.Publish(e.ctx, e.repo, n, []gating.ReportFinding{fCycle, fUnknown})
			if !known {
				if err == nil || !strings.Contains(err.Error(), "own login is not known") {
					t.Fatalf("publish without warden's login: %v, want a refusal", err)
				}
				e.only(n) // still the one comment
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, body := e.only(n)
			if got != id || !strings.Contains(body, "unknown-state") {
				t.Fatalf("comment %d (want %d, edited): %s", got, id, body)
			}
			if e.commentID(n) != id {
				t.Errorf("recorded comment %d, want %d", e.commentID(n), id)
			}
			calls := e.rt.take()
			if len(calls) != 2 || !strings.HasPrefix(calls[0], "GET /repos/acme/app/issues/") || !strings.HasPrefix(calls[1], "PATCH ") {
				t.Errorf("calls %v, want one comments read and one edit", calls)
			}
		})
	}
}

func TestReportIssueGone(t *testing.T) {
	e := newReportEnv(t)
	n := e.issue()
	if err := e.human.DeleteIssue(e.ghRepo, n); err != nil {
		t.Fatal(err)
	}
	e.rt.take()
	e.publish(n, ReportIssueGone, fCycle)
	e.expectCalls(fmt.Sprintf("POST /repos/acme/app/issues/%d/comments 410", n)) // GitHub answers 410 Gone for a deleted issue
	if p, _, _ := e.row(n); p || e.commentID(n) != 0 {
		t.Errorf("pending %v, comment %d after the issue was found gone", p, e.commentID(n))
	}
	e.clock.Advance(time.Hour)
	e.flush(0)
	e.expectCalls()
}

func TestReportRejectsBadInput(t *testing.T) {
	e := newReportEnv(t)
	if _, err := e.r.Publish(e.ctx, e.repo, 0, []gating.ReportFinding{fCycle}); err == nil {
		t.Errorf("issue 0 accepted")
	}
	if _, err := e.r.Publish(e.ctx, store.Repo{ID: 1}, 3, []gating.ReportFinding{fCycle}); err == nil {
		t.Errorf("a repository without a name accepted")
	}
}
