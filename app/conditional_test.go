package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wardenhq/warden/internal/ghsim"
)

// sent is one request the access layer handed to the network, and its answer.
type sent struct {
	method, path, query, accept  string
	ifNoneMatch, ifModifiedSince string
	status                       int
}

// recordingTransport records what the access layer sends under /repos/.
type recordingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	log  []sent
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(r)
	if strings.HasPrefix(r.URL.Path, "/repos/") {
		s := sent{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery, accept: r.Header.Get("Accept"),
			ifNoneMatch: r.Header.Get("If-None-Match"), ifModifiedSince: r.Header.Get("If-Modified-Since")}
		if err == nil {
			s.status = resp.StatusCode
		}
		rt.mu.Lock()
		rt.log = append(rt.log, s)
		rt.mu.Unlock()
	}
	return resp, err
}

// last is the latest request sent.
func (rt *recordingTransport) last(t *testing.T) sent {
	t.Helper()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.log) == 0 {
		t.Fatal("no request sent")
	}
	return rt.log[len(rt.log)-1]
}

func (rt *recordingTransport) count() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.log)
}

// simEnv is the GitHub simulator with one installation on acme/app, and an
// App over it whose traffic is recorded.
type simEnv struct {
	sim  *ghsim.Sim
	inst *ghsim.Installation
	repo *ghsim.Repo
	app  *App
	reg  *prometheus.Registry
	rec  *recordingTransport
}

func newSimEnv(t *testing.T, mut func(*Config)) *simEnv {
	t.Helper()
	sim, err := ghsim.New(ghsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	t.Cleanup(func() { srv.Close(); sim.Close() })
	e := &simEnv{sim: sim, reg: prometheus.NewPedanticRegistry(), rec: &recordingTransport{base: http.DefaultTransport}}
	e.inst = sim.Install("acme", "alice")
	e.repo = sim.AddRepo(e.inst, "acme/app", "main")
	cfg := Config{
		AppID:      sim.AppID(),
		PrivateKey: sim.PrivateKeyPEM(),
		BaseURL:    srv.URL + "/",
		Transport:  e.rec,
		Logger:     slog.New(slog.DiscardHandler),
		Registerer: e.reg,
		MaxWait:    5 * time.Second,
		RetryBase:  time.Millisecond,
	}
	if mut != nil {
		mut(&cfg)
	}
	if e.app, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *simEnv) client(t *testing.T) *github.Client {
	t.Helper()
	gh, err := e.app.Installation(e.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	return gh
}

// labels creates repository labels through the API.
func (e *simEnv) labels(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, _, err := e.client(t).Issues.CreateLabel(context.Background(), "acme", "app",
			&github.Label{Name: github.String(n), Color: github.String("00ff00")}); err != nil {
			t.Fatalf("create label %s: %v", n, err)
		}
	}
}

// listLabels lists acme/app's labels through go-github and returns their
// names, comma-separated.
func listLabels(t *testing.T, gh *github.Client, opts *github.ListOptions) (string, *github.Response) {
	t.Helper()
	ls, resp, err := gh.Issues.ListLabels(context.Background(), "acme", "app", opts)
	if err != nil {
		t.Fatalf("ListLabels: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ListLabels: status %d, want 200", resp.StatusCode)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.GetName()+"#"+l.GetColor())
	}
	return strings.Join(names, ","), resp
}

// getRaw GETs path and returns the body as the caller sees it.
func getRaw(t *testing.T, gh *github.Client, path, accept string) (*github.Response, []byte) {
	t.Helper()
	req, err := gh.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	var buf bytes.Buffer
	resp, err := gh.Do(context.Background(), req, &buf)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200", path, resp.StatusCode)
	}
	return resp, buf.Bytes()
}

func wantStats(t *testing.T, a *App, hits, misses int64, entries int) ConditionalStats {
	t.Helper()
	s := a.ConditionalStats()
	if s.Hits != hits || s.Misses != misses || s.Entries != entries {
		t.Errorf("ConditionalStats = %+v, want %d hits, %d misses, %d entries", s, hits, misses, entries)
	}
	return s
}

