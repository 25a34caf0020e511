package agentapi

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

func tagsOf(r resp) []string {
	var out []string
	for _, t := range r.body["tags"].([]any) {
		out = append(out, t.(string))
	}
	return out
}

func TestCreateOpensTheIssueThenWritesTheItem(t *testing.T) {
	f := newFixture(t)
	spec := "## What\nMake the WAL batch its fsyncs.\n\n## Done when\nThe bench shows it."
	r := f.must(f.call("POST", "items", tokPM, map[string]any{
		"title": "Batch WAL fsyncs", "specification": spec, "provenance": "pm run 12",
		"tags":  []string{"priority:P1", "resource:bench-box"},
		"links": []any{map[string]any{"rel": "anchoredTo", "target": "internal/db/db.go"}},
	}), 201)
	n := int(r.num("number"))
	if r.str("id") != fmt.Sprintf("issue-%d", n) || n == 0 || r.str("outcome") != OutcomeCreated {
		t.Fatalf("answer %s", r.raw)
	}
	if loc := r.header.Get("Location"); loc != fmt.Sprintf("/api/v1/repos/acme/app/items/issue-%d", n) {
		t.Fatalf("Location %q", loc)
	}
	iss, ok := f.issue(n)
	if !ok {
		t.Fatalf("no issue #%d in the simulator", n)
	}
	if iss.Title != "Batch WAL fsyncs" || !strings.HasPrefix(iss.Body, spec) || !strings.Contains(iss.Body, "<!-- warden-request: ") ||
		iss.Author != f.sim.BotLogin() {
		t.Fatalf("issue %+v", iss)
	}
	if !hasLabel(iss.Labels, "backlog") || !hasLabel(iss.Labels, "needs-specification") || len(iss.Labels) != 2 {
		t.Fatalf("labels %v", iss.Labels)
	}
	// Missing mandatory tags took the repository's defaults; given ones stay.
	want := []string{"backlog", "priority:P1", "phase:implementation", "homeRegion:local", "baseBranch:main", "resource:bench-box"}
	got := tagsOf(r)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Fatalf("tags %v lack %s", got, w)
		}
	}
	if slices.Contains(got, "priority:P2") {
		t.Fatalf("a default overrode a given tag: %v", got)
	}
	if !strings.HasPrefix(r.str("body"), fmt.Sprintf("See #%d", n)) || !strings.Contains(r.str("body"), "resumeNote:") ||
		r.str("author") != "pm" || r.str("provenance") != "pm run 12" {
		t.Fatalf("item %s", r.raw)
	}
	// It is in the ledger, and GET shows it with its findings.
	g := f.must(f.call("GET", "items/issue-"+fmt.Sprint(n), tokWorker1, nil), 200)
	if g.num("attempts") != 0 || g.body["claim"].(map[string]any)["exists"] != true || len(g.body["staleLinks"].([]any)) != 0 {
		t.Fatalf("detail %s", g.raw)
	}
	// A pm token's item is not admitted: nothing recorded.
	if adm, _ := f.acts.Admission(context.Background(), f.mrepo.ID, n); adm != nil {
		t.Fatalf("pm item admitted: %+v", adm)
	}

	// A human token's item is admitted at creation: no admission label, act recorded.
	h := f.must(f.call("POST", "items", tokHuman, map[string]any{"title": "Human item", "specification": "Do it."}), 201)
	hn := int(h.num("number"))
	if hn != n+1 {
		t.Fatalf("second item #%d after #%d", hn, n)
	}
	hi, _ := f.issue(hn)
	if !hasLabel(hi.Labels, "backlog") || hasLabel(hi.Labels, "needs-specification") {
		t.Fatalf("human item labels %v", hi.Labels)
	}
	adm, err := f.acts.Admission(context.Background(), f.mrepo.ID, hn)
	if err != nil || adm == nil || adm.By != "alice" || adm.How != "human token" {
		t.Fatalf("admission %+v %v", adm, err)
	}
}

