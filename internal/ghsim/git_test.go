package ghsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

// gitHook is one delivery the fixture's receiver got, decoded.
type gitHook struct {
	event, action string
	body          map[string]any
}

func (h gitHook) String() string {
	if h.action == "" {
		return h.event
	}
	return h.event + "." + h.action
}

// gitMark is the number of deliveries received so far (flushed first).
func gitMark(t *testing.T, f *fixture) int {
	t.Helper()
	f.flush(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// gitHooksSince flushes and returns the deliveries received after mark.
func gitHooksSince(t *testing.T, f *fixture, mark int) []gitHook {
	t.Helper()
	f.flush(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gitHook
	for _, g := range f.got[mark:] {
		var body map[string]any
		if err := json.Unmarshal(g.body, &body); err != nil {
			t.Fatalf("delivery %s: %v", g.event, err)
		}
		a, _ := body["action"].(string)
		out = append(out, gitHook{g.event, a, body})
	}
	return out
}

func gitNames(hs []gitHook) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.String())
	}
	return out
}

// gitExpect checks the sequence of deliveries (event or event.action).
func gitExpect(t *testing.T, hs []gitHook, want ...string) {
	t.Helper()
	if got := gitNames(hs); !slices.Equal(got, want) {
		t.Fatalf("deliveries %v, want %v", got, want)
	}
}