// wantSent asserts the latest request's validator and upstream status.
func wantSent(t *testing.T, rec *recordingTransport, conditional bool, status int) sent {
	t.Helper()
	s := rec.last(t)
	if got := s.ifNoneMatch != "" || s.ifModifiedSince != ""; got != conditional {
		t.Errorf("%s %s?%s: conditional = %v (If-None-Match %q, If-Modified-Since %q), want %v",
			s.method, s.path, s.query, got, s.ifNoneMatch, s.ifModifiedSince, conditional)
	}
	if s.status != status {
		t.Errorf("%s %s?%s: upstream status %d, want %d", s.method, s.path, s.query, s.status, status)
	}
	return s
}

func TestConditionalRepeatedGETIsA304ServedAs200(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "bug", "docs")
	gh := e.client(t)
	before := e.sim.Calls(e.inst.ID)

	first, resp1 := listLabels(t, gh, nil)
	wantSent(t, e.rec, false, http.StatusOK)
	second, resp2 := listLabels(t, gh, nil)
	s := wantSent(t, e.rec, true, http.StatusNotModified)
	if first != second || first != "bug#00ff00,docs#00ff00" {
		t.Errorf("labels: first %q, second %q", first, second)
	}
	if s.ifNoneMatch != resp1.Header.Get("ETag") {
		t.Errorf("If-None-Match %q, want the first answer's ETag %q", s.ifNoneMatch, resp1.Header.Get("ETag"))
	}
	if resp2.Header.Get("ETag") != resp1.Header.Get("ETag") || resp2.Header.Get("Content-Type") == "" {
		t.Errorf("served headers: ETag %q Content-Type %q", resp2.Header.Get("ETag"), resp2.Header.Get("Content-Type"))
	}

	// The same through the raw body: byte for byte.
	_, raw1 := getRaw(t, gh, "repos/acme/app/labels?per_page=50", "")
	_, raw2 := getRaw(t, gh, "repos/acme/app/labels?per_page=50", "")
	wantSent(t, e.rec, true, http.StatusNotModified)
	if !bytes.Equal(raw1, raw2) || len(raw1) == 0 {
		t.Errorf("bodies differ:\n%s\n%s", raw1, raw2)
	}

	after := e.sim.Calls(e.inst.ID)
	if got := (ghsim.Calls{Reads: after.Reads - before.Reads, NotModified: after.NotModified - before.NotModified,
		Writes: after.Writes - before.Writes}); got != (ghsim.Calls{Reads: 2, NotModified: 2}) {
		t.Errorf("simulator saw %+v, want 2 reads and 2 answered 304", got)
	}
	if c := e.app.Calls(e.inst.ID); c.NotModified != 2 {
		t.Errorf("Calls = %+v, want 2 NotModified", c)
	}
	st := wantStats(t, e.app, 2, 2, 2)
	if st.Bytes < int64(len(raw1)) {
		t.Errorf("Bytes = %d, less than a stored body (%d)", st.Bytes, len(raw1))
	}
}