func TestCreateRefusedByTheLedgerTouchesNoGitHub(t *testing.T) {
	f := newFixture(t)
	f.seed(7, []string{"state:parked", "ruling-owner:pm", "ruling-topic:why"})
	cases := []struct {
		name     string
		body     map[string]any
		reason   string
		rejected bool
	}{
		{"dangling blocker", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "blockedBy", "target": "issue-99"}}}, "dangling-blocker", true},
		{"parked blocker", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "blockedBy", "target": "repo/app/mem/backlog/issue-7"}}}, "stalled-by-parked", true},
		{"duplicate priority", map[string]any{"title": "t", "specification": "s", "tags": []string{"priority:P1", "priority:P3"}}, "duplicate-attribute-tag", false},
		{"bad priority", map[string]any{"title": "t", "specification": "s", "tags": []string{"priority:P9"}}, "invalid-priority", false},
		{"complete at birth", map[string]any{"title": "t", "specification": "s", "tags": []string{"state:complete"}}, "completion-unproven", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.call("POST", "items", tokPM, c.body)
			f.problemIs(r, 409, c.reason)
			if c.rejected && len(r.body["rejected"].([]any)) == 0 {
				t.Fatalf("no rejected values: %s", r.raw)
			}
		})
	}
	if n := f.issueCount(); n != 0 {
		t.Fatalf("refused creates opened %d issues", n)
	}
}

// dropLabels is the GitHub adapter with GitHub's silent label drop: right
// after an issue is opened, the admission label is gone from it and from
// the answer.
type dropLabels struct {
	GitHub
	f     *fixture
	label string
	added [][]string
	mu    sync.Mutex
}

func (d *dropLabels) CreateIssue(ctx context.Context, r store.Repo, title, body string, labels []string) (Issue, error) {
	i, err := d.GitHub.CreateIssue(ctx, r, title, body, labels)
	if err != nil {
		return i, err
	}
	d.f.sim.Locked(func() {
		si := d.f.repo.Issues[i.Number]
		kept := si.Labels[:0]
		for _, l := range si.Labels {
			if !strings.EqualFold(l.Name, d.label) {
				kept = append(kept, l)
			}
		}
		si.Labels = kept
	})
	var ls []string
	for _, l := range i.Labels {
		if !strings.EqualFold(l, d.label) {
			ls = append(ls, l)
		}
	}
	i.Labels = ls
	return i, nil
}

func (d *dropLabels) AddLabels(ctx context.Context, r store.Repo, number int, labels []string) ([]string, error) {
	d.mu.Lock()
	d.added = append(d.added, labels)
	d.mu.Unlock()
	return d.GitHub.AddLabels(ctx, r, number, labels)
}

func TestCreateReaddsLabelsGitHubDropped(t *testing.T) {
	var drop *dropLabels
	f := newFixture(t, func(f *fixture) {
		drop = &dropLabels{GitHub: f.gh, f: f, label: "needs-specification"}
		f.gh = drop
	})
	r := f.must(f.call("POST", "items", tokPM, map[string]any{"title": "t", "specification": "s"}), 201)
	iss, _ := f.issue(int(r.num("number")))
	if !hasLabel(iss.Labels, "needs-specification") || !hasLabel(iss.Labels, "backlog") {
		t.Fatalf("labels after create: %v", iss.Labels)
	}
	if len(drop.added) != 1 || !slices.Equal(drop.added[0], []string{"needs-specification"}) {
		t.Fatalf("re-added %v, want exactly the dropped label", drop.added)
	}
}

func TestCreateRetryAfterAFailureAdoptsTheIssue(t *testing.T) {
	f := newFixture(t)
	body := map[string]any{"title": "Retry me", "specification": "The spec.", "tags": []string{"priority:P1"}}

	// The issue is opened, then writing the item fails.
	f.store.failCreates.Store(1)
	r := f.call("POST", "items", tokPM, body, IdempotencyHeader, "run-7/item-1")
	f.problemIs(r, 500, ReasonInternal)
	if strings.Contains(string(r.raw), "injected") {
		t.Fatalf("an internal error leaked: %s", r.raw)
	}
	if f.issueCount() != 1 {
		t.Fatalf("%d issues after the failed attempt", f.issueCount())
	}
	// The retry adopts that issue: still one issue, and the item exists.
	r = f.must(f.call("POST", "items", tokPM, body, IdempotencyHeader, "run-7/item-1"), 201)
	if r.str("outcome") != OutcomeAdopted || f.issueCount() != 1 {
		t.Fatalf("retry: %s (%d issues)", r.raw, f.issueCount())
	}
	n := int(r.num("number"))
	if _, err := f.ledger.Get(context.Background(), f.mrepo.ID, gating.IDFor(n)); err != nil {
		t.Fatalf("item after the retry: %v", err)
	}
	// Another retry replays (the response was lost, say): nothing new.
	r = f.must(f.call("POST", "items", tokPM, body, IdempotencyHeader, "run-7/item-1"), 200)
	if r.str("outcome") != OutcomeReplayed || int(r.num("number")) != n || f.issueCount() != 1 {
		t.Fatalf("replay: %s", r.raw)
	}
	// The same key for a different request is refused.
	other := map[string]any{"title": "Something else", "specification": "Other."}
	f.problemIs(f.call("POST", "items", tokPM, other, IdempotencyHeader, "run-7/item-1"), 422, ReasonKeyReused)
	// A restarted process finds the item from the issue's marker.
	f.start()
	r = f.must(f.call("POST", "items", tokPM, body, IdempotencyHeader, "run-7/item-1"), 200)
	if r.str("outcome") != OutcomeReplayed || int(r.num("number")) != n || f.issueCount() != 1 {
		t.Fatalf("replay after restart: %s", r.raw)
	}
	// The same key from another token is another request.
	r = f.must(f.call("POST", "items", tokHuman, body, IdempotencyHeader, "run-7/item-1"), 201)
	if int(r.num("number")) == n || f.issueCount() != 2 {
		t.Fatalf("another token's key: %s", r.raw)
	}
}

