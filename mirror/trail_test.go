package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// roleClients answers the collaborator-permission endpoint from roles (a
// login missing from it: the lookup fails).
type roleClients struct{ url string }

func (c roleClients) Installation(int64) (*github.Client, error) {
	return github.NewClient(nil).WithEnterpriseURLs(c.url+"/", c.url+"/")
}

type failingClients struct{}

func (failingClients) Installation(int64) (*github.Client, error) {
	return nil, errors.New("no client")
}

func newTrailMirror(t *testing.T, e *env, roles map[string]string) *Mirror {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimSuffix(r.URL.Path, "/permission"), "/")
		role, ok := roles[parts[len(parts)-1]]
		if !ok {
			http.Error(w, `{"message":"boom"}`, http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, `{"permission":%q,"role_name":%q}`, role, role)
	}))
	t.Cleanup(srv.Close)
	return &Mirror{Ledger: e.l, Acts: e.acts, GitHub: roleClients{srv.URL}, Perms: NewPermissions(), Agents: []string{"pm-agent"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: e.clock.Now}
}

type commentEv struct {
	action, login, typ, body, from string
	id                             int64
	created, updated               time.Time
	number                         int
	self, pr                       bool
}

func (e *env) comment(t *testing.T, m *Mirror, c commentEv) string {
	t.Helper()
	if c.number == 0 {
		c.number = 5
	}
	if c.typ == "" {
		c.typ = "User"
	}
	if c.updated.IsZero() {
		c.updated = c.created
	}
	issue := map[string]any{"number": c.number}
	if c.pr {
		issue["pull_request"] = map[string]any{"url": "x"}
	}
	p := map[string]any{"action": c.action,
		"comment": map[string]any{"id": c.id, "body": c.body, "created_at": c.created.Format(time.RFC3339), "updated_at": c.updated.Format(time.RFC3339),
			"user": map[string]any{"login": c.login, "type": c.typ}},
		"issue": issue, "repository": map[string]any{"id": e.repo}, "sender": map[string]any{"login": c.login, "type": c.typ}}
	if c.from != "" {
		p["changes"] = map[string]any{"body": map[string]any{"from": c.from}}
	}
	b, _ := json.Marshal(p)
	out, err := m.HandleIssueComment(e.ctx, Event{Name: "issue_comment", Action: c.action, Payload: b, FromSelf: c.self})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) trail(t *testing.T, n int) map[int64]store.TrailRecord {
	t.Helper()
	rs, err := e.l.TrailComments(e.ctx, e.repo, gating.IDFor(n))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]store.TrailRecord{}
	for _, r := range rs {
		out[r.CommentID] = r
	}
	return out
}

func claimLine(n int, owner string, fence int64) string {
	return fmt.Sprintf("<!-- backlog-worker: claim item=issue-%d owner=%s region=%s fence=%d at=2030-01-02T03:04:05Z -->", n, owner, testRegion, fence)
}