func TestConditionalChangedResourceIsRefetched(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "bug")
	gh := e.client(t)
	listLabels(t, gh, nil)
	listLabels(t, gh, nil)
	wantSent(t, e.rec, true, http.StatusNotModified)

	// A new label: the POST drops the list's entry, and the list comes back
	// whole with it.
	e.labels(t, "new")
	got, _ := listLabels(t, gh, nil)
	wantSent(t, e.rec, false, http.StatusOK)
	if got != "bug#00ff00,new#00ff00" {
		t.Errorf("after create: %q", got)
	}
	if again, _ := listLabels(t, gh, nil); again != got {
		t.Errorf("after create, cached: %q, want %q", again, got)
	}
	wantSent(t, e.rec, true, http.StatusNotModified)

	// A recolor goes to /labels/bug, which leaves the list's entry: the
	// stale ETag is sent, GitHub answers 200 with the new list, which
	// replaces the entry.
	if _, _, err := gh.Issues.EditLabel(context.Background(), "acme", "app", "bug",
		&github.Label{Color: github.String("ff0000")}); err != nil {
		t.Fatal(err)
	}
	got, _ = listLabels(t, gh, nil)
	wantSent(t, e.rec, true, http.StatusOK)
	if got != "bug#ff0000,new#00ff00" {
		t.Errorf("after recolor: %q", got)
	}
	if again, _ := listLabels(t, gh, nil); again != got {
		t.Errorf("after recolor, cached: %q, want %q", again, got)
	}
	wantSent(t, e.rec, true, http.StatusNotModified)

	// A person opens an issue on GitHub: warden wrote nothing, the ETag of
	// the issue list changes anyway.
	listIssues := func() string {
		is, _, err := gh.Issues.ListByRepo(context.Background(), "acme", "app", nil)
		if err != nil {
			t.Fatal(err)
		}
		var titles []string
		for _, i := range is {
			titles = append(titles, i.GetTitle())
		}
		return strings.Join(titles, ",")
	}
	if got := listIssues(); got != "" {
		t.Fatalf("issues: %q", got)
	}
	listIssues()
	wantSent(t, e.rec, true, http.StatusNotModified)
	e.sim.SetRole(e.repo, "carol", "write")
	if _, err := e.sim.As("carol").OpenIssue(e.repo, "a human wrote this", ""); err != nil {
		t.Fatal(err)
	}
	if got := listIssues(); got != "a human wrote this" {
		t.Errorf("issues after a person opened one: %q", got)
	}
	wantSent(t, e.rec, true, http.StatusOK)
	wantStats(t, e.app, 4, 5, 2)
}

func TestConditionalKeysIncludeQueryAndAccept(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "a", "b", "c")
	gh := e.client(t)
	opts := []*github.ListOptions{nil, {PerPage: 1}, {PerPage: 2}, {PerPage: 2, Page: 2}}
	want := []string{"a#00ff00,b#00ff00,c#00ff00", "a#00ff00", "a#00ff00,b#00ff00", "c#00ff00"}
	for round := range 2 {
		for i, o := range opts {
			got, _ := listLabels(t, gh, o)
			if got != want[i] {
				t.Errorf("round %d, %+v: %q, want %q", round, o, got, want[i])
			}
			if round == 0 {
				wantSent(t, e.rec, false, http.StatusOK)
			} else {
				wantSent(t, e.rec, true, http.StatusNotModified)
			}
		}
	}
	wantStats(t, e.app, 4, 4, 4)

	// Another media type is another representation: not sent conditional on
	// the default one's ETag, stored beside it.
	const other = "application/vnd.github+json"
	getRaw(t, gh, "repos/acme/app/labels", other)
	if s := wantSent(t, e.rec, false, http.StatusOK); s.accept != other {
		t.Errorf("Accept sent %q, want %q", s.accept, other)
	}
	getRaw(t, gh, "repos/acme/app/labels", other)
	wantSent(t, e.rec, true, http.StatusNotModified)
	getRaw(t, gh, "repos/acme/app/labels", "")
	wantSent(t, e.rec, true, http.StatusNotModified)
	wantStats(t, e.app, 6, 5, 5)
}

// forceNewToken drops the App's cached client for an installation, so the
// next Installation call builds one that creates a new token.
func forceNewToken(a *App, id int64) {
	c := a.installs
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[id]; ok {
		c.order.Remove(el)
		delete(c.items, id)
	}
}

