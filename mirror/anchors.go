package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// Code anchors from push deliveries (CONTRACT.md §3, §9; PROTOCOL.md "Why
// anchoredTo matters"). anchor_state holds, per item and anchoredTo path,
// the blob SHA warden recorded on the item's baseBranch (validated_commit is
// the ref it was read at: a commit SHA when it came from a push, the branch
// name when it came from a link write) and whether a later push moved it
// (stale, with the commit and how) or left nothing at the path (dangling).
// A push marks anchors from its commits' file lists, at no API cost; only a
// truncated or forced push costs a compare, and a path that may be gone one
// contents read at the pushed head. anchor_blobs caches those reads per
// commit and path ("" blob: nothing there), so the same commit and path are
// never read twice. Rewriting the link (PATCH addLinks, after removeLinks or
// not) re-reads the anchor and clears the state.
var anchorMigrations = []db.Migration{
	{Version: 1, SQL: `CREATE TABLE anchor_state (
	repo_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	path TEXT NOT NULL,
	base_branch TEXT NOT NULL,
	blob_sha TEXT NOT NULL,
	validated_commit TEXT NOT NULL,
	validated_at BIGINT NOT NULL,
	stale BIGINT NOT NULL,
	stale_reason TEXT NOT NULL,
	dangling BIGINT NOT NULL,
	PRIMARY KEY (repo_id, number, path))`},
	{Version: 2, SQL: `CREATE TABLE anchor_blobs (
	repo_id BIGINT NOT NULL,
	commit_sha TEXT NOT NULL,
	path TEXT NOT NULL,
	blob_sha TEXT NOT NULL,
	PRIMARY KEY (repo_id, commit_sha, path))`},
}

// AnchorState is what warden knows of one anchoredTo link of an item.
type AnchorState struct {
	Number          int
	Path            string
	BaseBranch      string
	BlobSHA         string // "" when nothing was at the path (or a directory listing was read)
	ValidatedCommit string
	ValidatedAt     time.Time
	Stale           bool
	StaleReason     string
	Dangling        bool
}

// compareFileLimit is how many files GitHub's compare lists at most: a
// compare that lists this many may have left some out.
const compareFileLimit = 300

// pushCommitLimit: GitHub's push payloads list at most this many commits
// with their files (PROTOCOL: "at most 20"); a push with as many is read as
// truncated and compared.
const pushCommitLimit = 20

const zeroCommit = "0000000000000000000000000000000000000000"

// baseOf is an item's base branch: its baseBranch: tag, else the default
// branch.
func baseOf(tags []string, defaultBranch string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, "baseBranch:"); ok && v != "" {
			return v
		}
	}
	return defaultBranch
}

func anchorPaths(links []gating.Link) []string {
	var out []string
	for _, l := range links {
		if l.Rel == gating.AnchoredTo && !slices.Contains(out, l.Target) {
			out = append(out, l.Target)
		}
	}
	return out
}

// anchoredItem is an item with anchors on the pushed branch.
type anchoredItem struct {
	number  int
	anchors []string
	state   map[string]AnchorState // recorded state by path (this base branch only)
}

