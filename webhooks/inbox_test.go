package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/db/dbtest"
)

// ---- helpers shared by the package's tests ----

// discardLogger is a logger that writes nowhere.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// pgSchemas, when not nil, makes openTestDB open PostgreSQL instead of
// SQLite: each distinct path gets a fresh schema of its own (so a test that
// reopens a path reopens the same schema). TestInboxPostgres sets it.
var pgSchemas map[string]string

// openTestDB opens a SQLite database file at path (or, under
// TestInboxPostgres, the PostgreSQL schema standing for path).
func openTestDB(t testing.TB, path string) *db.DB {
	t.Helper()
	dsn := "sqlite:" + path
	if pgSchemas != nil {
		if pgSchemas[path] == "" {
			pgSchemas[path] = dbtest.PostgresURL(t)
		}
		dsn = pgSchemas[path]
	}
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("db.Open: %v", err)
	}
	return d
}

// newTestInbox opens a fresh database in a temp dir and an inbox on it; both
// are closed when the test ends.
func newTestInbox(t testing.TB) (*db.DB, *Inbox) {
	t.Helper()
	d := openTestDB(t, filepath.Join(t.TempDir(), "w.db"))
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		d.Close()
		t.Fatalf("OpenInbox: %v", err)
	}
	t.Cleanup(func() {
		ib.Close()
		d.Close()
	})
	return d, ib
}

// counterValue reads a counter's current value. (prometheus/testutil is not
// usable here: it needs github.com/kylelemons/godebug, which is not in
// go.sum, and only test files may be added.)
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var pb dto.Metric
	if err := c.Write(&pb); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return pb.GetCounter().GetValue()
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// mustAccept stores one delivery and checks the result.
func mustAccept(t testing.TB, ib *Inbox, in Incoming, want AcceptResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := ib.Accept(ctx, in)
	if err != nil {
		t.Fatalf("Accept(%s): %v", in.ID, err)
	}
	if got != want {
		t.Fatalf("Accept(%s) = %s, want %s", in.ID, got, want)
	}
}

// incoming builds a delivery with a small JSON payload.
func incoming(id string) Incoming {
	return Incoming{ID: id, Event: "issues", Payload: []byte(`{"action":"opened"}`), ReceivedAt: time.Now()}
}

// records returns every inbox row keyed by delivery id.
func records(t testing.TB, ib *Inbox) map[string]Record {
	t.Helper()
	rs, err := ib.List(context.Background(), false, 100000)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := make(map[string]Record, len(rs))
	for _, r := range rs {
		if _, dup := out[r.ID]; dup {
			t.Fatalf("delivery %s listed twice", r.ID)
		}
		out[r.ID] = r
	}
	return out
}

// record returns one delivery's row, failing the test if it is absent.
func record(t testing.TB, ib *Inbox, id string) Record {
	t.Helper()
	r, ok := records(t, ib)[id]
	if !ok {
		t.Fatalf("delivery %s is not in the inbox", id)
	}
	return r
}