func TestConditionalTokenRotationRefreshesEntry(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "bug")
	resp1, body1 := getRaw(t, e.client(t), "repos/acme/app/labels", "")
	getRaw(t, e.client(t), "repos/acme/app/labels", "")
	wantSent(t, e.rec, true, http.StatusNotModified)
	tokens := e.sim.Calls(0).Writes

	forceNewToken(e.app, e.inst.ID)
	resp2, body2 := getRaw(t, e.client(t), "repos/acme/app/labels", "")
	if n := e.sim.Calls(0).Writes - tokens; n != 1 {
		t.Fatalf("%d tokens created, want 1 (rotation)", n)
	}
	// The old token's ETag was sent; the simulator, like GitHub, scopes
	// ETags to the credential and answers 200.
	if s := wantSent(t, e.rec, true, http.StatusOK); s.ifNoneMatch != resp1.Header.Get("ETag") {
		t.Errorf("sent %q, want the old ETag %q", s.ifNoneMatch, resp1.Header.Get("ETag"))
	}
	if resp2.Header.Get("ETag") == resp1.Header.Get("ETag") || !bytes.Equal(body1, body2) {
		t.Errorf("after rotation: ETag %q (was %q), body changed %v", resp2.Header.Get("ETag"), resp1.Header.Get("ETag"), !bytes.Equal(body1, body2))
	}
	wantStats(t, e.app, 1, 2, 1)

	_, body3 := getRaw(t, e.client(t), "repos/acme/app/labels", "")
	if s := wantSent(t, e.rec, true, http.StatusNotModified); s.ifNoneMatch != resp2.Header.Get("ETag") {
		t.Errorf("sent %q, want the new ETag %q", s.ifNoneMatch, resp2.Header.Get("ETag"))
	}
	if !bytes.Equal(body3, body2) {
		t.Errorf("body after rotation hit: %s", body3)
	}
	wantStats(t, e.app, 2, 2, 1)
}

func TestConditionalNotChargedToRateLimit(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "bug")
	gh := e.client(t)
	listLabels(t, gh, nil)
	remaining := e.sim.Remaining(e.inst.ID)
	for i := range 5 {
		_, resp := listLabels(t, gh, nil)
		wantSent(t, e.rec, true, http.StatusNotModified)
		if resp.Rate.Remaining != remaining || resp.Header.Get("X-Ratelimit-Remaining") != strconv.Itoa(remaining) {
			t.Errorf("GET %d: x-ratelimit-remaining %q (Rate %d), want %d", i, resp.Header.Get("X-Ratelimit-Remaining"), resp.Rate.Remaining, remaining)
		}
	}
	if got := e.sim.Remaining(e.inst.ID); got != remaining {
		t.Errorf("simulator remaining %d after 304s, want %d (304s are free)", got, remaining)
	}

	// A write elsewhere is charged; the next cached answer carries the 304's
	// fresh budget, not the one stored with the 200.
	if _, _, err := gh.Issues.Create(context.Background(), "acme", "app", &github.IssueRequest{Title: github.String("t")}); err != nil {
		t.Fatal(err)
	}
	_, resp := listLabels(t, gh, nil)
	wantSent(t, e.rec, true, http.StatusNotModified)
	if want := remaining - 1; resp.Rate.Remaining != want || resp.Header.Get("X-Ratelimit-Remaining") != strconv.Itoa(want) {
		t.Errorf("after a write: x-ratelimit-remaining %q (Rate %d), want %d", resp.Header.Get("X-Ratelimit-Remaining"), resp.Rate.Remaining, want)
	}
	if b := e.app.Budget(e.inst.ID); b.Remaining != remaining-1 {
		t.Errorf("Budget = %+v, want remaining %d", b, remaining-1)
	}
}

func TestConditionalWritesInvalidateTheirPath(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "bug", "bugfix")
	gh := e.client(t)
	ctx := context.Background()
	listLabels(t, gh, nil)
	getLabel := func(name string) {
		t.Helper()
		if _, _, err := gh.Issues.GetLabel(ctx, "acme", "app", name); err != nil {
			t.Fatal(err)
		}
	}
	getLabel("bug")
	getLabel("bugfix")
	getRaw(t, gh, "repos/acme/app/labels/bug?x=1", "")
	wantStats(t, e.app, 0, 4, 4)

	// PATCH /labels/bug drops /labels/bug whatever its query, not the list
	// nor /labels/bugfix.
	if _, _, err := gh.Issues.EditLabel(ctx, "acme", "app", "bug", &github.Label{Color: github.String("ff0000")}); err != nil {
		t.Fatal(err)
	}
	wantStats(t, e.app, 0, 4, 2)
	getLabel("bug")
	wantSent(t, e.rec, false, http.StatusOK)
	getLabel("bugfix")
	wantSent(t, e.rec, true, http.StatusNotModified)

	// DELETE /labels drops everything under it.
	req, _ := gh.NewRequest(http.MethodDelete, "repos/acme/app/labels", nil)
	gh.Do(ctx, req, nil) // not a route: 404, still a write
	if s := e.app.ConditionalStats(); s.Entries != 0 || s.Bytes != 0 {
		t.Errorf("after DELETE /labels: %+v, want empty", s)
	}
}

