package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
)

// lockMode is how a read locks the item rows it reads.
type lockMode int

const (
	lockNone   lockMode = iota
	lockUpdate          // the item being written (PostgreSQL: FOR UPDATE)
	lockShare           // an item a write's rules read (PostgreSQL: FOR SHARE)
)

const itemSelect = `SELECT i.number, i.title, i.body, i.author, i.provenance, i.created_at, i.updated_at, i.fence, i.released,
	g.owner, g.region, g.branch, g.purpose, g.granted_at, g.lease_expires_at, g.released_at
	FROM ledger_items i LEFT JOIN ledger_grants g ON g.repo_id = i.repo_id AND g.number = i.number AND g.fence = i.fence`

// lockRow takes the row lock of an item on PostgreSQL (SELECT ... FOR
// UPDATE, or FOR SHARE) and reports whether the item exists. The item is
// then read by a later statement: under READ COMMITTED a statement's
// snapshot starts when it does, so reading after the lock is granted sees
// everything the previous holder of the lock committed (its grant log row
// included), which a join in the locking statement itself would not. On
// SQLite the write transaction already excludes every other writer, so
// there is nothing to take.
func (l *Ledger) lockRow(ctx context.Context, q Querier, m lockMode, repoID int64, n int) (bool, error) {
	if !l.pg || m == lockNone {
		return true, nil
	}
	clause := " FOR UPDATE"
	if m == lockShare {
		clause = " FOR SHARE"
	}
	var got int64
	err := q.QueryRowContext(ctx, `SELECT number FROM ledger_items WHERE repo_id = $1 AND number = $2`+clause, repoID, n).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", gating.IDFor(n), err)
	}
	return true, nil
}