// anchoredOn lists the items whose base branch is branch and that carry
// anchoredTo links, with their recorded anchor state. Three reads, no
// GitHub call.
func (l *Ledger) anchoredOn(ctx context.Context, repo Repo, branch string) ([]anchoredItem, error) {
	byNum := map[int]*anchoredItem{}
	var out []anchoredItem
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT number, target FROM ledger_links WHERE repo_id = $1 AND rel = $2`, repo.ID, string(gating.AnchoredTo))
		if err != nil {
			return err
		}
		for rows.Next() {
			var n int
			var p string
			if err := rows.Scan(&n, &p); err != nil {
				rows.Close()
				return err
			}
			it := byNum[n]
			if it == nil {
				it = &anchoredItem{number: n, state: map[string]AnchorState{}}
				byNum[n] = it
			}
			it.anchors = append(it.anchors, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(byNum) == 0 {
			return nil
		}
		bases := map[int]string{}
		rows, err = tx.QueryContext(ctx, `SELECT number, tag FROM ledger_tags WHERE repo_id = $1 AND tag LIKE 'baseBranch:%'`, repo.ID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n int
			var tag string
			if err := rows.Scan(&n, &tag); err != nil {
				rows.Close()
				return err
			}
			bases[n] = baseOf([]string{tag}, repo.DefaultBranch)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for n := range byNum {
			b, ok := bases[n]
			if !ok {
				b = repo.DefaultBranch
			}
			if b != branch {
				delete(byNum, n)
			}
		}
		if len(byNum) == 0 {
			return nil
		}
		states, err := loadAnchorStates(ctx, tx, repo.ID, nil, false)
		if err != nil {
			return err
		}
		for n, ss := range states {
			if it := byNum[n]; it != nil {
				for _, s := range ss {
					if s.BaseBranch == branch {
						it.state[s.Path] = s
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("anchors on %s of %s: %w", branch, repo.FullName, err)
	}
	for _, it := range byNum {
		slices.Sort(it.anchors)
		out = append(out, *it)
	}
	slices.SortFunc(out, func(a, b anchoredItem) int { return a.number - b.number })
	return out, nil
}

// loadAnchorStates reads the anchor rows of the items numbered nums (nil:
// every item) through q, only the stale ones when staleOnly.
func loadAnchorStates(ctx context.Context, q querier, repoID int64, nums []int, staleOnly bool) (map[int][]AnchorState, error) {
	out := map[int][]AnchorState{}
	query := `SELECT number, path, base_branch, blob_sha, validated_commit, validated_at, stale, stale_reason, dangling FROM anchor_state WHERE repo_id = $1`
	if staleOnly {
		query += ` AND stale = 1`
	}
	err := eachChunk(ctx, q, repoID, nums, query, "number", func(rows *sql.Rows) error {
		var s AnchorState
		var at, stale, dangling int64
		if err := rows.Scan(&s.Number, &s.Path, &s.BaseBranch, &s.BlobSHA, &s.ValidatedCommit, &at, &stale, &s.StaleReason, &dangling); err != nil {
			return err
		}
		s.ValidatedAt, s.Stale, s.Dangling = msTime(at), stale != 0, dangling != 0
		out[s.Number] = append(out[s.Number], s)
		return nil
	})
	return out, err
}

// AnchorStates returns an item's recorded anchor state, by path.
func (l *Ledger) AnchorStates(ctx context.Context, repoID int64, number int) ([]AnchorState, error) {
	var out []AnchorState
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		m, err := loadAnchorStates(ctx, tx, repoID, []int{number}, false)
		out = m[number]
		return err
	})
	slices.SortFunc(out, func(a, b AnchorState) int { return strings.Compare(a.Path, b.Path) })
	return out, err
}

func (l *Ledger) putAnchor(ctx context.Context, repoID int64, s AnchorState) error {
	_, err := l.db.Write.ExecContext(ctx, `INSERT INTO anchor_state (repo_id, number, path, base_branch, blob_sha, validated_commit, validated_at, stale, stale_reason, dangling)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (repo_id, number, path) DO UPDATE SET base_branch = excluded.base_branch, blob_sha = excluded.blob_sha,
		validated_commit = excluded.validated_commit, validated_at = excluded.validated_at, stale = excluded.stale,
		stale_reason = excluded.stale_reason, dangling = excluded.dangling`,
		repoID, s.Number, s.Path, s.BaseBranch, s.BlobSHA, s.ValidatedCommit, s.ValidatedAt.UnixMilli(), b2i(s.Stale), s.StaleReason, b2i(s.Dangling))
	if err != nil {
		return fmt.Errorf("record anchor %s of #%d: %w", s.Path, s.Number, err)
	}
	return nil
}

func (l *Ledger) dropAnchor(ctx context.Context, repoID int64, number int, path string) error {
	_, err := l.db.Write.ExecContext(ctx, `DELETE FROM anchor_state WHERE repo_id = $1 AND number = $2 AND path = $3`, repoID, number, path)
	return err
}

// cachedBlob is the cached read of path at commit: ok false when never read.
func (l *Ledger) cachedBlob(ctx context.Context, repoID int64, commit, path string) (blob string, ok bool, err error) {
	err = l.db.Read.QueryRowContext(ctx, `SELECT blob_sha FROM anchor_blobs WHERE repo_id = $1 AND commit_sha = $2 AND path = $3`,
		repoID, commit, path).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return blob, err == nil, err
}

func (l *Ledger) cacheBlob(ctx context.Context, repoID int64, commit, path, blob string) error {
	_, err := l.db.Write.ExecContext(ctx, `INSERT INTO anchor_blobs (repo_id, commit_sha, path, blob_sha) VALUES ($1, $2, $3, $4)
		ON CONFLICT (repo_id, commit_sha, path) DO NOTHING`, repoID, commit, path, blob)
	return err
}

// dirBlob stands for a directory in anchor_blobs and anchor_state (a
// contents read of a directory lists it; it has no blob).
const dirBlob = "tree"

func isCommitSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// readAnchor reads path at ref with one contents GET, cached per commit
// when ref is a commit SHA: the blob SHA of a file, dirBlob for a
// non-empty directory, "" when nothing is there.
func (m *Mirror) readAnchor(ctx context.Context, gh *github.Client, repo Repo, ref, path string) (string, error) {
	path = strings.TrimSuffix(path, "/")
	cache := isCommitSHA(ref)
	if cache {
		if b, ok, err := m.Ledger.cachedBlob(ctx, repo.ID, ref, path); err != nil {
			return "", err
		} else if ok {
			return b, nil
		}
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	blob := ""
	if path == "." || path == "" {
		blob = dirBlob
	} else {
		fc, dir, resp, err := gh.Repositories.GetContents(ctx, owner, name, path, &github.RepositoryContentGetOptions{Ref: ref})
		switch {
		case err != nil && resp != nil && resp.StatusCode == http.StatusNotFound:
			// Nothing at the path, or no such branch: either way no anchor.
		case err != nil:
			return "", fmt.Errorf("read anchor %s of %s at %s: %w", path, repo.FullName, shortSHA(ref), err)
		case fc != nil:
			blob = fc.GetSHA()
		case len(dir) > 0:
			blob = dirBlob
		}
	}
	if cache {
		if err := m.Ledger.cacheBlob(ctx, repo.ID, ref, path, blob); err != nil {
			return "", err
		}
	}
	return blob, nil
}

// AnchorsWritten follows a write of an item's anchoredTo links (the agent
// API's PATCH): each added anchor is re-validated — read on the item's base
// branch (one contents read), its blob SHA recorded and its stale and
// dangling marks cleared (dangling again if nothing is there) — and each
// removed one forgotten. A failed read leaves the anchor unrecorded (not
// stale): the next push to the branch records it.
func (m *Mirror) AnchorsWritten(ctx context.Context, repo Repo, it Item, added, removed []string) error {
	base := baseOf(it.Tags, repo.DefaultBranch)
	n := it.ID.Number()
	for _, p := range removed {
		if !slices.Contains(added, p) {
			if err := m.Ledger.dropAnchor(ctx, repo.ID, n, p); err != nil {
				return err
			}
		}
	}
	if len(added) == 0 {
		return nil
	}
	gh, ghErr := m.GitHub.Installation(repo.Installation)
	var firstErr error
	for _, p := range added {
		blob, err := "", ghErr
		if err == nil {
			blob, err = m.readAnchor(ctx, gh, repo, base, p)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if derr := m.Ledger.dropAnchor(ctx, repo.ID, n, p); derr != nil {
				return derr
			}
			continue
		}
		st := AnchorState{Number: n, Path: p, BaseBranch: base, BlobSHA: blob, ValidatedCommit: base, ValidatedAt: m.now()}
		if blob == "" {
			st.Stale, st.Dangling, st.StaleReason = true, true, fmt.Sprintf("nothing is at %s on %s when the link was written", p, base)
		}
		if err := m.Ledger.putAnchor(ctx, repo.ID, st); err != nil {
			return err
		}
	}
	return firstErr
}

// currentAnchorFindings keeps the recorded anchor states that still apply
// to the item (the link is still written, on the item's current base
// branch) and are stale, with the stale-anchor finding of each.
func currentAnchorFindings(it *Item, defaultBranch string, states []AnchorState) ([]AnchorState, []gating.Defect) {
	if len(states) == 0 {
		return nil, nil
	}
	base := baseOf(it.Tags, defaultBranch)
	paths := anchorPaths(it.Links)
	var keep []AnchorState
	var ds []gating.Defect
	for _, s := range states {
		if !s.Stale || s.BaseBranch != base || !slices.Contains(paths, s.Path) {
			continue
		}
		keep = append(keep, s)
		ds = append(ds, gating.StaleAnchorDefect(it.ID, s.Path, base, s.StaleReason, s.Dangling))
	}
	slices.SortFunc(keep, func(a, b AnchorState) int { return strings.Compare(a.Path, b.Path) })
	return keep, ds
}