func TestConditionalEntriesArePerInstallation(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		etag := `"` + r.Header.Get("Authorization") + `"` // per credential, as on GitHub
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, `{"number":1}`)
	})
	a := newTestApp(t, f, nil)
	ctx := context.Background()
	c7, _ := a.Installation(7)
	c8, _ := a.Installation(8)
	for _, c := range []*github.Client{c7, c8, c7, c8} {
		if _, _, err := c.Issues.Get(ctx, "o", "r", 1); err != nil {
			t.Fatal(err)
		}
	}
	if a.Calls(7).NotModified != 1 || a.Calls(8).NotModified != 1 {
		t.Errorf("NotModified: 7 %+v, 8 %+v; want one each", a.Calls(7), a.Calls(8))
	}
	wantStats(t, a, 2, 2, 2)
	// A write as 8 leaves 7's entry.
	if _, _, err := c8.Issues.Edit(ctx, "o", "r", 1, &github.IssueRequest{Title: github.String("t")}); err != nil {
		t.Fatal(err)
	}
	wantStats(t, a, 2, 2, 1)
	if _, _, err := c7.Issues.Get(ctx, "o", "r", 1); err != nil {
		t.Fatal(err)
	}
	if a.Calls(7).NotModified != 2 {
		t.Errorf("Calls(7) = %+v, want a second 304", a.Calls(7))
	}
}

func TestConditionalLRUEvictsByBytes(t *testing.T) {
	const size = 100 << 10
	var mu sync.Mutex
	conditional := map[string]int{} // path → conditional requests
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		etag := `"` + r.URL.Path + `"`
		w.Header().Set("ETag", etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" {
			mu.Lock()
			conditional[r.URL.Path]++
			mu.Unlock()
			if inm == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		w.Write(bytes.Repeat([]byte(r.URL.Path[len(r.URL.Path)-1:]), size))
	})
	a := newTestApp(t, f, func(c *Config) { c.ConditionalCacheBytes = 3*size + 3*2048 })
	gh, _ := a.Installation(7)
	get := func(name string) {
		t.Helper()
		req, _ := gh.NewRequest(http.MethodGet, "repos/o/r/blob/"+name, nil)
		var buf bytes.Buffer
		if _, err := gh.Do(context.Background(), req, &buf); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != size || buf.Bytes()[size-1] != name[0] {
			t.Fatalf("GET %s: %d bytes", name, buf.Len())
		}
	}
	get("a")
	get("b")
	get("c")
	if s := a.ConditionalStats(); s.Entries != 3 || s.Evictions != 0 {
		t.Fatalf("three fit: %+v", s)
	}
	get("a") // hit: a is now the most recently used
	get("d") // evicts b, the least recently used
	s := a.ConditionalStats()
	if s.Entries != 3 || s.Evictions != 1 || s.Bytes > 3*size+3*2048 || s.Bytes < 3*size {
		t.Errorf("after d: %+v", s)
	}
	get("b") // evicted: not conditional
	get("a") // kept: conditional, 304
	mu.Lock()
	defer mu.Unlock()
	if conditional["/repos/o/r/blob/b"] != 0 || conditional["/repos/o/r/blob/a"] != 2 {
		t.Errorf("conditional requests = %v, want a:2 and none for b", conditional)
	}
}

