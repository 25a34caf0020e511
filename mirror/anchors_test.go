package mirror

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror/store"
)

// anchorEnv is the settings tests' simulator, app and database with a
// ledger and a mirror over them; every push delivery is handed to
// HandlePush as it is sent.
type anchorEnv struct {
	*settingsEnv
	l   *store.Ledger
	m   *Mirror
	dev *ghsim.Actor

	mu     sync.Mutex
	queued [][]byte
}

func newAnchorEnv(t *testing.T) *anchorEnv {
	t.Helper()
	e := &anchorEnv{settingsEnv: newSettingsEnv(t)}
	e.sim.Observe(nil, func(d ghsim.Delivered) {
		if d.Event == "push" {
			e.mu.Lock()
			e.queued = append(e.queued, d.Payload)
			e.mu.Unlock()
		}
	})
	l, err := openLedger(e.ctx, e.d, store.Config{Region: "local", Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutRepo(e.ctx, e.repo); err != nil {
		t.Fatal(err)
	}
	e.l = l
	e.m = &Mirror{Ledger: l, GitHub: e.app, Region: "local", Log: discardLog(), Now: e.clock.Now}
	e.dev = e.sim.As("dev")
	e.sim.SetRole(e.ghRepo, "dev", "write")
	return e
}

// deliver hands the queued push deliveries to HandlePush, in order.
func (e *anchorEnv) deliver() []string {
	e.t.Helper()
	e.flush()
	e.mu.Lock()
	q := e.queued
	e.queued = nil
	e.mu.Unlock()
	var outs []string
	for _, p := range q {
		out, err := e.m.HandlePush(e.ctx, Event{Name: "push", Payload: p})
		if err != nil {
			e.t.Fatalf("HandlePush: %v", err)
		}
		outs = append(outs, out)
	}
	return outs
}

// flush waits for the simulator to have sent every delivery.
func (e *anchorEnv) flush() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if err := e.sim.Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *anchorEnv) pushFiles(branch string, files map[string]string) string {
	e.t.Helper()
	sha, err := e.dev.Push(e.ghRepo, branch, "", files, "change")
	if err != nil {
		e.t.Fatal(err)
	}
	return sha
}

func (e *anchorEnv) item(n int, base string, anchors ...string) {
	e.t.Helper()
	var links []gating.Link
	for _, a := range anchors {
		links = append(links, gating.Link{Rel: gating.AnchoredTo, Target: a})
	}
	tags := []string{"backlog", "priority:P2", "phase:implementation", "homeRegion:local"}
	if base != "" {
		tags = append(tags, "baseBranch:"+base)
	}
	if _, err := e.l.Create(e.ctx, e.repo.ID, store.NewItem{Number: n, Title: "item", Tags: tags, Links: links},
		store.Actor{Role: gating.RolePM, Name: "pm"}, store.WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// staleOf is the snapshot's stale anchors of item n: path -> dangling.
func (e *anchorEnv) staleOf(n int) map[string]bool {
	e.t.Helper()
	rs, err := e.l.Snapshot(e.ctx, e.repo.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range rs.StaleAnchors[gating.IDFor(n)] {
		out[a.Path] = a.Dangling
	}
	// The ready set reports exactly these as stale-anchor.
	cnt := 0
	for _, d := range rs.Ready().Defects {
		if d.Code == gating.DefectStaleAnchor && d.Item == gating.IDFor(n) {
			cnt++
		}
	}
	if cnt != len(out) {
		e.t.Errorf("#%d: %d stale-anchor findings for %d stale anchors", n, cnt, len(out))
	}
	return out
}

func TestAnchorsFromPushes(t *testing.T) {
	e := newAnchorEnv(t)
	e.pushFiles("main", map[string]string{"a/b/x.go": "x", "a/bc/y.go": "y", "keep.go": "k"})
	e.deliver()
	e.item(1, "main", "a/b")       // a directory on main
	e.item(2, "main", "a/bc/y.go") // a file on main
	e.item(3, "side", "a/b")       // the same directory on another base branch

	// The first push records the anchors of the branch's items (one contents
	// read each), and marks nothing: it touched none.
	reads := e.calls.contents.Load()
	e.pushFiles("main", map[string]string{"keep.go": "k2"})
	e.deliver()
	if got := e.calls.contents.Load() - reads; got != 2 {
		t.Errorf("recording the anchors of #1 and #2 took %d contents reads, want 2", got)
	}
	st, err := e.l.AnchorStates(e.ctx, e.repo.ID, 2)
	if err != nil || len(st) != 1 || st[0].BlobSHA == "" || st[0].Stale || !isCommitSHA(st[0].ValidatedCommit) {
		t.Fatalf("#2's recorded anchor %+v %v: want a blob SHA, a commit, not stale", st, err)
	}
	// A file below a/bc is not below a/b.
	total := e.calls.total.Load()
	e.pushFiles("main", map[string]string{"a/bc/y.go": "y2"})
	outs := e.deliver()
	if got := e.calls.total.Load() - total; got != 0 {
		t.Errorf("a push listing its files made %d GitHub calls, want 0", got)
	}
	if s := e.staleOf(1); len(s) != 0 {
		t.Errorf("#1 (a/b) stale %v after a change to a/bc/y.go", s)
	}
	if s := e.staleOf(2); !slices.Equal(keys(s), []string{"a/bc/y.go"}) || s["a/bc/y.go"] {
		t.Errorf("#2 stale %v, want a/bc/y.go, not dangling (outcomes %q)", s, outs)
	}
	// A push to side: only #3 is concerned.
	if _, err := e.dev.Push(e.ghRepo, "side", "main", map[string]string{"a/b/x.go": ""}, "drop x on side"); err != nil {
		t.Fatal(err)
	}
	e.deliver()
	if s := e.staleOf(3); !s["a/b"] {
		t.Errorf("#3 stale %v, want a/b dangling (its only file removed on side)", s)
	}
	if s := e.staleOf(1); len(s) != 0 {
		t.Errorf("#1 (based on main) stale %v after a push to side", s)
	}
	// The same commit and path are never read twice: a redelivery of the
	// push reads nothing.
	reads = e.calls.contents.Load()
	sha := e.pushFiles("main", map[string]string{"a/b/x.go": "", "a/b/z.go": "z"})
	e.deliver()
	if s := e.staleOf(1); len(s) != 1 || s["a/b"] {
		t.Errorf("#1 stale %v, want a/b not dangling (a/b/z.go is there)", s)
	}
	first := e.calls.contents.Load() - reads
	if b, ok, err := e.l.CachedBlob(e.ctx, e.repo.ID, sha, "a/b"); err != nil || !ok || b != store.DirBlob {
		t.Errorf("the read of a/b at %s is not cached: %q %v %v", sha, b, ok, err)
	}
	if first != 1 {
		t.Errorf("the removal under a/b took %d contents reads, want 1", first)
	}
	// Re-validation clears it.
	it, _ := e.l.Get(e.ctx, e.repo.ID, gating.IDFor(1))
	if err := e.m.AnchorsWritten(e.ctx, e.repo, it, []string{"a/b"}, []string{"a/b"}); err != nil {
		t.Fatal(err)
	}
	if s := e.staleOf(1); len(s) != 0 {
		t.Errorf("#1 stale %v after the link was written again", s)
	}
}

// A push GitHub truncated (as many commits as it lists) is compared once.
func TestAnchorsTruncatedPushCompares(t *testing.T) {
	e := newAnchorEnv(t)
	e.pushFiles("main", map[string]string{"src/wal.go": "v1", "other.go": "o"})
	e.deliver()
	e.item(1, "main", "src/wal.go")
	e.pushFiles("main", map[string]string{"other.go": "o2"})
	e.deliver()
	// 21 commits, the wal.go change in the first one; the payload is then
	// cut to the last 20 (as the events API does), with size 21.
	commits := []ghsim.FileCommit{{Message: "wal", Files: map[string]string{"src/wal.go": "v2"}}}
	for i := range 20 {
		commits = append(commits, ghsim.FileCommit{Message: "o", Files: map[string]string{"other.go": strings.Repeat("o", i+3)}})
	}
	if _, err := e.dev.PushCommits(e.ghRepo, "main", "", commits); err != nil {
		t.Fatal(err)
	}
	e.flush()
	e.mu.Lock()
	for i, p := range e.queued {
		e.queued[i] = truncatePush(t, p, 20)
	}
	e.mu.Unlock()
	cmp := e.calls.compare.Load()
	e.deliver()
	if got := e.calls.compare.Load() - cmp; got != 1 {
		t.Errorf("a truncated push made %d compares, want 1", got)
	}
	if s := e.staleOf(1); len(s) != 1 {
		t.Errorf("#1 stale %v, want src/wal.go (changed in a commit the payload left out)", s)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// truncatePush keeps the last n commits of a push payload and says how
// many there were (size), as GitHub's truncated form does.
func truncatePush(t *testing.T, payload []byte, n int) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	cs, _ := m["commits"].([]any)
	m["size"] = len(cs)
	if len(cs) > n {
		m["commits"] = cs[len(cs)-n:]
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