func TestCreateRetryWithoutAKeyUsesTheRequest(t *testing.T) {
	f := newFixture(t)
	body := map[string]any{"title": "No key", "specification": "Spec.", "tags": []string{"priority:P1", "phase:research"}}
	f.store.failCreates.Store(1)
	f.problemIs(f.call("POST", "items", tokPM, body), 500, ReasonInternal)
	f.start() // and the process restarted meanwhile
	// The same request with its tags in another order is the same request.
	body["tags"] = []string{"phase:research", "priority:P1"}
	r := f.must(f.call("POST", "items", tokPM, body), 201)
	if r.str("outcome") != OutcomeAdopted || f.issueCount() != 1 {
		t.Fatalf("retry: %s (%d issues)", r.raw, f.issueCount())
	}
	// A different request is a new item.
	body["title"] = "No key, second"
	f.must(f.call("POST", "items", tokPM, body), 201)
	if f.issueCount() != 2 {
		t.Fatalf("%d issues", f.issueCount())
	}
}

func TestConcurrentIdenticalCreatesOpenOneIssue(t *testing.T) {
	f := newFixture(t)
	body := map[string]any{"title": "Once", "specification": "Only once."}
	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = f.call("POST", "items", tokPM, body, IdempotencyHeader, "same").status
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case 201:
			created++
		case 200:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if created != 1 || f.issueCount() != 1 {
		t.Fatalf("%d created, %d issues (statuses %v)", created, f.issueCount(), statuses)
	}
}

func TestCreatePartOfAnEpicAttachesTheSubIssue(t *testing.T) {
	f := newFixture(t)
	epic := f.must(f.call("POST", "items", tokPM, map[string]any{"title": "Epic: WAL", "specification": "The epic.",
		"tags": []string{"baseBranch:feat/epic/wal"}}), 201)
	en := int(epic.num("number"))
	child := f.must(f.call("POST", "items", tokPM, map[string]any{"title": "WAL part 1", "specification": "Part.",
		"links": []any{map[string]any{"rel": "partOf", "target": fmt.Sprintf("repo/%d/mem/backlog/issue-%d", f.mrepo.ID, en)}}}), 201)
	cn := int(child.num("number"))
	ci, _ := f.issue(cn)
	if ci.Parent != en {
		t.Fatalf("issue #%d has parent #%d, want #%d", cn, ci.Parent, en)
	}
	// The member's baseBranch is the epic's, and the key became an item id.
	if !slices.Contains(tagsOf(child), "baseBranch:feat/epic/wal") {
		t.Fatalf("child tags %v", tagsOf(child))
	}
	links := child.body["links"].([]any)
	if l := links[0].(map[string]any); l["rel"] != "partOf" || l["target"] != fmt.Sprintf("issue-%d", en) {
		t.Fatalf("links %v", links)
	}
	// A member on the default branch is refused before any issue is opened.
	before := f.issueCount()
	r := f.call("POST", "items", tokPM, map[string]any{"title": "WAL part 2", "specification": "Part.",
		"tags":  []string{"baseBranch:main"},
		"links": []any{map[string]any{"rel": "partOf", "target": fmt.Sprintf("issue-%d", en)}}})
	f.problemIs(r, 409, "epic-child-on-main")
	if f.issueCount() != before {
		t.Fatal("a refused create opened an issue")
	}
	// A retry of a member whose item write failed re-attaches harmlessly.
	f.store.failCreates.Store(1)
	body := map[string]any{"title": "WAL part 3", "specification": "Part.", "links": []any{map[string]any{"rel": "partOf", "target": fmt.Sprintf("issue-%d", en)}}}
	f.problemIs(f.call("POST", "items", tokPM, body), 500, ReasonInternal)
	r = f.must(f.call("POST", "items", tokPM, body), 201)
	if p, _ := f.issue(int(r.num("number"))); p.Parent != en || r.str("outcome") != OutcomeAdopted {
		t.Fatalf("retried member: %s parent #%d", r.raw, p.Parent)
	}
}