func TestConditionalConcurrentGETs(t *testing.T) {
	e := newSimEnv(t, nil)
	e.labels(t, "a", "b", "c", "d")
	ctx := context.Background()
	var wg sync.WaitGroup
	const workers, rounds = 8, 15
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gh, err := e.app.Installation(e.inst.ID)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range rounds {
				per := (w+i)%4 + 1
				ls, resp, err := gh.Issues.ListLabels(ctx, "acme", "app", &github.ListOptions{PerPage: per})
				if err != nil || resp.StatusCode != 200 || len(ls) != per {
					t.Errorf("per_page %d: %d labels, %v", per, len(ls), err)
					return
				}
				if ls[0].GetName() != "a" {
					t.Errorf("first label %q", ls[0].GetName())
				}
				if w == 0 && i%5 == 0 { // a recolor changes every list's ETag
					if _, _, err := gh.Issues.EditLabel(ctx, "acme", "app", "a", &github.Label{Color: github.String(fmt.Sprintf("%06d", i))}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	s := e.app.ConditionalStats()
	if s.Hits+s.Misses != workers*rounds || s.Hits == 0 {
		t.Errorf("stats %+v: want hits+misses = %d, some hits", s, workers*rounds)
	}
	if c := e.app.Calls(e.inst.ID); int64(c.NotModified) != s.Hits {
		t.Errorf("layer NotModified %d != hits %d", c.NotModified, s.Hits)
	}
	if c := e.sim.Calls(e.inst.ID); int64(c.NotModified) != s.Hits {
		t.Errorf("simulator NotModified %d != hits %d", c.NotModified, s.Hits)
	}
	if s.Entries > 4 {
		t.Errorf("%d entries for 4 URLs", s.Entries)
	}
}

func TestConditionalDisabled(t *testing.T) {
	e := newSimEnv(t, func(c *Config) { c.ConditionalCacheBytes = -1 })
	e.labels(t, "bug")
	gh := e.client(t)
	for range 3 {
		listLabels(t, gh, nil)
		wantSent(t, e.rec, false, http.StatusOK)
	}
	if c := e.sim.Calls(e.inst.ID); c.NotModified != 0 {
		t.Errorf("simulator calls %+v, want no 304", c)
	}
	if s := e.app.ConditionalStats(); s != (ConditionalStats{}) {
		t.Errorf("stats %+v, want zero", s)
	}
	if e.app.layer.conditional != nil {
		t.Error("layer has a conditional cache")
	}
	if m := gatherValue(t, e.reg, "warden_github_conditional_hits_total"); m != nil {
		t.Errorf("hits metric registered while off: %v", m)
	}
}

func TestConditionalMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	e := newSimEnv(t, func(c *Config) { c.Registerer = reg })
	e.labels(t, "bug")
	gh := e.client(t)
	listLabels(t, gh, nil)
	listLabels(t, gh, nil)
	listLabels(t, gh, nil)
	s := wantStats(t, e.app, 2, 1, 1)
	for name, want := range map[string]float64{
		"warden_github_conditional_hits_total":   2,
		"warden_github_conditional_misses_total": 1,
		"warden_github_conditional_cache_bytes":  float64(s.Bytes),
	} {
		if got := gatherValue(t, reg, name); got == nil || *got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// A second App on the same registry shares the metrics.
	other := newSimEnv(t, func(c *Config) { c.Registerer = reg })
	other.labels(t, "x")
	listLabels(t, other.client(t), nil)
	listLabels(t, other.client(t), nil)
	if got := gatherValue(t, reg, "warden_github_conditional_hits_total"); got == nil || *got != 3 {
		t.Errorf("shared hits = %v, want 3", got)
	}
	total := s.Bytes + other.app.ConditionalStats().Bytes
	if got := gatherValue(t, reg, "warden_github_conditional_cache_bytes"); got == nil || *got != float64(total) {
		t.Errorf("shared bytes = %v, want %d", got, total)
	}
	if s.Bytes == 0 {
		t.Error("no bytes accounted")
	}
}

// gatherValue is the value of an unlabelled counter or gauge, nil if absent.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string) *float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var v float64
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			}
			return &v
		}
	}
	return nil
}

func TestConditionalCallerValidatorsPassThrough(t *testing.T) {
	e := newSimEnv(t, nil)
	gh := e.client(t)
	resp, _ := getRaw(t, gh, "repos/acme/app", "")
	req, _ := gh.NewRequest(http.MethodGet, "repos/acme/app", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp, err := gh.Do(context.Background(), req, nil)
	if resp == nil || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("caller's own conditional request: %v %v, want its 304", resp, err)
	}
	wantStats(t, e.app, 0, 1, 1)
}

