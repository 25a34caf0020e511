package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
)

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

// BaseOf is an item's base branch: its baseBranch: tag, else the default
// branch.
func BaseOf(tags []string, defaultBranch string) string {
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

// AnchoredItem is an item with anchors on the pushed branch.
type AnchoredItem struct {
	Number  int
	Anchors []string
	State   map[string]AnchorState // recorded state by path (this base branch only)
}

// AnchoredOn lists the items whose base branch is branch and that carry
// anchoredTo links, with their recorded anchor state. Three reads, no
// GitHub call.
func (l *Ledger) AnchoredOn(ctx context.Context, repo Repo, branch string) ([]AnchoredItem, error) {
	byNum := map[int]*AnchoredItem{}
	var out []AnchoredItem
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
				it = &AnchoredItem{Number: n, State: map[string]AnchorState{}}
				byNum[n] = it
			}
			it.Anchors = append(it.Anchors, p)
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
			bases[n] = BaseOf([]string{tag}, repo.DefaultBranch)
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
						it.State[s.Path] = s
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
		slices.Sort(it.Anchors)
		out = append(out, *it)
	}
	slices.SortFunc(out, func(a, b AnchoredItem) int { return a.Number - b.Number })
	return out, nil
}

// loadAnchorStates reads the anchor rows of the items numbered nums (nil:
// every item) through q, only the stale ones when staleOnly.
func loadAnchorStates(ctx context.Context, q Querier, repoID int64, nums []int, staleOnly bool) (map[int][]AnchorState, error) {
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

func (l *Ledger) PutAnchor(ctx context.Context, repoID int64, s AnchorState) error {
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

func (l *Ledger) DropAnchor(ctx context.Context, repoID int64, number int, path string) error {
	_, err := l.db.Write.ExecContext(ctx, `DELETE FROM anchor_state WHERE repo_id = $1 AND number = $2 AND path = $3`, repoID, number, path)
	return err
}

// CachedBlob is the cached read of path at commit: ok false when never read.
func (l *Ledger) CachedBlob(ctx context.Context, repoID int64, commit, path string) (blob string, ok bool, err error) {
	err = l.db.Read.QueryRowContext(ctx, `SELECT blob_sha FROM anchor_blobs WHERE repo_id = $1 AND commit_sha = $2 AND path = $3`,
		repoID, commit, path).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return blob, err == nil, err
}

func (l *Ledger) CacheBlob(ctx context.Context, repoID int64, commit, path, blob string) error {
	_, err := l.db.Write.ExecContext(ctx, `INSERT INTO anchor_blobs (repo_id, commit_sha, path, blob_sha) VALUES ($1, $2, $3, $4)
		ON CONFLICT (repo_id, commit_sha, path) DO NOTHING`, repoID, commit, path, blob)
	return err
}

// DirBlob stands for a directory in anchor_blobs and anchor_state (a
// contents read of a directory lists it; it has no blob).
const DirBlob = "tree"

// currentAnchorFindings keeps the recorded anchor states that still apply
// to the item (the link is still written, on the item's current base
// branch) and are stale, with the stale-anchor finding of each.
func currentAnchorFindings(it *Item, defaultBranch string, states []AnchorState) ([]AnchorState, []gating.Defect) {
	if len(states) == 0 {
		return nil, nil
	}
	base := BaseOf(it.Tags, defaultBranch)
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