// dueAt is what a dispatcher could start at now: the pending deliveries
// read through the inbox's queue (Inbox.queuedSince, the dispatcher's own
// read) that are due at now and come after seq after, in receipt order, at
// most limit.
func dueAt(ib *Inbox, now time.Time, after int64, limit int) ([]Queued, error) {
	var out []Queued
	var from int64
	for {
		qs, err := ib.queuedSince(context.Background(), from, syncPage)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			if q.Seq > after && !q.Due.After(now) {
				out = append(out, q)
			}
			from = q.Queued
		}
		if len(qs) < syncPage {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out[:min(limit, len(out))], nil
}

// ---- inbox tests ----

func TestInboxConcurrentAcceptGroupCommits(t *testing.T) {
	_, ib := newTestInbox(t)
	var batches atomic.Int64
	ib.OnCommit(func() { batches.Add(1) })

	const n = 200
	start := make(chan struct{})
	results := make([]AcceptResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			results[i], errs[i] = ib.Accept(ctx, incoming(fmt.Sprintf("burst-%03d", i)))
		}()
	}
	close(start)
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Accept #%d: %v", i, errs[i])
		}
		if results[i] != Stored {
			t.Errorf("Accept #%d = %s, want stored", i, results[i])
		}
	}
	rs := records(t, ib)
	if len(rs) != n {
		t.Fatalf("inbox holds %d rows, want %d", len(rs), n)
	}
	seqs := map[int64]bool{}
	for i := range n {
		r, ok := rs[fmt.Sprintf("burst-%03d", i)]
		if !ok {
			t.Fatalf("burst-%03d missing", i)
		}
		if r.State != StatePending || r.Attempts != 0 {
			t.Errorf("%s: state %s attempts %d, want pending 0", r.ID, r.State, r.Attempts)
		}
		if seqs[r.Seq] {
			t.Errorf("seq %d used twice", r.Seq)
		}
		seqs[r.Seq] = true
	}
	b := batches.Load()
	if b < 1 || b >= n {
		t.Fatalf("%d commits for %d concurrent deliveries: want at least one and fewer than %d (group commit)", b, n, n)
	}
	t.Logf("%d deliveries in %d commits", n, b)
}