func TestDryRunRefusesWritesToGitHub(t *testing.T) {
	f := newFixture(t, func(f *fixture) {
		f.opt.DryRun = func(r store.Repo) bool { return r.FullName == "acme/app" }
	})
	f.problemIs(f.call("POST", "items", tokPM, map[string]any{"title": "t", "specification": "s"}), 409, ReasonDryRun)
	f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": 1}), 409, ReasonDryRun)
	if f.issueCount() != 0 {
		t.Fatal("dry run opened an issue")
	}
	// Reading and claiming still work.
	f.must(f.call("GET", "items", tokPM, nil), 200)
}

// mergedPR pushes a branch, opens a pull request into base and merges it
// unless open is true.
func mergedPR(t *testing.T, f *fixture, branch, base string, merge bool) int {
	t.Helper()
	alice := f.sim.As("alice")
	if _, err := alice.Push(f.repo, branch, base, map[string]string{branch + ".txt": "work"}, "work"); err != nil {
		t.Fatal(err)
	}
	// A branch named for an item delivers it (the PR links it by its body).
	body := ""
	if m := regexp.MustCompile(`issue-(\d+)`).FindStringSubmatch(branch); m != nil {
		body = "Closes #" + m[1]
	}
	pr, err := alice.OpenPR(f.repo, branch, base, "PR "+branch, body, false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	f.sim.Locked(func() { n = pr.Issue.Number })
	if merge {
		if _, err := alice.MergePR(f.repo, n, "merge"); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func TestAdopt(t *testing.T) {
	f := newFixture(t)
	alice := f.sim.As("alice")
	iss, err := alice.OpenIssue(f.repo, "Filed by a person", "Please do this.")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	f.sim.Locked(func() { n = iss.Number })
	r := f.must(f.call("POST", "items/adopt", tokPM, map[string]any{"number": n, "tags": []string{"priority:P0"}}), 201)
	if r.str("id") != fmt.Sprintf("issue-%d", n) || r.str("title") != "Filed by a person" || r.str("outcome") != OutcomeAdopted ||
		!slices.Contains(tagsOf(r), "priority:P0") || !slices.Contains(tagsOf(r), "baseBranch:main") {
		t.Fatalf("adopted %s", r.raw)
	}
	got, _ := f.issue(n)
	if !hasLabel(got.Labels, "backlog") || !hasLabel(got.Labels, "needs-specification") {
		t.Fatalf("labels %v", got.Labels)
	}
	f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": n}), 409, ReasonExists)
	f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": 999}), 404, ReasonMissing)
	pr := mergedPR(t, f, "feat/x", "main", false)
	f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": pr}), 409, ReasonPullRequest)
}

func TestAdoptDirectDeploymentNeedsAMergedPR(t *testing.T) {
	f := newFixture(t)
	alice := f.sim.As("alice")
	open := mergedPR(t, f, "fix/open", "main", false)
	merged := mergedPR(t, f, "fix/merged", "main", true)
	closed := mergedPR(t, f, "fix/closed", "main", false)
	if err := alice.ClosePR(f.repo, closed); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateBranch(f.repo, "release", "main"); err != nil {
		t.Fatal(err)
	}
	intoOther := mergedPR(t, f, "fix/other", "release", true)
	newIssue := func() int {
		i, err := alice.OpenIssue(f.repo, "Hotfix", "Deployed directly.")
		if err != nil {
			t.Fatal(err)
		}
		var n int
		f.sim.Locked(func() { n = i.Number })
		return n
	}
	row := func(pr int) []string {
		return []string{"state:complete", fmt.Sprintf("pr:%d", pr), "direct-deployment"}
	}
	cases := []struct {
		name   string
		tags   []string
		reason string
	}{
		{"open PR", row(open), gating.ReasonCompleteWithOpenPR},
		{"closed unmerged PR", row(closed), reasonUnproven},
		{"merged into another branch", row(intoOther), reasonUnproven},
		{"no such PR", row(9999), reasonUnproven},
		{"not a direct deployment", []string{"state:complete", fmt.Sprintf("pr:%d", merged)}, reasonUnproven},
		{"no pr tag", []string{"state:complete", "direct-deployment"}, reasonUnproven},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newIssue()
			f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": n, "tags": c.tags}), 409, c.reason)
			if _, ok := f.ledger.Get(context.Background(), f.mrepo.ID, gating.IDFor(n)); ok == nil {
				t.Fatal("a refused adopt wrote the item")
			}
		})
	}
	n := newIssue()
	r := f.must(f.call("POST", "items/adopt", tokPM, map[string]any{"number": n, "tags": row(merged)}), 201)
	tags := tagsOf(r)
	for _, w := range []string{"state:complete", fmt.Sprintf("pr:%d", merged), "direct-deployment", "backlog", "priority:P2"} {
		if !slices.Contains(tags, w) {
			t.Fatalf("tags %v lack %s", tags, w)
		}
	}
	g := f.must(f.call("GET", fmt.Sprintf("items/issue-%d", n), tokPM, nil), 200)
	if g.num("attempts") != 0 || g.body["claim"].(map[string]any)["claimed"] != false {
		t.Fatalf("direct deployment has claim history: %s", g.raw)
	}
	// The same PR cannot complete a second item.
	f.problemIs(f.call("POST", "items/adopt", tokPM, map[string]any{"number": newIssue(), "tags": row(merged)}), 409, reasonUnproven)
}

func TestGitHubFailuresAreProblems(t *testing.T) {
	f := newFixture(t)
	body := map[string]any{"title": "t", "specification": "s"}
	// A 5xx from GitHub: 502, nothing written; the next try succeeds.
	f.sim.FailNext(1, 502, "GET", "/repos/")
	f.problemIs(f.call("POST", "items", tokPM, body), 502, ReasonGitHub)
	if f.issueCount() != 0 {
		t.Fatal("an issue was opened")
	}
	f.must(f.call("POST", "items", tokPM, body), 201)
	// An exhausted budget: 503 with Retry-After.
	f.sim.SetRemaining(f.inst.ID, 0)
	r := f.call("POST", "items", tokPM, map[string]any{"title": "t2", "specification": "s"})
	f.problemIs(r, 503, ReasonRateLimited)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After: %v", r.header)
	}
}