func TestTrailRecording(t *testing.T) {
	e := newEnv(t)
	m := newTrailMirror(t, e, map[string]string{"bob": "write", "mallory": "read"})
	e.create(5, tags())
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

	// Not items, pull requests: ignored.
	if out := e.comment(t, m, commentEv{action: "created", id: 1, login: "w[bot]", typ: "Bot", body: "x", created: t0, number: 6}); !strings.Contains(out, OutcomeIgnored) {
		t.Fatalf("non-item: %q", out)
	}
	if out := e.comment(t, m, commentEv{action: "created", id: 2, login: "w[bot]", typ: "Bot", body: "x", created: t0, pr: true}); !strings.HasSuffix(out, OutcomeIgnored) {
		t.Fatalf("pull request: %q", out)
	}

	// created, twice: idempotent.
	c := commentEv{action: "created", id: 10, login: "w[bot]", typ: "Bot", body: claimLine(5, "w/1", 1), created: t0}
	e.comment(t, m, c)
	first := e.trail(t, 5)[10]
	if out := e.comment(t, m, c); !strings.Contains(out, "already recorded") {
		t.Fatalf("duplicate created: %q", out)
	}
	if got := e.trail(t, 5)[10]; got != first || !got.IsAgent || got.HasWrite || got.Edited || got.EarliestBody != c.body {
		t.Fatalf("after a duplicate: %+v (first %+v)", got, first)
	}

	// edited with changes.body.from, twice: the earliest text stays.
	ed := commentEv{action: "edited", id: 10, login: "w[bot]", typ: "Bot", body: "now prose", from: c.body, created: t0, updated: t0.Add(time.Minute)}
	e.comment(t, m, ed)
	if out := e.comment(t, m, ed); !strings.Contains(out, "already recorded") {
		t.Fatalf("duplicate edited: %q", out)
	}
	if got := e.trail(t, 5)[10]; got.EarliestBody != c.body || got.CurrentBody != "now prose" || !got.Edited {
		t.Fatalf("edited: %+v", got)
	}

	// edited, first seen: earliest = changes.body.from.
	e.comment(t, m, commentEv{action: "edited", id: 11, login: "pm-agent", body: "changed", from: claimLine(5, "w/1", 1), created: t0.Add(time.Second), updated: t0.Add(time.Hour)})
	if got := e.trail(t, 5)[11]; got.EarliestBody != claimLine(5, "w/1", 1) || got.CurrentBody != "changed" || !got.Edited || !got.IsAgent {
		t.Fatalf("edited first seen: %+v", got)
	}
	// Its created delivery, processed late, changes nothing but the earliest
	// text (it is the original, older than the edit).
	e.comment(t, m, commentEv{action: "created", id: 11, login: "pm-agent", body: claimLine(5, "w/1", 1), created: t0.Add(time.Second)})
	if got := e.trail(t, 5)[11]; got.EarliestBody != claimLine(5, "w/1", 1) || got.CurrentBody != "changed" || !got.Edited {
		t.Fatalf("late created: %+v", got)
	}

	// First seen already edited: held to the text first seen, marked edited.
	e.comment(t, m, commentEv{action: "created", id: 12, login: "w[bot]", typ: "Bot", body: "first seen", created: t0.Add(2 * time.Second), updated: t0.Add(time.Hour)})
	if got := e.trail(t, 5)[12]; got.EarliestBody != "first seen" || !got.Edited {
		t.Fatalf("first seen edited: %+v", got)
	}
	// An older edit delivered later moves the earliest text back.
	e.comment(t, m, commentEv{action: "edited", id: 12, login: "w[bot]", typ: "Bot", body: "middle", from: "original", created: t0.Add(2 * time.Second), updated: t0.Add(time.Minute)})
	if got := e.trail(t, 5)[12]; got.EarliestBody != "original" || got.CurrentBody != "first seen" {
		t.Fatalf("older edit: %+v", got)
	}

	// deleted: known → flagged; unknown → inserted with its body as earliest.
	del := commentEv{action: "deleted", id: 10, login: "w[bot]", typ: "Bot", body: "now prose", created: t0, updated: t0.Add(time.Minute)}
	e.comment(t, m, del)
	if out := e.comment(t, m, del); !strings.Contains(out, "already recorded") {
		t.Fatalf("duplicate deleted: %q", out)
	}
	if got := e.trail(t, 5)[10]; !got.Deleted || got.EarliestBody != c.body {
		t.Fatalf("deleted: %+v", got)
	}
	e.comment(t, m, commentEv{action: "deleted", id: 13, login: "w[bot]", typ: "Bot", body: "gone", created: t0.Add(3 * time.Second)})
	if got := e.trail(t, 5)[13]; !got.Deleted || got.EarliestBody != "gone" || got.Edited {
		t.Fatalf("deleted unknown: %+v", got)
	}

	// Trust: a read-role outsider's marker is not trusted; a writer's is;
	// a failed lookup fails closed; warden's own comment is warden's.
	e.comment(t, m, commentEv{action: "created", id: 20, login: "mallory", body: claimLine(5, "x/1", 1), created: t0.Add(4 * time.Second)})
	e.comment(t, m, commentEv{action: "created", id: 21, login: "bob", body: claimLine(5, "w/1", 1), created: t0.Add(5 * time.Second)})
	e.comment(t, m, commentEv{action: "created", id: 22, login: "carol", body: claimLine(5, "w/1", 1), created: t0.Add(6 * time.Second)})
	e.comment(t, m, commentEv{action: "created", id: 23, login: "dave", body: "just prose", created: t0.Add(7 * time.Second)})
	e.comment(t, m, commentEv{action: "created", id: 24, login: "warden[bot]", typ: "Bot", body: "<!-- backlog-warden: report item=issue-5 -->", created: t0.Add(8 * time.Second), self: true})
	tr := e.trail(t, 5)
	if r := tr[20]; r.IsAgent || r.HasWrite || r.IsWarden {
		t.Fatalf("outsider trusted: %+v", r)
	}
	if r := tr[21]; r.IsAgent || !r.HasWrite {
		t.Fatalf("writer: %+v", r)
	}
	if r := tr[22]; r.HasWrite || r.IsAgent {
		t.Fatalf("failed lookup trusted: %+v", r)
	}
	if r := tr[24]; !r.IsWarden {
		t.Fatalf("warden's own: %+v", r)
	}
	// A failing client fails closed too.
	m2 := *m
	m2.GitHub = failingClients{}
	e.comment(t, &m2, commentEv{action: "created", id: 25, login: "bob", body: claimLine(5, "w/1", 1), created: t0.Add(9 * time.Second)})
	if r := e.trail(t, 5)[25]; r.HasWrite {
		t.Fatalf("no client, trusted: %+v", r)
	}

	// The snapshot reads the trail: the forged marker is reported and
	// counts nothing; the edited and deleted markers are reported.
	rs, err := e.l.Snapshot(e.ctx, e.repo)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, d := range rs.Ready().Defects {
		if d.Item == gating.IDFor(5) {
			codes[d.Code]++
		}
	}
	for _, want := range []string{gating.CodeForgedMarker, gating.CodeMarkerEdited, gating.CodeMarkerDeleted} {
		if codes[want] == 0 {
			t.Errorf("no %s among %v", want, codes)
		}
	}
}

