package ghsim

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The commit graph: every commit holds its whole tree (path -> content), so
// diffs, merges and contents are computed from snapshots. Blob and tree SHAs
// are git's own (a tree is hashed as git hashes it, directories included);
// commit SHAs are sha1 over a git-like commit object plus a creation
// sequence, so that two commits made in the same second with the same
// content still differ.

const zeroSHA = "0000000000000000000000000000000000000000"

var hexRE = regexp.MustCompile(`^[0-9a-f]{4,40}$`)

func gitBlobSHA(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// gitTree is one directory of a snapshot.
type gitTree struct {
	files map[string]string   // name -> content
	dirs  map[string]*gitTree // name -> subdirectory
}

func buildTree(files map[string]string) *gitTree {
	root := &gitTree{files: map[string]string{}, dirs: map[string]*gitTree{}}
	for p, c := range files {
		t := root
		parts := strings.Split(p, "/")
		for _, d := range parts[:len(parts)-1] {
			sub := t.dirs[d]
			if sub == nil {
				sub = &gitTree{files: map[string]string{}, dirs: map[string]*gitTree{}}
				t.dirs[d] = sub
			}
			t = sub
		}
		t.files[parts[len(parts)-1]] = c
	}
	return root
}

// sha hashes the tree as git does: entries sorted by name, a directory's
// name compared as if it ended in "/".
func (t *gitTree) sha() string {
	type entry struct {
		key, name, mode string
		sha             []byte
	}
	var es []entry
	for n, c := range t.files {
		b, _ := hex.DecodeString(gitBlobSHA(c))
		es = append(es, entry{n, n, "100644", b})
	}
	for n, d := range t.dirs {
		b, _ := hex.DecodeString(d.sha())
		es = append(es, entry{n + "/", n, "40000", b})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].key < es[j].key })
	var body bytes.Buffer
	for _, e := range es {
		body.WriteString(e.mode + " " + e.name + "\x00")
		body.Write(e.sha)
	}
	h := sha1.New()
	fmt.Fprintf(h, "tree %d\x00", body.Len())
	h.Write(body.Bytes())
	return hex.EncodeToString(h.Sum(nil))
}

func gitTreeSHA(files map[string]string) string { return buildTree(files).sha() }

// gitIdent is the name and email git records for an account.
func gitIdent(u *User) (name, email string) {
	if u == nil {
		return "GitHub", "noreply@github.com"
	}
	return u.Login, fmt.Sprintf("%d+%s@users.noreply.github.com", u.ID, u.Login)
}

// newCommitLocked records a commit with the given tree and returns it.
// committer nil means GitHub itself (web-flow), as for merges made on github.com.
func (s *Sim) newCommitLocked(r *Repo, parents []string, files map[string]string, message string, author, committer *User, when time.Time) *Commit {
	seq := s.newID()
	tree := gitTreeSHA(files)
	var obj bytes.Buffer
	fmt.Fprintf(&obj, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&obj, "parent %s\n", p)
	}
	an, ae := gitIdent(author)
	cn, ce := gitIdent(committer)
	fmt.Fprintf(&obj, "author %s <%s> %d +0000\ncommitter %s <%s> %d +0000\nsimulator-seq %d\n\n%s",
		an, ae, when.Unix(), cn, ce, when.Unix(), seq, message)
	h := sha1.New()
	fmt.Fprintf(h, "commit %d\x00", obj.Len())
	h.Write(obj.Bytes())
	c := &Commit{SHA: hex.EncodeToString(h.Sum(nil)), Parents: append([]string(nil), parents...), Message: message,
		Author: author, Committer: committer, Time: when, Files: files, TreeSHA: tree, Seq: seq}
	r.Commits[c.SHA] = c
	return c
}

// resolveLocked turns a ref (branch, heads/branch, refs/heads/branch, a full
// or abbreviated SHA) into a commit.
func resolveLocked(r *Repo, ref string) *Commit {
	if ref == "" {
		return nil
	}
	for _, p := range []string{"refs/heads/", "heads/"} {
		if b, ok := strings.CutPrefix(ref, p); ok {
			if sha, ok := r.Branches[b]; ok {
				return r.Commits[sha]
			}
			return nil
		}
	}
	if sha, ok := r.Branches[ref]; ok {
		return r.Commits[sha]
	}
	ref = strings.ToLower(ref)
	if c := r.Commits[ref]; c != nil {
		return c
	}
	if !hexRE.MatchString(ref) {
		return nil
	}
	var found *Commit
	for sha, c := range r.Commits {
		if strings.HasPrefix(sha, ref) {
			if found != nil {
				return nil // ambiguous
			}
			found = c
		}
	}
	return found
}

// ancestorsLocked is the set of commits reachable from sha, sha included.
func ancestorsLocked(r *Repo, sha string) map[string]bool {
	seen := map[string]bool{}
	stack := []string{sha}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c == "" || seen[c] || r.Commits[c] == nil {
			continue
		}
		seen[c] = true
		stack = append(stack, r.Commits[c].Parents...)
	}
	return seen
}

// mergeBaseLocked is the best common ancestor of a and b (nil when the
// histories are unrelated): the common ancestor created last, which no
// other common ancestor descends from.
func mergeBaseLocked(r *Repo, a, b string) *Commit {
	aa := ancestorsLocked(r, a)
	var best *Commit
	for sha := range ancestorsLocked(r, b) {
		if aa[sha] {
			if c := r.Commits[sha]; best == nil || c.Seq > best.Seq {
				best = c
			}
		}
	}
	return best
}