func scanItem(s interface{ Scan(...any) error }, repoID int64, extra ...any) (*Item, error) {
	var (
		it                                  Item
		n                                   int64
		created, updated                    int64
		owner, region, branch, purpose      sql.NullString
		grantedAt, leaseExpires, releasedAt sql.NullInt64
	)
	dest := []any{&n, &it.Title, &it.Body, &it.Author, &it.Provenance, &created, &updated, &it.Fence.Token, &it.Fence.Released,
		&owner, &region, &branch, &purpose, &grantedAt, &leaseExpires, &releasedAt}
	if err := s.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	it.RepoID = repoID
	it.ID = gating.IDFor(int(n))
	it.CreatedAt = msTime(created)
	it.UpdatedAt = msTime(updated)
	it.Tags = []string{}
	it.Links = []gating.Link{}
	if it.Fence.Token > 0 && owner.Valid {
		g := &Grant{Fence: it.Fence.Token, Owner: owner.String, Region: region.String, Branch: branch.String, Purpose: purpose.String,
			GrantedAt: msTime(grantedAt.Int64), LeaseExpiresAt: msTime(leaseExpires.Int64)}
		if releasedAt.Valid {
			t := msTime(releasedAt.Int64)
			g.ReleasedAt = &t
		}
		it.Grant = g
		it.Fence.Region = g.Region
	}
	return &it, nil
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// loadItem reads one item with its tags and links, or nil when it does not
// exist.
func (l *Ledger) loadItem(ctx context.Context, q Querier, m lockMode, repoID int64, n int) (*Item, error) {
	it, err := l.loadHead(ctx, q, m, repoID, n)
	if it == nil || err != nil {
		return nil, err
	}
	if err := loadTagsLinks(ctx, q, repoID, n-1, n, map[int]*Item{n: it}); err != nil {
		return nil, err
	}
	return it, nil
}

// loadHead reads one item's row and the grant that owns its fence, without
// tags and links, or nil when it does not exist.
func (l *Ledger) loadHead(ctx context.Context, q Querier, m lockMode, repoID int64, n int) (*Item, error) {
	if ok, err := l.lockRow(ctx, q, m, repoID, n); !ok || err != nil {
		return nil, err
	}
	it, err := scanItem(q.QueryRowContext(ctx, itemSelect+` WHERE i.repo_id = $1 AND i.number = $2`, repoID, n), repoID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", gating.IDFor(n), err)
	}
	return it, nil
}

// loadTagsLinks fills the tags and links of the items numbered in
// (after, upto], each sorted: tags bytewise, links by relation (gating.Rels
// order) then target.
func loadTagsLinks(ctx context.Context, q Querier, repoID int64, after, upto int, items map[int]*Item) error {
	rows, err := q.QueryContext(ctx, `SELECT number, tag FROM ledger_tags WHERE repo_id = $1 AND number > $2 AND number <= $3`, repoID, after, upto)
	if err != nil {
		return fmt.Errorf("read tags: %w", err)
	}
	for rows.Next() {
		var n int
		var tag string
		if err := rows.Scan(&n, &tag); err != nil {
			rows.Close()
			return fmt.Errorf("read tags: %w", err)
		}
		if it := items[n]; it != nil {
			it.Tags = append(it.Tags, tag)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read tags: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT number, rel, target FROM ledger_links WHERE repo_id = $1 AND number > $2 AND number <= $3`, repoID, after, upto)
	if err != nil {
		return fmt.Errorf("read links: %w", err)
	}
	for rows.Next() {
		var n int
		var lk gating.Link
		if err := rows.Scan(&n, &lk.Rel, &lk.Target); err != nil {
			rows.Close()
			return fmt.Errorf("read links: %w", err)
		}
		if it := items[n]; it != nil {
			it.Links = append(it.Links, lk)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read links: %w", err)
	}
	for _, it := range items {
		slices.Sort(it.Tags)
		sortLinks(it.Links)
	}
	return nil
}

func relIndex(r gating.Rel) int {
	for i, x := range gating.Rels {
		if x == r {
			return i
		}
	}
	return len(gating.Rels)
}

func sortLinks(ls []gating.Link) {
	slices.SortFunc(ls, func(x, y gating.Link) int {
		if c := cmp.Compare(relIndex(x.Rel), relIndex(y.Rel)); c != 0 {
			return c
		}
		if c := strings.Compare(string(x.Rel), string(y.Rel)); c != 0 {
			return c
		}
		return strings.Compare(x.Target, y.Target)
	})
}

// tagSet and linkSet normalise lists into sorted sets.
func tagSet(tags []string) []string {
	out := append([]string{}, tags...)
	slices.Sort(out)
	return slices.Compact(out)
}

func linkSet(links []gating.Link) []gating.Link {
	seen := map[gating.Link]bool{}
	out := []gating.Link{}
	for _, l := range links {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sortLinks(out)
	return out
}

// lookup returns the rules' view of other items of the repository through
// q (the write's own transaction), caching what it read. self answers for
// the item being written. A read error is kept in *errp (the write then
// fails with it rather than with a refusal it caused).
func (l *Ledger) lookup(ctx context.Context, q Querier, m lockMode, repoID int64, self *gating.Item, errp *error) func(gating.ItemID) (*gating.Item, bool) {
	cache := map[gating.ItemID]*gating.Item{}
	return func(id gating.ItemID) (*gating.Item, bool) {
		if self != nil && id == self.ID {
			return self, true
		}
		if it, ok := cache[id]; ok {
			return it, it != nil
		}
		n, err := gating.ParseID(string(id))
		if err != nil {
			cache[id] = nil
			return nil, false
		}
		it, err := l.loadItem(ctx, q, m, repoID, n)
		if err != nil {
			if *errp == nil {
				*errp = err
			}
			return nil, false
		}
		if it == nil {
			cache[id] = nil
			return nil, false
		}
		s := it.Snapshot()
		cache[id] = s
		return s, true
	}
}

// dependents lists the items with a blockedBy, partOf or integrates link
// to id: forgetting id would leave each of them with a dangling edge.
func dependents(ctx context.Context, q Querier, repoID int64, id gating.ItemID) ([]gating.ItemID, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT number FROM ledger_links
		WHERE repo_id = $1 AND target = $2 AND (rel = $3 OR rel = $4 OR rel = $5) ORDER BY number`,
		repoID, string(id), string(gating.BlockedBy), string(gating.PartOf), string(gating.Integrates))
	if err != nil {
		return nil, fmt.Errorf("read dependents of %s: %w", id, err)
	}
	defer rows.Close()
	var out []gating.ItemID
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("read dependents of %s: %w", id, err)
		}
		out = append(out, gating.IDFor(n))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read dependents of %s: %w", id, err)
	}
	return out, nil
}