func TestConditionalAppRequestsNotCached(t *testing.T) {
	e := newSimEnv(t, nil)
	ctx := context.Background()
	for range 2 {
		if _, _, err := e.app.AppClient().Apps.ListInstallations(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := e.sim.Calls(AppInstallation); c.Reads != 2 || c.NotModified != 0 {
		t.Errorf("App calls %+v, want 2 reads, no 304", c)
	}
	wantStats(t, e.app, 0, 0, 0)
}

// TestConditionalCacheability: bodies over the cap pass through whole and
// uncached, as do no-store answers and answers without a validator; a
// Last-Modified validator and an empty body are cached.
func TestConditionalCacheability(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16) // over the 8 MiB cap
	var mu sync.Mutex
	conditional := map[string]int{}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		mu.Lock()
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" {
			conditional[r.URL.Path]++
		}
		mu.Unlock()
		h := w.Header()
		switch strings.TrimPrefix(r.URL.Path, "/repos/o/r/") {
		case "big":
			h.Set("ETag", `"big"`)
			h.Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		case "big-chunked":
			h.Set("ETag", `"big"`)
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			w.Write(big)
		case "no-store":
			h.Set("ETag", `"ns"`)
			h.Set("Cache-Control", "private, no-store")
			fmt.Fprint(w, `{"x":1}`)
		case "no-validator":
			fmt.Fprint(w, `{"x":1}`)
		case "empty":
			h.Set("ETag", `"empty"`)
			if r.Header.Get("If-None-Match") == `"empty"` {
				w.WriteHeader(http.StatusNotModified)
			}
		case "last-modified":
			const lm = "Mon, 02 Jan 2006 15:04:05 GMT"
			h.Set("Last-Modified", lm)
			if r.Header.Get("If-Modified-Since") == lm {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			fmt.Fprint(w, `{"lm":1}`)
		}
	})
	a := newTestApp(t, f, nil)
	gh, _ := a.Installation(7)
	sum := sha256.Sum256(big)
	for _, path := range []string{"big", "big-chunked"} {
		for range 2 {
			req, _ := gh.NewRequest(http.MethodGet, "repos/o/r/"+path, nil)
			resp, err := gh.BareDo(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			// Read as a streaming caller would, a little at a time.
			h := sha256.New()
			n, err := io.CopyBuffer(h, struct{ io.Reader }{resp.Body}, make([]byte, 1000))
			resp.Body.Close()
			if err != nil || n != int64(len(big)) || !bytes.Equal(h.Sum(nil), sum[:]) {
				t.Fatalf("%s: read %d of %d bytes, %v", path, n, len(big), err)
			}
		}
	}
	for _, path := range []string{"no-store", "no-validator", "last-modified"} {
		for range 2 {
			req, _ := gh.NewRequest(http.MethodGet, "repos/o/r/"+path, nil)
			var buf bytes.Buffer
			if _, err := gh.Do(context.Background(), req, &buf); err != nil || !strings.HasPrefix(buf.String(), "{") {
				t.Fatalf("%s: %q %v", path, buf.String(), err)
			}
		}
	}
	for range 2 {
		req, _ := gh.NewRequest(http.MethodGet, "repos/o/r/empty", nil)
		var buf bytes.Buffer
		if resp, err := gh.Do(context.Background(), req, &buf); err != nil || resp.StatusCode != 200 || buf.Len() != 0 {
			t.Fatalf("empty: %v %q %v", resp, buf.String(), err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conditional) != 2 || conditional["/repos/o/r/last-modified"] != 1 || conditional["/repos/o/r/empty"] != 1 {
		t.Errorf("conditional requests = %v, want only last-modified's and empty's second", conditional)
	}
	if s := a.ConditionalStats(); s.Entries != 2 || s.Hits != 2 || s.Bytes > 4096 {
		t.Errorf("stats %+v, want the last-modified and empty entries alone, two hits", s)
	}
}