// onlyInLocked lists the commits reachable from head and not from base,
// oldest first (parents before children).
func onlyInLocked(r *Repo, head, base string) []*Commit {
	exclude := map[string]bool{}
	if base != "" {
		exclude = ancestorsLocked(r, base)
	}
	var out []*Commit
	for sha := range ancestorsLocked(r, head) {
		if !exclude[sha] {
			out = append(out, r.Commits[sha])
		}
	}
	sortCommits(out)
	return out
}

func sortCommits(cs []*Commit) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Seq < cs[j].Seq })
}

// fileChange is one path's change between two snapshots.
type fileChange struct {
	Path, Previous string // Previous: the old path of a rename
	Status         string // added, removed, modified, renamed
	Old, New       string
}

// diffTrees compares two snapshots, sorted by path. With renames, a removed
// path and an added path of identical content pair up as a rename.
func diffTrees(from, to map[string]string, renames bool) []fileChange {
	var out []fileChange
	var added, removed []string
	for p, c := range to {
		old, ok := from[p]
		switch {
		case !ok:
			added = append(added, p)
		case old != c:
			out = append(out, fileChange{Path: p, Status: "modified", Old: old, New: c})
		}
	}
	for p := range from {
		if _, ok := to[p]; !ok {
			removed = append(removed, p)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	used := map[string]bool{}
	for _, p := range added {
		if renames {
			matched := ""
			for _, q := range removed {
				if !used[q] && from[q] == to[p] {
					matched = q
					break
				}
			}
			if matched != "" {
				used[matched] = true
				out = append(out, fileChange{Path: p, Previous: matched, Status: "renamed", Old: from[matched], New: to[p]})
				continue
			}
		}
		out = append(out, fileChange{Path: p, Status: "added", New: to[p]})
	}
	for _, q := range removed {
		if !used[q] {
			out = append(out, fileChange{Path: q, Status: "removed", Old: from[q]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// parentFiles is the snapshot of c's first parent (empty for a root commit).
func parentFilesLocked(r *Repo, c *Commit) map[string]string {
	if len(c.Parents) > 0 {
		if p := r.Commits[c.Parents[0]]; p != nil {
			return p.Files
		}
	}
	return map[string]string{}
}

// mergeTrees is a three-way merge at file level: the paths both sides
// changed differently since base conflict.
func mergeTrees(base, ours, theirs map[string]string) (merged map[string]string, conflicts []string) {
	merged = map[string]string{}
	paths := map[string]bool{}
	for _, m := range []map[string]string{base, ours, theirs} {
		for p := range m {
			paths[p] = true
		}
	}
	for p := range paths {
		b, bok := base[p]
		o, ook := ours[p]
		t, tok := theirs[p]
		same := func(x string, xok bool, y string, yok bool) bool { return xok == yok && x == y }
		var v string
		var ok bool
		switch {
		case same(o, ook, t, tok):
			v, ok = o, ook
		case same(b, bok, o, ook):
			v, ok = t, tok
		case same(b, bok, t, tok):
			v, ok = o, ook
		default:
			conflicts = append(conflicts, p)
			v, ok = o, ook
		}
		if ok {
			merged[p] = v
		}
	}
	sort.Strings(conflicts)
	return merged, conflicts
}

// applyChanges replays the change from -> to onto onto, reporting the paths
// where onto differs from from (a conflicting replay).
func applyChanges(onto, from, to map[string]string) (map[string]string, []string) {
	return mergeTrees(from, onto, to)
}

// lineDiff counts added and deleted lines and renders a unified patch body
// (one hunk per change run). Large inputs fall back to a whole-file
// replacement.
func lineDiff(old, new string) (additions, deletions int, patch string) {
	a, b := splitLines(old), splitLines(new)
	if len(a)*len(b) > 1_000_000 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(1, len(a)), hunkRange(1, len(b)))
		for _, l := range a {
			sb.WriteString("-" + l + "\n")
		}
		for _, l := range b {
			sb.WriteString("+" + l + "\n")
		}
		return len(b), len(a), strings.TrimSuffix(sb.String(), "\n")
	}
	// LCS table.
	n, m := len(a), len(b)
	dp := make([][]int32, n+1)
	for i := range dp {
		dp[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	type op struct {
		kind   byte // ' ', '-', '+'
		line   string
		ai, bi int // 1-based line numbers in a and b at this op
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i + 1, j + 1})
			i++
			j++
		case j < m && (i == n || dp[i][j+1] >= dp[i+1][j]):
			ops = append(ops, op{'+', b[j], i + 1, j + 1})
			additions++
			j++
		default:
			ops = append(ops, op{'-', a[i], i + 1, j + 1})
			deletions++
			i++
		}
	}
	// Hunks with three lines of context.
	const ctx = 3
	var sb strings.Builder
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-ctx)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(run, end+ctx)
				break
			}
			end = run
		}
		var ac, bc int
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				ac++
			}
			if o.kind != '-' {
				bc++
			}
		}
		as, bs := ops[start].ai, ops[start].bi
		if ac == 0 {
			as--
		}
		if bc == 0 {
			bs--
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(as, ac), hunkRange(bs, bc))
		for _, o := range ops[start:end] {
			sb.WriteByte(o.kind)
			sb.WriteString(o.line + "\n")
		}
		k = end
	}
	return additions, deletions, strings.TrimSuffix(sb.String(), "\n")
}

func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