// TestTrailCommentEvidence: a comment by the login that posted the current
// grant's claim marker is evidence of work; anyone else's is not.
func TestTrailCommentEvidence(t *testing.T) {
	e := newEnv(t)
	m := newTrailMirror(t, e, nil)
	e.create(5, tags())
	r := e.claim(5, "w/1", 60)
	fence := *r.FencingToken
	now := e.clock.Now()
	e.comment(t, m, commentEv{action: "created", id: 30, login: "w[bot]", typ: "Bot", body: claimLine(5, "w/1", fence), created: now})
	e.clock.Set(now.Add(10 * time.Minute))
	if out := e.comment(t, m, commentEv{action: "created", id: 31, login: "other[bot]", typ: "Bot", body: "hi", created: now.Add(5 * time.Minute)}); strings.Contains(out, "evidence") {
		t.Fatalf("another login's comment counted: %q", out)
	}
	out := e.comment(t, m, commentEv{action: "created", id: 32, login: "w[bot]", typ: "Bot", body: "progress", created: now.Add(5 * time.Minute)})
	if !strings.Contains(out, fmt.Sprintf("evidence of work for issue-5 fence %d", fence)) {
		t.Fatalf("holder's comment: %q", out)
	}
	at, kind, err := e.l.LastEvidence(e.ctx, e.repo, 5, fence)
	if err != nil || kind != store.EvidenceComment || at != now.Add(5*time.Minute).Truncate(time.Second).UnixMilli() {
		t.Fatalf("evidence %d %q %v", at, kind, err)
	}
}