// gitGet reads a dotted path ("a.b.0.c") of a decoded payload.
func gitGet(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			var i int
			fmt.Sscan(k, &i)
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// gitRaw makes a raw request with the installation's client.
func gitRaw(t *testing.T, gh *github.Client, method, path string, body any, out any) *github.Response {
	t.Helper()
	req, err := gh.NewRequest(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := gh.Do(context.Background(), req, out)
	if resp == nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func gitStatus(resp *github.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

// gitIssue files an issue directly in the model (the issue side's API is
// not needed to test closing keywords).
func gitIssue(f *fixture, title string) int {
	n := 0
	f.sim.Locked(func() {
		r := f.repo
		r.lastNumber++
		now := f.sim.now()
		iss := &Issue{ID: f.sim.newID(), Number: r.lastNumber, Title: title, User: f.sim.userLocked("alice"),
			State: "open", CreatedAt: now, UpdatedAt: now}
		r.Issues[iss.Number] = iss
		n = iss.Number
	})
	return n
}

func TestGitInitialCommitAndContents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")

	var first string
	f.sim.Locked(func() { first = f.repo.Branches["main"] })
	if len(first) != 40 {
		t.Fatalf("main head %q", first)
	}
	fc, _, _, err := gh.Repositories.GetContents(ctx, "acme", "app", "README.md", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := fc.GetContent(); s != "# app\n" || fc.GetSHA() != gitBlobSHA("# app\n") || fc.GetType() != "file" {
		t.Fatalf("README %q sha %s", s, fc.GetSHA())
	}
	// The blob SHA is git's: `printf '# app\n' | git hash-object --stdin`.
	if got := gitBlobSHA("hello\n"); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Fatalf("blob sha %s", got)
	}
	// And so is a tree's (`git write-tree` of the same files).
	if got := gitTreeSHA(map[string]string{"hello": "hello\n", "d/e/f": "x\n", "d/g": "y"}); got != "c6f9d495c9694a6ceac6b790b31f5e15c808dc21" {
		t.Fatalf("tree sha %s", got)
	}

	settings := "labels:\n  item: backlog\npoison_threshold: 4\n"
	sha, err := alice.Push(f.repo, "main", "", map[string]string{".github/backlog.yml": settings}, "Configure warden")
	if err != nil {
		t.Fatal(err)
	}
	fc, _, resp, err := gh.Repositories.GetContents(ctx, "acme", "app", ".github/backlog.yml", &github.RepositoryContentGetOptions{Ref: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := fc.GetContent(); s != settings || fc.GetEncoding() != "base64" || fc.GetSize() != len(settings) ||
		fc.GetName() != "backlog.yml" || fc.GetPath() != ".github/backlog.yml" || fc.GetDownloadURL() == "" {
		t.Fatalf("backlog.yml %+v", fc)
	}
	if resp.Header.Get("ETag") == "" {
		t.Fatal("no ETag on contents")
	}
	// At the first commit the file does not exist; at the new SHA it does.
	if _, _, resp, err = gh.Repositories.GetContents(ctx, "acme", "app", ".github/backlog.yml", &github.RepositoryContentGetOptions{Ref: first}); gitStatus(resp) != 404 {
		t.Fatalf("missing path: %v", err)
	}
	if _, _, _, err = gh.Repositories.GetContents(ctx, "acme", "app", ".github/backlog.yml", &github.RepositoryContentGetOptions{Ref: sha[:10]}); err != nil {
		t.Fatalf("by abbreviated sha: %v", err)
	}
	if _, _, resp, _ = gh.Repositories.GetContents(ctx, "acme", "app", "README.md", &github.RepositoryContentGetOptions{Ref: "nope"}); gitStatus(resp) != 404 {
		t.Fatalf("unknown ref: %d", gitStatus(resp))
	}
	// Directories list their entries.
	_, dir, _, err := gh.Repositories.GetContents(ctx, "acme", "app", ".github", nil)
	if err != nil || len(dir) != 1 || dir[0].GetName() != "backlog.yml" || dir[0].GetType() != "file" {
		t.Fatalf("dir %v %v", dir, err)
	}
	_, root, _, err := gh.Repositories.GetContents(ctx, "acme", "app", "", nil)
	if err != nil || len(root) != 2 || root[0].GetType() != "dir" || root[0].GetPath() != ".github" || root[1].GetPath() != "README.md" {
		t.Fatalf("root %v %v", root, err)
	}
}

func TestGitPushWebhooks(t *testing.T) {
	f := newFixture(t)
	alice := f.sim.As("alice")
	m := gitMark(t, f)

	sha1, err := alice.Push(f.repo, "feature/x", "main", map[string]string{"a.txt": "one\n"}, "Add a")
	if err != nil {
		t.Fatal(err)
	}
	hs := gitHooksSince(t, f, m)
	gitExpect(t, hs, "push", "check_suite.requested")
	p := hs[0].body
	if p["ref"] != "refs/heads/feature/x" || p["created"] != true || p["deleted"] != false || p["before"] != zeroSHA ||
		p["after"] != sha1 || gitGet(p, "commits.0.id") != sha1 || gitGet(p, "commits.0.added.0") != "a.txt" ||
		gitGet(p, "commits.0.distinct") != true || gitGet(p, "head_commit.id") != sha1 || gitGet(p, "pusher.name") != "alice" ||
		gitGet(p, "sender.login") != "alice" || gitGet(p, "installation.id") != float64(f.inst.ID) ||
		gitGet(p, "commits.0.author.username") != "alice" || gitGet(p, "repository.full_name") != "acme/app" {
		t.Fatalf("push payload %v", p)
	}
	if _, ok := gitGet(p, "repository.created_at").(float64); !ok {
		t.Fatalf("push repository.created_at is not Unix seconds: %v", gitGet(p, "repository.created_at"))
	}
	cs := hs[1].body
	if gitGet(cs, "check_suite.head_sha") != sha1 || gitGet(cs, "check_suite.head_branch") != "feature/x" ||
		gitGet(cs, "check_suite.status") != "queued" || gitGet(cs, "check_suite.app.id") != float64(f.sim.AppID()) ||
		gitGet(cs, "sender.login") != "alice" {
		t.Fatalf("check_suite.requested %v", cs)
	}

	// A second push lists only the new commit; a rename is removed + added.
	m = gitMark(t, f)
	sha2, err := alice.Rename(f.repo, "feature/x", "a.txt", "docs/a.txt", "Move a")
	if err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "push", "check_suite.requested")
	p = hs[0].body
	if p["created"] != false || p["before"] != sha1 || p["after"] != sha2 || len(p["commits"].([]any)) != 1 ||
		gitGet(p, "commits.0.removed.0") != "a.txt" || gitGet(p, "commits.0.added.0") != "docs/a.txt" ||
		len(gitGet(p, "commits.0.modified").([]any)) != 0 || p["forced"] != false {
		t.Fatalf("rename push %v", p)
	}

	// Several commits in one push; then a force push back; then a delete.
	m = gitMark(t, f)
	sha3, err := alice.PushCommits(f.repo, "feature/x", "", []FileCommit{
		{Message: "b", Files: map[string]string{"b.txt": "b\n"}},
		{Message: "c", Files: map[string]string{"b.txt": "b2\n", "docs/a.txt": ""}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.ForcePush(f.repo, "feature/x", sha1); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteBranch(f.repo, "feature/x"); err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "push", "check_suite.requested", "push", "push")
	p = hs[0].body
	if p["after"] != sha3 || len(p["commits"].([]any)) != 2 || gitGet(p, "commits.1.modified.0") != "b.txt" ||
		gitGet(p, "commits.1.removed.0") != "docs/a.txt" || gitGet(p, "head_commit.id") != sha3 {
		t.Fatalf("two-commit push %v", p)
	}
	// Back to a commit that already has a suite: no new suite.
	p = hs[2].body
	if p["forced"] != true || p["after"] != sha1 || len(p["commits"].([]any)) != 0 {
		t.Fatalf("force push %v", p)
	}
	p = hs[3].body
	if p["deleted"] != true || p["after"] != zeroSHA || p["head_commit"] != nil || len(p["commits"].([]any)) != 0 {
		t.Fatalf("delete push %v", p)
	}
	if err := alice.DeleteBranch(f.repo, "main"); err == nil {
		t.Fatal("deleted the default branch")
	}
	// A branch made without a commit: created, base_ref names its origin;
	// main's first commit (made with the repository) has no suite yet.
	m = gitMark(t, f)
	if _, err := alice.CreateBranch(f.repo, "epic", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateBranch(f.repo, "epic2", "epic"); err != nil {
		t.Fatal(err)
	}
	hs = gitHooksSince(t, f, m)
	gitExpect(t, hs, "push", "check_suite.requested", "push")
	if hs[0].body["base_ref"] != "refs/heads/main" || hs[0].body["created"] != true {
		t.Fatalf("branch creation %v", hs[0].body)
	}
}

func TestGitCommitsBranchesRefs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	sha1, _ := alice.Push(f.repo, "feature/x", "main", map[string]string{"src/a.go": "package a\n"}, "Add a")
	sha2, _ := alice.Push(f.repo, "feature/x", "", map[string]string{"src/a.go": "package a\n\nvar X = 1\n", "README.md": ""}, "Grow a")

	// By SHA, by branch (a slash in it), by abbreviated SHA.
	for _, ref := range []string{sha2, "feature/x", sha2[:7], "heads/feature/x"} {
		c, _, err := gh.Repositories.GetCommit(ctx, "acme", "app", ref, nil)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if c.GetSHA() != sha2 || c.GetCommit().GetMessage() != "Grow a" || len(c.Parents) != 1 || c.Parents[0].GetSHA() != sha1 ||
			c.GetAuthor().GetLogin() != "alice" || c.GetStats().GetAdditions() != 2 || c.GetStats().GetDeletions() != 1 || len(c.Files) != 2 {
			t.Fatalf("%s: commit %+v", ref, c)
		}
		if c.Files[0].GetFilename() != "README.md" || c.Files[0].GetStatus() != "removed" || c.Files[1].GetStatus() != "modified" ||
			!strings.Contains(c.Files[1].GetPatch(), "+var X = 1") {
			t.Fatalf("%s: files %v", ref, c.Files)
		}
	}
	if _, resp, _ := gh.Repositories.GetCommit(ctx, "acme", "app", "nope", nil); gitStatus(resp) != 422 {
		t.Fatalf("unknown commit: %d", gitStatus(resp))
	}
	// History, newest first; by path.
	cs, _, err := gh.Repositories.ListCommits(ctx, "acme", "app", &github.CommitsListOptions{SHA: "feature/x"})
	if err != nil || len(cs) != 3 || cs[0].GetSHA() != sha2 || cs[1].GetSHA() != sha1 {
		t.Fatalf("history %v %v", cs, err)
	}
	cs, _, err = gh.Repositories.ListCommits(ctx, "acme", "app", &github.CommitsListOptions{SHA: "feature/x", Path: "README.md"})
	if err != nil || len(cs) != 2 || cs[0].GetSHA() != sha2 {
		t.Fatalf("history of README.md %v %v", cs, err)
	}
	cs, resp, err := gh.Repositories.ListCommits(ctx, "acme", "app", &github.CommitsListOptions{SHA: "feature/x", ListOptions: github.ListOptions{PerPage: 1}})
	if err != nil || len(cs) != 1 || resp.NextPage != 2 {
		t.Fatalf("paged history %v %v", cs, err)
	}
	cs, _, err = gh.Repositories.ListCommits(ctx, "acme", "app", nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("default branch history %v %v", cs, err)
	}
	// Branches: go-github escapes the slash; a raw request may not.
	b, _, err := gh.Repositories.GetBranch(ctx, "acme", "app", "feature/x", 0)
	if err != nil || b.GetName() != "feature/x" || b.GetCommit().GetSHA() != sha2 {
		t.Fatalf("branch %v %v", b, err)
	}
	var raw map[string]any
	if resp := gitRaw(t, gh, "GET", "repos/acme/app/branches/feature/x", nil, &raw); resp.StatusCode != 200 || raw["name"] != "feature/x" {
		t.Fatalf("raw branch %d %v", resp.StatusCode, raw)
	}
	if _, resp, _ := gh.Repositories.GetBranch(ctx, "acme", "app", "nope", 0); gitStatus(resp) != 404 {
		t.Fatalf("unknown branch: %d", gitStatus(resp))
	}
	bs, _, err := gh.Repositories.ListBranches(ctx, "acme", "app", nil)
	if err != nil || len(bs) != 2 || bs[0].GetName() != "feature/x" || bs[1].GetName() != "main" {
		t.Fatalf("branches %v %v", bs, err)
	}
	ref, _, err := gh.Git.GetRef(ctx, "acme", "app", "heads/feature/x")
	if err != nil || ref.GetRef() != "refs/heads/feature/x" || ref.GetObject().GetSHA() != sha2 || ref.GetObject().GetType() != "commit" {
		t.Fatalf("ref %v %v", ref, err)
	}
	if _, resp, _ := gh.Git.GetRef(ctx, "acme", "app", "heads/nope"); gitStatus(resp) != 404 {
		t.Fatalf("unknown ref: %d", gitStatus(resp))
	}
	refs, _, err := gh.Git.ListMatchingRefs(ctx, "acme", "app", &github.ReferenceListOptions{Ref: "heads/feat"})
	if err != nil || len(refs) != 1 || refs[0].GetRef() != "refs/heads/feature/x" {
		t.Fatalf("matching refs %v %v", refs, err)
	}
}

func TestGitCompare(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	base, _ := alice.Push(f.repo, "main", "", map[string]string{"keep.txt": "same content\n", "x.txt": "x\n"}, "Base")

	cmp := func(b, h string) *github.CommitsComparison {
		t.Helper()
		c, _, err := gh.Repositories.CompareCommits(ctx, "acme", "app", b, h, nil)
		if err != nil {
			t.Fatalf("%s...%s: %v", b, h, err)
		}
		return c
	}
	if c := cmp("main", "main"); c.GetStatus() != "identical" || c.GetAheadBy() != 0 || c.GetTotalCommits() != 0 || len(c.Files) != 0 {
		t.Fatalf("identical %+v", c)
	}
	h1, _ := alice.Push(f.repo, "feature/y", "main", map[string]string{"keep.txt": "", "moved.txt": "same content\n"}, "Move keep")
	h2, _ := alice.Push(f.repo, "feature/y", "", map[string]string{"x.txt": "x\ny\n"}, "Grow x")
	c := cmp("main", "feature/y")
	if c.GetStatus() != "ahead" || c.GetAheadBy() != 2 || c.GetBehindBy() != 0 || c.GetTotalCommits() != 2 ||
		c.GetMergeBaseCommit().GetSHA() != base || c.GetBaseCommit().GetSHA() != base ||
		len(c.Commits) != 2 || c.Commits[0].GetSHA() != h1 || c.Commits[1].GetSHA() != h2 {
		t.Fatalf("ahead %+v", c)
	}
	if len(c.Files) != 2 || c.Files[0].GetFilename() != "moved.txt" || c.Files[0].GetStatus() != "renamed" ||
		c.Files[0].GetPreviousFilename() != "keep.txt" || c.Files[1].GetFilename() != "x.txt" || c.Files[1].GetStatus() != "modified" ||
		c.Files[1].GetAdditions() != 1 || c.Files[1].GetDeletions() != 0 {
		t.Fatalf("files %v", c.Files)
	}
	if c := cmp("feature/y", "main"); c.GetStatus() != "behind" || c.GetBehindBy() != 2 || c.GetAheadBy() != 0 || len(c.Files) != 0 {
		t.Fatalf("behind %+v", c)
	}
	m1, _ := alice.Push(f.repo, "main", "", map[string]string{"main.txt": "m\n"}, "Main moves")
	c = cmp("main", "feature/y")
	if c.GetStatus() != "diverged" || c.GetAheadBy() != 2 || c.GetBehindBy() != 1 || c.GetMergeBaseCommit().GetSHA() != base ||
		c.GetBaseCommit().GetSHA() != m1 || len(c.Files) != 2 {
		t.Fatalf("diverged %+v", c)
	}
	// SHAs, and a raw request with the slash unescaped; paging.
	if c := cmp(base, h2); c.GetStatus() != "ahead" || c.GetAheadBy() != 2 {
		t.Fatalf("by sha %+v", c)
	}
	var raw map[string]any
	if resp := gitRaw(t, gh, "GET", "repos/acme/app/compare/main...feature/y", nil, &raw); resp.StatusCode != 200 || raw["status"] != "diverged" {
		t.Fatalf("raw compare %d %v", resp.StatusCode, raw["status"])
	}
	c, resp, err := gh.Repositories.CompareCommits(ctx, "acme", "app", "main", "feature/y", &github.ListOptions{PerPage: 1, Page: 2})
	if err != nil || len(c.Commits) != 1 || c.Commits[0].GetSHA() != h2 || len(c.Files) != 0 || resp.PrevPage != 1 {
		t.Fatalf("page 2: %+v %v", c, err)
	}
	if _, resp, _ := gh.Repositories.CompareCommits(ctx, "acme", "app", "main", "nope", nil); gitStatus(resp) != 404 {
		t.Fatalf("unknown head: %d", gitStatus(resp))
	}
}

// TestGitRouteAttribution: a catch-all answer for a ref with slashes is
// recorded under the route it stands for.
func TestGitRouteAttribution(t *testing.T) {
	f := newFixture(t)
	gh, _ := f.app.Installation(f.inst.ID)
	alice := f.sim.As("alice")
	if _, err := alice.Push(f.repo, "feature/z", "main", map[string]string{"z": "z\n"}, "z"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	f.sim.Locked(func() {
		prev := f.sim.onExchange
		f.sim.onExchange = func(e Exchange) {
			if strings.Contains(e.Pattern, "/commits/") {
				got <- e.Pattern
			}
			if prev != nil {
				prev(e)
			}
		}
	})
	var runs github.ListCheckRunsResults
	if resp := gitRaw(t, gh, "GET", "repos/acme/app/commits/feature/z/check-runs", nil, &runs); resp.StatusCode != 200 {
		t.Fatalf("check runs for feature/z: %d", resp.StatusCode)
	}
	select {
	case p := <-got:
		if p != "/repos/{owner}/{repo}/commits/{ref}/check-runs" {
			t.Fatalf("recorded as %s", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exchange recorded")
	}
	if resp := gitRaw(t, gh, "GET", "repos/acme/app/commits/feature/z/status", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status for feature/z: %d", resp.StatusCode)
	}
}