// Get returns an item, or ErrNotFound.
func (l *Ledger) Get(ctx context.Context, repoID int64, id gating.ItemID) (Item, error) {
	n, err := parseNumber(id)
	if err != nil {
		return Item{}, err
	}
	var it *Item
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		it, err = l.loadItem(ctx, tx, lockNone, repoID, n)
		return err
	})
	if err != nil {
		return Item{}, err
	}
	if it == nil {
		return Item{}, fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
	}
	return *it, nil
}

// List returns up to limit (1 to 1000) items numbered above after,
// ascending, with their tags, links and claim state. The next page starts
// after the last number returned; an empty page is the end.
func (l *Ledger) List(ctx context.Context, repoID int64, after int, limit int) ([]Item, error) {
	if limit < 1 || limit > 1000 {
		return nil, refusal(ReasonInvalidRequest, "limit %d is not between 1 and 1000", limit)
	}
	if after < 0 {
		return nil, refusal(ReasonInvalidRequest, "cursor %d is negative", after)
	}
	out := []Item{}
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, itemSelect+` WHERE i.repo_id = $1 AND i.number > $2 ORDER BY i.number LIMIT $3`, repoID, after, limit)
		if err != nil {
			return fmt.Errorf("list items: %w", err)
		}
		items := make([]*Item, 0, limit)
		for rows.Next() {
			it, err := scanItem(rows, repoID)
			if err != nil {
				rows.Close()
				return fmt.Errorf("list items: %w", err)
			}
			items = append(items, it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list items: %w", err)
		}
		if len(items) == 0 {
			return nil
		}
		byNum := make(map[int]*Item, len(items))
		for _, it := range items {
			byNum[it.ID.Number()] = it
		}
		if err := loadTagsLinks(ctx, tx, repoID, after, items[len(items)-1].ID.Number(), byNum); err != nil {
			return err
		}
		out = make([]Item, len(items))
		for i, it := range items {
			out[i] = *it
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Grants returns an item's grant log, oldest first (ErrNotFound for a
// missing item).
func (l *Ledger) Grants(ctx context.Context, repoID int64, id gating.ItemID) ([]Grant, error) {
	n, err := parseNumber(id)
	if err != nil {
		return nil, err
	}
	out := []Grant{}
	err = l.readTx(ctx, func(tx *sql.Tx) error {
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_items WHERE repo_id = $1 AND number = $2`, repoID, n).Scan(&exists); err != nil {
			return fmt.Errorf("grants of %s: %w", id, err)
		}
		if exists == 0 {
			return fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
		}
		rows, err := tx.QueryContext(ctx, grantSelect+` WHERE repo_id = $1 AND number = $2 ORDER BY fence`, repoID, n)
		if err != nil {
			return fmt.Errorf("grants of %s: %w", id, err)
		}
		defer rows.Close()
		for rows.Next() {
			g, err := scanGrant(rows)
			if err != nil {
				return fmt.Errorf("grants of %s: %w", id, err)
			}
			out = append(out, *g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const grantSelect = `SELECT fence, owner, region, branch, purpose, granted_at, lease_expires_at, released_at FROM ledger_grants`

func scanGrant(s interface{ Scan(...any) error }) (*Grant, error) {
	var g Grant
	var granted, expires int64
	var released sql.NullInt64
	if err := s.Scan(&g.Fence, &g.Owner, &g.Region, &g.Branch, &g.Purpose, &granted, &expires, &released); err != nil {
		return nil, err
	}
	g.GrantedAt, g.LeaseExpiresAt = msTime(granted), msTime(expires)
	if released.Valid {
		t := msTime(released.Int64)
		g.ReleasedAt = &t
	}
	return &g, nil
}

// grant reads one row of the grant log, or nil.
func (l *Ledger) grant(ctx context.Context, q Querier, repoID int64, n int, fence int64) (*Grant, error) {
	g, err := scanGrant(q.QueryRowContext(ctx, grantSelect+` WHERE repo_id = $1 AND number = $2 AND fence = $3`, repoID, n, fence))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grant %d of %s: %w", fence, gating.IDFor(n), err)
	}
	return g, nil
}