func TestAdoptRefusedAsASubIssue(t *testing.T) {
	f := newFixture(t)
	alice := f.sim.As("alice")
	open := func(title string) int {
		i, err := alice.OpenIssue(f.repo, title, "body")
		if err != nil {
			t.Fatal(err)
		}
		var n int
		f.sim.Locked(func() { n = i.Number })
		return n
	}
	epicA, epicB, child := open("Epic A"), open("Epic B"), open("Child")
	if _, err := alice.AddSubIssue(f.repo, epicB, child); err != nil {
		t.Fatal(err)
	}
	f.seed(epicA, []string{"baseBranch:feat/epic/a"})
	// The child already has another parent on GitHub: adopting it into A is
	// refused, and nothing is written.
	r := f.call("POST", "items/adopt", tokPM, map[string]any{"number": child,
		"links": []any{map[string]any{"rel": "partOf", "target": fmt.Sprintf("issue-%d", epicA)}}})
	f.problemIs(r, 409, ReasonSubIssue)
	if _, err := f.ledger.Get(context.Background(), f.mrepo.ID, gating.IDFor(child)); err == nil {
		t.Fatal("the refused adopt wrote the item")
	}
	// Into B, where it already is, adopting works (the attachment is idempotent).
	f.seed(epicB, []string{"baseBranch:feat/epic/b"})
	r = f.must(f.call("POST", "items/adopt", tokPM, map[string]any{"number": child,
		"links": []any{map[string]any{"rel": "partOf", "target": fmt.Sprintf("issue-%d", epicB)}}}), 201)
	if !slices.Contains(tagsOf(r), "baseBranch:feat/epic/b") {
		t.Fatalf("member tags %v", tagsOf(r))
	}
}