func TestInboxDuplicateIDsInOneBurst(t *testing.T) {
	_, ib := newTestInbox(t)
	const n = 50
	start := make(chan struct{})
	var stored, dup, other atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := ib.Accept(context.Background(), incoming("same-id"))
			switch {
			case err != nil:
				t.Errorf("Accept: %v", err)
			case r == Stored:
				stored.Add(1)
			case r == Duplicate:
				dup.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if stored.Load() != 1 || dup.Load() != n-1 || other.Load() != 0 {
		t.Fatalf("stored=%d duplicate=%d other=%d, want 1, %d, 0", stored.Load(), dup.Load(), other.Load(), n-1)
	}
	if rs := records(t, ib); len(rs) != 1 {
		t.Fatalf("%d rows, want 1", len(rs))
	}
}

func TestInboxDueOrder(t *testing.T) {
	_, ib := newTestInbox(t)
	ctx := context.Background()
	now := time.Now()
	// Received out of order: c claims the earliest receipt time, a the latest.
	mustAccept(t, ib, Incoming{ID: "a", Event: "issues", Payload: []byte(`{}`), ReceivedAt: now.Add(-1 * time.Second)}, Stored)
	mustAccept(t, ib, Incoming{ID: "b", Event: "push", Payload: []byte(`{}`), ReceivedAt: now.Add(-2 * time.Second)}, Stored)
	mustAccept(t, ib, Incoming{ID: "c", Event: "issues", Payload: []byte(`{}`), ReceivedAt: now.Add(-3 * time.Second)}, Stored)
	mustAccept(t, ib, Incoming{ID: "d", Event: "issues", Payload: []byte(`{}`), ReceivedAt: now.Add(-4 * time.Second)}, Stored)

	ids := func(ps []Queued) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.ID)
		}
		return strings.Join(s, ",")
	}
	due, err := dueAt(ib, now, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(due); got != "a,b,c,d" {
		t.Fatalf("Due = %s, want a,b,c,d (receipt order is seq, not received_at)", got)
	}
	for i := 1; i < len(due); i++ {
		if due[i].Seq <= due[i-1].Seq {
			t.Fatalf("Due not ordered by seq: %+v", due)
		}
	}
	if due[1].Event != "push" || due[0].Attempts != 0 {
		t.Fatalf("Due row fields wrong: %+v", due[:2])
	}
	// The limit applies in order.
	if due2, _ := dueAt(ib, now, 0, 2); ids(due2) != "a,b" {
		t.Fatalf("Due(limit 2) = %s, want a,b", ids(due2))
	}

	// b fails and is retried in a minute: not due now, due then, and in seq order.
	if err := ib.Fail(ctx, &Claim{Seq: due[1].Seq}, "boom", now.Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	if due, _ = dueAt(ib, now, 0, 10); ids(due) != "a,c,d" {
		t.Fatalf("Due(now) = %s, want a,c,d", ids(due))
	}
	if due, _ = dueAt(ib, now.Add(2*time.Minute), 0, 10); ids(due) != "a,b,c,d" {
		t.Fatalf("Due(now+2m) = %s, want a,b,c,d", ids(due))
	}
	if due[1].Attempts != 1 {
		t.Fatalf("b attempts = %d, want 1", due[1].Attempts)
	}
	// A delivery received "in the future" is not due before its time.
	mustAccept(t, ib, Incoming{ID: "e", Event: "issues", Payload: []byte(`{}`), ReceivedAt: now.Add(time.Hour)}, Stored)
	if due, _ = dueAt(ib, now, 0, 10); ids(due) != "a,c,d" {
		t.Fatalf("Due(now) = %s, want a,c,d", ids(due))
	}
}

// TestInboxComplete: Complete marks a pending delivery done once, with its
// outcome; the routing facts were recorded at acceptance; a delivery no
// longer pending is left as it is.
func TestInboxComplete(t *testing.T) {
	_, ib := newTestInbox(t)
	ctx := context.Background()
	mustAccept(t, ib, Incoming{ID: "x", Event: "issues", ReceivedAt: time.Now(), Payload: []byte(`{"action":"opened",
		"installation":{"id":7},"repository":{"id":3,"full_name":"o/r"},"issue":{"number":12},"sender":{"login":"alice"}}`)}, Stored)
	seq := record(t, ib, "x").Seq
	if r := record(t, ib, "x"); r.Repo != "o/r" || r.Number != 12 || r.Sender != "alice" || r.Action != "opened" {
		t.Fatalf("routing facts not recorded at acceptance: %+v", r)
	}

	if err := ib.Complete(ctx, &Claim{Seq: seq}, "labelled"); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	r := record(t, ib, "x")
	if r.State != StateDone || r.Attempts != 1 || r.Outcome != "labelled" || r.Repo != "o/r" || r.Number != 12 || r.Sender != "alice" || r.Action != "opened" {
		t.Fatalf("after Complete: %+v", r)
	}

	// Completing it again: ErrNotPending, and the row is unchanged.
	if err := ib.Complete(ctx, &Claim{Seq: seq}, "again"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("Complete on a done delivery = %v, want ErrNotPending", err)
	}
	if r := record(t, ib, "x"); r.Attempts != 1 || r.Outcome != "labelled" {
		t.Fatalf("done row changed: %+v", r)
	}
	// Fail on a done delivery is refused too.
	if err := ib.Fail(ctx, &Claim{Seq: seq}, "late", time.Now(), true); !errors.Is(err, ErrNotPending) {
		t.Fatalf("Fail on a done delivery = %v, want ErrNotPending", err)
	}
	// And so is an unknown seq.
	if err := ib.Complete(ctx, &Claim{Seq: seq + 1000}, "x"); !errors.Is(err, ErrNotPending) {
		t.Fatalf("Complete on unknown seq = %v, want ErrNotPending", err)
	}
}

func TestInboxFailAndDeadLetters(t *testing.T) {
	_, ib := newTestInbox(t)
	ctx := context.Background()
	mustAccept(t, ib, incoming("f"), Stored)
	seq := record(t, ib, "f").Seq
	long := strings.Repeat("e", 5000)
	if err := ib.Fail(ctx, &Claim{Seq: seq}, long, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	r := record(t, ib, "f")
	if r.State != StatePending || r.Attempts != 1 || len(r.LastError) != 2000 {
		t.Fatalf("after a retryable failure: state %s attempts %d len(last_error) %d", r.State, r.Attempts, len(r.LastError))
	}
	if err := ib.Fail(ctx, &Claim{Seq: seq}, "final", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	dead, err := ib.List(ctx, true, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != "f" || dead[0].Attempts != 2 || dead[0].LastError != "final" {
		t.Fatalf("dead letters = %+v", dead)
	}
	pending, nDead, err := ib.Counts(ctx)
	if err != nil || pending != 0 || nDead != 1 {
		t.Fatalf("Counts = %d, %d, %v; want 0, 1", pending, nDead, err)
	}
	// A dead letter is not due.
	if due, _ := dueAt(ib, time.Now().Add(time.Hour), 0, 10); len(due) != 0 {
		t.Fatalf("a dead letter is due: %+v", due)
	}
	// A redelivery re-queues it.
	mustAccept(t, ib, incoming("f"), Requeued)
	if r := record(t, ib, "f"); r.State != StatePending || r.Attempts != 0 || r.LastError != "" {
		t.Fatalf("after redelivery: %+v", r)
	}
	mustAccept(t, ib, incoming("f"), Duplicate)
}

func TestInboxRetryAllOrNothing(t *testing.T) {
	_, ib := newTestInbox(t)
	ctx := context.Background()
	for _, id := range []string{"dead1", "dead2", "pend", "done"} {
		mustAccept(t, ib, incoming(id), Stored)
	}
	rs := records(t, ib)
	for _, id := range []string{"dead1", "dead2"} {
		if err := ib.Fail(ctx, &Claim{Seq: rs[id].Seq}, "gave up", time.Now(), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := ib.Complete(ctx, &Claim{Seq: rs["done"].Seq}, "handled"); err != nil {
		t.Fatal(err)
	}
	snapshot := records(t, ib)

	bad := []struct {
		name    string
		ids     []string
		mention []string
	}{
		{"none", nil, nil},
		{"unknown", []string{"nope"}, []string{"nope"}},
		{"dead and unknown", []string{"dead1", "nope"}, []string{"nope"}},
		{"dead and pending", []string{"dead1", "pend"}, []string{"pend"}},
		{"dead and done", []string{"dead2", "done"}, []string{"done"}},
		{"unknown first", []string{"ghost", "dead1", "dead2"}, []string{"ghost"}},
		{"several bad", []string{"x1", "dead1", "pend"}, []string{"x1", "pend"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := ib.Retry(ctx, tc.ids)
			if err == nil {
				t.Fatalf("Retry(%v) succeeded, want refusal", tc.ids)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %q", err, m)
				}
			}
			now := records(t, ib)
			for id, before := range snapshot {
				after := now[id]
				if after.State != before.State || after.Attempts != before.Attempts || after.LastError != before.LastError ||
					!after.NextTry.Equal(before.NextTry) {
					t.Errorf("%s changed by a refused Retry: %+v -> %+v", id, before, after)
				}
			}
		})
	}

	if err := ib.Retry(ctx, []string{"dead1", "dead2"}); err != nil {
		t.Fatalf("Retry of dead letters: %v", err)
	}
	for _, id := range []string{"dead1", "dead2"} {
		if r := record(t, ib, id); r.State != StatePending || r.Attempts != 0 || r.LastError != "" {
			t.Fatalf("%s after Retry: %+v", id, r)
		}
	}
	if due, _ := dueAt(ib, time.Now().Add(time.Second), 0, 10); len(due) != 3 {
		t.Fatalf("after Retry %d due, want 3 (pend, dead1, dead2)", len(due))
	}
	// Retrying them again is refused: they are no longer dead.
	if err := ib.Retry(ctx, []string{"dead1"}); err == nil {
		t.Fatal("Retry of a pending delivery succeeded")
	}
}

func TestInboxPrune(t *testing.T) {
	_, ib := newTestInbox(t)
	ctx := context.Background()
	for _, id := range []string{"old", "new", "pend", "dead"} {
		mustAccept(t, ib, incoming(id), Stored)
	}
	rs := records(t, ib)
	if err := ib.Complete(ctx, &Claim{Seq: rs["old"].Seq}, "handled"); err != nil {
		t.Fatal(err)
	}
	if err := ib.Fail(ctx, &Claim{Seq: rs["dead"].Seq}, "x", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(20 * time.Millisecond)
	if err := ib.Complete(ctx, &Claim{Seq: rs["new"].Seq}, "handled"); err != nil {
		t.Fatal(err)
	}
	n, err := ib.Prune(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("Prune removed %d rows, want 1", n)
	}
	left := records(t, ib)
	var ids []string
	for id := range left {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "dead,new,pend" {
		t.Fatalf("after Prune: %v, want dead,new,pend", ids)
	}
	// A far cutoff removes every done row, never pending or dead ones.
	if n, _ := ib.Prune(ctx, time.Now().Add(24*time.Hour)); n != 1 {
		t.Fatalf("second Prune removed %d, want 1", n)
	}
	if left := records(t, ib); len(left) != 2 || left["pend"].ID == "" || left["dead"].ID == "" {
		t.Fatalf("after second Prune: %v", left)
	}
	// A pruned id no longer de-duplicates.
	mustAccept(t, ib, incoming("old"), Stored)
}

func TestInboxAcceptAfterClose(t *testing.T) {
	d := openTestDB(t, filepath.Join(t.TempDir(), "w.db"))
	defer d.Close()
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	mustAccept(t, ib, incoming("before"), Stored)
	ib.Close()
	ib.Close() // idempotent
	if _, err := ib.Accept(context.Background(), incoming("after")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Accept after Close = %v, want ErrClosed", err)
	}
	var n int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox WHERE delivery_id = 'after'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("delivery accepted after Close was stored (n=%d, err=%v)", n, err)
	}
}

// pausingCtx is a context whose first Done call blocks until release is
// closed. Accept evaluates ctx.Done() when it enters the select that queues
// the request, after its "already closed?" check: the pause holds Accept in
// the window between the two, deterministically.
type pausingCtx struct {
	context.Context
	once    sync.Once
	paused  chan struct{} // closed when Done is first called
	release chan struct{}
	expired chan struct{} // Done's channel: closed by the test when it gives up
}

func (c *pausingCtx) Done() <-chan struct{} {
	c.once.Do(func() {
		close(c.paused)
		<-c.release
	})
	return c.expired
}

func (c *pausingCtx) Err() error {
	select {
	case <-c.expired:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestInboxAcceptRacingCloseReturns: an Accept that is under way while the
// inbox closes must come back with ErrClosed (or stored), not wait for its
// context to end. Accept checks ib.closing, then selects between queueing the
// request and ib.closing; when Close has completed in between, both cases are
// ready, select picks at random, and a request queued after the writer
// stopped is never answered. Repeated so that the random pick hits it.
func TestInboxAcceptRacingCloseReturns(t *testing.T) {
	d := openTestDB(t, filepath.Join(t.TempDir(), "w.db"))
	defer d.Close()
	for round := range 16 {
		ib, err := OpenInbox(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		ctx := &pausingCtx{Context: context.Background(), paused: make(chan struct{}),
			release: make(chan struct{}), expired: make(chan struct{})}
		type res struct {
			r   AcceptResult
			err error
		}
		done := make(chan res, 1)
		go func() {
			r, err := ib.Accept(ctx, incoming(fmt.Sprintf("race-%d", round)))
			done <- res{r, err}
		}()
		<-ctx.paused // Accept passed its closed check and is entering the queueing select
		ib.Close()   // the writer has stopped when Close returns
		close(ctx.release)
		select {
		case r := <-done:
			if r.err != nil && !errors.Is(r.err, ErrClosed) {
				t.Fatalf("round %d: Accept racing Close = %v, want ErrClosed", round, r.err)
			}
		case <-time.After(500 * time.Millisecond):
			close(ctx.expired)
			r := <-done
			t.Fatalf("round %d: Accept racing Close did not return until its context ended (then: %v); "+
				"its request was queued after the writer had stopped and nobody answers it", round, r.err)
		}
	}
}

// TestInboxBadDeliveryDoesNotFailItsBatch: one delivery the database refuses
// (a nil payload binds as NULL into a NOT NULL column) must not make the
// other deliveries committed in the same group fail.
func TestInboxBadDeliveryDoesNotFailItsBatch(t *testing.T) {
	d, ib := newTestInbox(t)
	ctx := context.Background()
	// Hold the single write connection so that the writer blocks and the
	// next deliveries queue up into one batch. (On PostgreSQL the write pool
	// has several connections: narrow it to one for this test.)
	if d.Dialect == db.Postgres {
		d.Write.SetMaxOpenConns(1)
	}
	conn, err := d.Write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		r   AcceptResult
		err error
	}
	first := make(chan res, 1)
	go func() {
		r, err := ib.Accept(ctx, incoming("first"))
		first <- res{r, err}
	}()
	time.Sleep(50 * time.Millisecond) // let the writer take it and block in BeginTx
	waitFor(t, 5*time.Second, "the writer to take the first delivery", func() bool { return len(ib.reqs) == 0 })
	bad, good := make(chan res, 1), make(chan res, 1)
	go func() {
		r, err := ib.Accept(ctx, Incoming{ID: "nil-payload", Event: "issues", ReceivedAt: time.Now()})
		bad <- res{r, err}
	}()
	// Queued, or (should Accept validate its input) already refused.
	waitFor(t, 5*time.Second, "the bad delivery to queue", func() bool { return len(ib.reqs)+len(bad) == 1 })
	go func() {
		r, err := ib.Accept(ctx, incoming("good"))
		good <- res{r, err}
	}()
	waitFor(t, 5*time.Second, "the good delivery to queue", func() bool { return len(ib.reqs)+len(bad) == 2 })
	conn.Close()

	if r := <-first; r.err != nil || r.r != Stored {
		t.Fatalf("first: %v %v", r.r, r.err)
	}
	<-bad // whatever the inbox makes of a nil payload
	if r := <-good; r.err != nil || r.r != Stored {
		t.Fatalf("a good delivery failed because another delivery in its group commit was refused: result %v, err %v", r.r, r.err)
	}
}

func TestInboxSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	ctx := context.Background()
	d := openTestDB(t, path)
	ib, err := OpenInbox(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"action":"opened","issue":{"number":3}}`)
	mustAccept(t, ib, Incoming{ID: "keep", Event: "issues", HookID: "42", Payload: payload, ReceivedAt: time.Now()}, Stored)
	mustAccept(t, ib, incoming("dead"), Stored)
	if err := ib.Fail(ctx, &Claim{Seq: record(t, ib, "dead").Seq}, "x", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	ib.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d2 := openTestDB(t, path)
	defer d2.Close()
	ib2, err := OpenInbox(ctx, d2) // migrating again is a no-op
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer ib2.Close()
	rs := records(t, ib2)
	if len(rs) != 2 || rs["keep"].State != StatePending || rs["dead"].State != StateDead {
		t.Fatalf("after reopen: %+v", rs)
	}
	got, err := ib2.Payload(ctx, rs["keep"].Seq)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("payload after reopen = %q, %v", got, err)
	}
	mustAccept(t, ib2, incoming("keep"), Duplicate)
	mustAccept(t, ib2, incoming("dead"), Requeued)
	mustAccept(t, ib2, incoming("fresh"), Stored)
	if rs := records(t, ib2); rs["fresh"].Seq <= rs["keep"].Seq {
		t.Fatalf("seq went backwards after reopen: %d <= %d", rs["fresh"].Seq, rs["keep"].Seq)
	}
}

func TestInboxDueAfter(t *testing.T) {
	_, ib := newTestInbox(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := ib.Accept(ctx, Incoming{ID: id, Event: "issues", Payload: []byte(`{}`), ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := dueAt(ib, time.Now(), 0, 1)
	if len(first) != 1 || first[0].ID != "a" {
		t.Fatalf("first page %+v", first)
	}
	rest, _ := dueAt(ib, time.Now(), first[0].Seq, 10)
	if len(rest) != 2 || rest[0].ID != "b" || rest[1].ID != "c" {
		t.Fatalf("after %d: %+v", first[0].Seq, rest)
	}
}
