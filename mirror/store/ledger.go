package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// ErrExists is returned by Create for an item that already exists.
var ErrExists = errors.New("already exists")

// Refusal reasons the ledger adds to gating's (each is a *gating.Refusal's
// Reason).
const (
	// ReasonRoleNotAllowed: the actor's role may not do this (a worker
	// creating, forgetting or taking a maintenance claim; an unknown role).
	ReasonRoleNotAllowed = "role-not-allowed"
	// ReasonOwnerNotAllowed: a worker acting under an owner that does not
	// begin with its token's name and "/", or writing without such a claim.
	ReasonOwnerNotAllowed = "owner-not-allowed"
	// ReasonInvalidRequest: a malformed request (owner, purpose, wait, lease,
	// item id, page size).
	ReasonInvalidRequest = "invalid-request"
	// ReasonInvalidField: a scalar that is too long, not UTF-8 or holds NUL.
	ReasonInvalidField = "invalid-field"
)

// Config configures a Ledger.
type Config struct {
	Region       string           // WARDEN_REGION: claims are taken only here
	LeaseDefault time.Duration    // lease when none is asked for
	LeaseMax     time.Duration    // ceiling every lease is clamped to
	Quarantine   time.Duration    // WARDEN_QUARANTINE: how long a lapsed claim stays quarantined after its holder's last evidence of work
	Now          func() time.Time // default time.Now
	// Settings returns a repository's backlog settings (its admission label
	// and poison threshold are what the ready set reads); nil: the
	// contract's defaults.
	Settings func(ctx context.Context, r Repo) gating.Settings
	// RepoFindings returns a repository's findings that no item carries
	// (settings-invalid, settings-changed-by-agent, shared-identity); the
	// snapshot's ready set reports them beside its own. nil: none.
	RepoFindings func(ctx context.Context, r Repo) []gating.Defect
}

// Defaults for a zero Config field (README "Settings").
const (
	DefaultLeaseDefault = 30 * time.Second
	DefaultLeaseMax     = 30 * time.Minute
)

// WriteOptions carries what the caller verified outside the ledger for a
// write (the completion proof needs GitHub).
type WriteOptions struct {
	CompletionProven                   bool
	CompletionReason, CompletionDetail string
}

// Limits on the settable scalars (bytes).
const (
	maxTitle      = 1024
	maxBody       = 65536
	maxAuthor     = 200
	maxProvenance = 1024
	maxBranch     = 255
)

// Ledger is warden's backlog ledger over a *db.DB: items, tags, links,
// fenced and leased claims and the grant log. Every write is one
// transaction on the write pool; on SQLite that pool is one connection, so
// writes serialise in Go, and on PostgreSQL the item's row is locked
// (SELECT ... FOR UPDATE) inside the transaction. It is safe for concurrent
// use.
type Ledger struct {
	db  *db.DB
	cfg Config
	pg  bool

	mu     sync.Mutex
	queues map[itemKey][]*waiter // claimants waiting (bounded wait), FIFO per item
}

type itemKey struct {
	repo   int64
	number int
}

func newLedger(d *db.DB, cfg Config) (*Ledger, error) {
	if d == nil {
		return nil, errors.New("open ledger: no database")
	}
	if cfg.Region == "" || strings.IndexFunc(cfg.Region, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return nil, fmt.Errorf("open ledger: region %q must be non-empty, without spaces", cfg.Region)
	}
	if cfg.LeaseDefault == 0 {
		cfg.LeaseDefault = DefaultLeaseDefault
	}
	if cfg.LeaseMax == 0 {
		cfg.LeaseMax = DefaultLeaseMax
	}
	if cfg.LeaseDefault < time.Second || cfg.LeaseMax < cfg.LeaseDefault {
		return nil, fmt.Errorf("open ledger: lease default %s and ceiling %s: want 1s <= default <= ceiling", cfg.LeaseDefault, cfg.LeaseMax)
	}
	if cfg.Quarantine < 0 {
		return nil, fmt.Errorf("open ledger: quarantine %s is negative", cfg.Quarantine)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ledger{db: d, cfg: cfg, pg: d.Dialect == db.Postgres, queues: map[itemKey][]*waiter{}}, nil
}

// Querier is what a transaction and a pool have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (l *Ledger) nowMs() int64 { return l.cfg.Now().UnixMilli() }

// writeTx runs fn in one transaction on the write pool and commits when fn
// returns nil; any error (a refusal included) rolls everything back.
func (l *Ledger) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := l.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: commit: %w", err)
	}
	return nil
}

// readTx runs fn in one read transaction (one consistent snapshot).
func (l *Ledger) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := l.db.Read.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(tx)
}

func refusal(reason, format string, a ...any) *gating.Refusal {
	return &gating.Refusal{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// parseNumber reads an item id.
func parseNumber(id gating.ItemID) (int, error) {
	n, err := gating.ParseID(string(id))
	if err != nil {
		return 0, refusal(ReasonInvalidRequest, "%v", err)
	}
	return n, nil
}

func knownRole(r gating.Role) bool {
	switch r {
	case gating.RoleWorker, gating.RolePM, gating.RoleHuman, gating.RoleWarden:
		return true
	}
	return false
}

func checkActor(a Actor) error {
	if !knownRole(a.Role) {
		return refusal(ReasonRoleNotAllowed, "role %q is not worker, pm, human or warden", a.Role)
	}
	if a.Role == gating.RoleWorker && (a.Name == "" || strings.Contains(a.Name, "/")) {
		return refusal(ReasonOwnerNotAllowed, "a worker token needs a name without '/' (its owners begin with name/); got %q", a.Name)
	}
	return nil
}

// checkText refuses a scalar that is too long, not UTF-8, or holds NUL
// (PostgreSQL's TEXT refuses both, so SQLite must too).
func checkText(field, s string, max int) error {
	if len(s) > max {
		return refusal(ReasonInvalidField, "%s is %d bytes; at most %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return refusal(ReasonInvalidField, "%s is not valid UTF-8", field)
	}
	if strings.ContainsRune(s, 0) {
		return refusal(ReasonInvalidField, "%s contains a NUL character", field)
	}
	return nil
}

// checkTagsAndLinks adds to gating's syntax checks what both backends need:
// UTF-8 and no control characters in tags and link targets.
func checkTagsAndLinks(tags []string, links []gating.Link) error {
	for _, t := range tags {
		if !utf8.ValidString(t) {
			return refusal("invalid-tag", "tag %q is not valid UTF-8", t)
		}
	}
	for _, l := range links {
		if !utf8.ValidString(l.Target) || strings.IndexFunc(l.Target, unicode.IsControl) >= 0 {
			return refusal("invalid-link", "%s target %q is not valid UTF-8 or holds a control character", l.Rel, l.Target)
		}
	}
	return nil
}

// ---- reading items ----

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

// homeRegion reads an item's homeRegion: tag ("" and false when it has
// none).
func homeRegion(ctx context.Context, q Querier, repoID int64, n int) (string, bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT tag FROM ledger_tags WHERE repo_id = $1 AND number = $2`, repoID, n)
	if err != nil {
		return "", false, fmt.Errorf("read tags of %s: %w", gating.IDFor(n), err)
	}
	defer rows.Close()
	var tags []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return "", false, fmt.Errorf("read tags of %s: %w", gating.IDFor(n), err)
		}
		tags = append(tags, t)
	}
	if err := rows.Err(); err != nil {
		return "", false, fmt.Errorf("read tags of %s: %w", gating.IDFor(n), err)
	}
	slices.Sort(tags)
	v, ok := (&gating.Item{Tags: tags}).Tag("homeRegion")
	return v, ok, nil
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

// ---- create ----

// Validate makes the checks Create would make, through a read snapshot,
// writing nothing. in.Number may be 0 when the issue is not opened yet:
// then the existence check is skipped.
func (l *Ledger) Validate(ctx context.Context, repoID int64, in NewItem, actor Actor, o WriteOptions) error {
	if err := l.precheckCreate(in, actor, true); err != nil {
		return err
	}
	return l.readTx(ctx, func(tx *sql.Tx) error {
		_, err := l.checkCreate(ctx, tx, lockNone, repoID, in, actor, o)
		return err
	})
}

// Create writes a new item for issue in.Number. It returns ErrExists when
// the item exists.
func (l *Ledger) Create(ctx context.Context, repoID int64, in NewItem, actor Actor, o WriteOptions) (Item, error) {
	if err := l.precheckCreate(in, actor, false); err != nil {
		return Item{}, err
	}
	var out Item
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		after, err := l.checkCreate(ctx, tx, lockShare, repoID, in, actor, o)
		if err != nil {
			return err
		}
		// A number forgotten and re-created continues from its old
		// high-water mark (released), so no token is ever shared.
		var hw int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(fence), 0) FROM ledger_grants WHERE repo_id = $1 AND number = $2`,
			repoID, in.Number).Scan(&hw); err != nil {
			return fmt.Errorf("create %s: read grant log: %w", after.ID, err)
		}
		now := l.nowMs()
		res, err := tx.ExecContext(ctx, `INSERT INTO ledger_items (repo_id, number, title, body, author, provenance, created_at, updated_at, fence, released)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $8) ON CONFLICT (repo_id, number) DO NOTHING`,
			repoID, in.Number, in.Title, in.Body, in.Author, in.Provenance, now, hw)
		if err != nil {
			return fmt.Errorf("create %s: %w", after.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("create %s: %w", after.ID, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w", after.ID, ErrExists)
		}
		if err := writeTagsLinks(ctx, tx, repoID, in.Number, after.Tags, after.Links, nil, nil); err != nil {
			return fmt.Errorf("create %s: %w", after.ID, err)
		}
		out = Item{RepoID: repoID, ID: after.ID, Title: in.Title, Body: in.Body, Author: in.Author, Provenance: in.Provenance,
			CreatedAt: msTime(now), UpdatedAt: msTime(now), Tags: after.Tags, Links: after.Links,
			Fence: gating.Fence{Token: hw, Released: hw}}
		if hw > 0 {
			g, err := l.grant(ctx, tx, repoID, in.Number, hw)
			if err != nil {
				return err
			}
			out.Grant = g
			if g != nil {
				out.Fence.Region = g.Region
			}
		}
		return nil
	})
	if err != nil {
		return Item{}, err
	}
	return out, nil
}

// precheckCreate is every check of a create that reads nothing.
func (l *Ledger) precheckCreate(in NewItem, actor Actor, validating bool) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if !gating.Authors(actor.Role) {
		return refusal(ReasonRoleNotAllowed, "only pm, human and warden create items; this token is %s", actor.Role)
	}
	if in.Number < 0 || (in.Number == 0 && !validating) || in.Number > 9999999999 {
		return refusal(ReasonInvalidRequest, "issue number %d is not a positive issue number", in.Number)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"title", in.Title, maxTitle}, {"body", in.Body, maxBody}, {"author", in.Author, maxAuthor}, {"provenance", in.Provenance, maxProvenance}} {
		if err := checkText(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return checkTagsAndLinks(in.Tags, in.Links)
}

// checkCreate makes the create's checks that read: the repository is
// served, the item does not exist (when numbered), and gating.CheckWrite
// over q's view. It returns the item as the rules saw it.
func (l *Ledger) checkCreate(ctx context.Context, q Querier, m lockMode, repoID int64, in NewItem, actor Actor, o WriteOptions) (*gating.Item, error) {
	repo, err := servedRepo(ctx, q, repoID)
	if err != nil {
		return nil, err
	}
	after := &gating.Item{ID: gating.IDFor(in.Number), Title: in.Title, Body: in.Body, Author: in.Author, Provenance: in.Provenance,
		CreatedAt: l.cfg.Now().UTC(), Tags: tagSet(in.Tags), Links: linkSet(in.Links)}
	if in.Number > 0 {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_items WHERE repo_id = $1 AND number = $2`, repoID, in.Number).Scan(&n); err != nil {
			return nil, fmt.Errorf("create %s: %w", after.ID, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("%s: %w", after.ID, ErrExists)
		}
	}
	deps, err := dependents(ctx, q, repoID, after.ID)
	if err != nil {
		return nil, err
	}
	var lookupErr error
	w := gating.Write{Kind: gating.Create, After: after, Role: actor.Role, DefaultBranch: repo.DefaultBranch,
		Lookup: l.lookup(ctx, q, m, repoID, after, &lookupErr), Dependents: deps,
		CompletionProven: o.CompletionProven, CompletionReason: o.CompletionReason, CompletionDetail: o.CompletionDetail}
	r := gating.CheckWrite(w)
	if lookupErr != nil {
		return nil, lookupErr
	}
	if r != nil {
		return nil, r
	}
	return after, nil
}

// writeTagsLinks inserts addTags/addLinks and deletes delTags/delLinks.
func writeTagsLinks(ctx context.Context, tx *sql.Tx, repoID int64, n int, addTags []string, addLinks []gating.Link, delTags []string, delLinks []gating.Link) error {
	for _, t := range delTags {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ledger_tags WHERE repo_id = $1 AND number = $2 AND tag = $3`, repoID, n, t); err != nil {
			return fmt.Errorf("remove tag %s: %w", t, err)
		}
	}
	for _, lk := range delLinks {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ledger_links WHERE repo_id = $1 AND number = $2 AND rel = $3 AND target = $4`,
			repoID, n, string(lk.Rel), lk.Target); err != nil {
			return fmt.Errorf("remove link %s %s: %w", lk.Rel, lk.Target, err)
		}
	}
	for _, t := range addTags {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_tags (repo_id, number, tag) VALUES ($1, $2, $3)
			ON CONFLICT (repo_id, number, tag) DO NOTHING`, repoID, n, t); err != nil {
			return fmt.Errorf("add tag %s: %w", t, err)
		}
	}
	for _, lk := range addLinks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_links (repo_id, number, rel, target) VALUES ($1, $2, $3, $4)
			ON CONFLICT (repo_id, number, rel, target) DO NOTHING`, repoID, n, string(lk.Rel), lk.Target); err != nil {
			return fmt.Errorf("add link %s %s: %w", lk.Rel, lk.Target, err)
		}
	}
	return nil
}

// ---- read ----

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

// ---- update ----

// Update applies p to an item, all or nothing: new tags = (old − RemoveTags)
// + AddTags, the same for links, scalars replaced when non-nil. The write is
// admitted by the fence (gating.Admit), then by role, then by gating's
// rules.
func (l *Ledger) Update(ctx context.Context, repoID int64, id gating.ItemID, p Patch, actor Actor, o WriteOptions) (Item, error) {
	n, err := parseNumber(id)
	if err != nil {
		return Item{}, err
	}
	if err := checkActor(actor); err != nil {
		return Item{}, err
	}
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{{"title", p.Title, maxTitle}, {"body", p.Body, maxBody}, {"author", p.Author, maxAuthor}, {"provenance", p.Provenance, maxProvenance}} {
		if f.v != nil {
			if err := checkText(f.name, *f.v, f.max); err != nil {
				return Item{}, err
			}
		}
	}
	if err := checkTagsAndLinks(p.AddTags, p.AddLinks); err != nil {
		return Item{}, err
	}
	var out Item
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		repo, err := servedRepo(ctx, tx, repoID)
		if err != nil {
			return err
		}
		it, err := l.loadItem(ctx, tx, lockUpdate, repoID, n)
		if err != nil {
			return err
		}
		if it == nil {
			return fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
		}
		if v := gating.Admit(it.Fence, p.FencingToken, l.cfg.Region, nil); v != gating.Accepted {
			return &FenceError{Verdict: v, Item: it.ID, Presented: p.FencingToken, Current: it.Fence.Token}
		}
		// Admitted with a token means: the token is the current fence of a
		// live claim taken in this region.
		if actor.Role == gating.RoleWorker && (p.FencingToken == nil || it.Grant == nil || !gating.OwnedBy(it.Grant.Owner, actor.Name)) {
			holder := "no live claim"
			if it.Grant != nil && it.Fence.Claimed() {
				holder = "the claim of " + it.Grant.Owner
			}
			return refusal(ReasonOwnerNotAllowed, "worker %s writes only under its own live claim (owner %s/...) with its token; %s has %s",
				actor.Name, actor.Name, it.ID, holder)
		}
		before := it.Snapshot()
		after := it.Snapshot()
		if p.Title != nil {
			after.Title = *p.Title
		}
		if p.Body != nil {
			after.Body = *p.Body
		}
		if p.Author != nil {
			after.Author = *p.Author
		}
		if p.Provenance != nil {
			after.Provenance = *p.Provenance
		}
		after.Tags = applyTags(before.Tags, p.RemoveTags, p.AddTags)
		after.Links = applyLinks(before.Links, p.RemoveLinks, p.AddLinks)
		addsComplete := !before.HasTag("state:complete") && after.HasTag("state:complete")
		// The resume block, and completion, are written only by the holder of
		// the live claim under its current token (admitted above).
		underClaim := p.FencingToken != nil && it.Fence.Claimed() && *p.FencingToken == it.Fence.Token
		if (p.Body != nil || addsComplete) && !underClaim {
			return &FenceError{Verdict: gating.ClaimRequired, Item: it.ID, Current: it.Fence.Token}
		}
		deps, err := dependents(ctx, tx, repoID, it.ID)
		if err != nil {
			return err
		}
		var lookupErr error
		w := gating.Write{Kind: gating.Update, Before: before, After: after, Role: actor.Role, DefaultBranch: repo.DefaultBranch,
			Lookup: l.lookup(ctx, tx, lockShare, repoID, after, &lookupErr), Dependents: deps,
			CompletionProven: o.CompletionProven, CompletionReason: o.CompletionReason, CompletionDetail: o.CompletionDetail}
		r := gating.CheckWrite(w)
		if lookupErr != nil {
			return lookupErr
		}
		if r != nil {
			return r
		}
		now := l.nowMs()
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_items SET title = $1, body = $2, author = $3, provenance = $4, updated_at = $5
			WHERE repo_id = $6 AND number = $7`, after.Title, after.Body, after.Author, after.Provenance, now, repoID, n); err != nil {
			return fmt.Errorf("update %s: %w", it.ID, err)
		}
		addT, delT := gating.Diff(before.Tags, after.Tags)
		addL, delL := gating.Diff(before.Links, after.Links)
		if err := writeTagsLinks(ctx, tx, repoID, n, addT, addL, delT, delL); err != nil {
			return fmt.Errorf("update %s: %w", it.ID, err)
		}
		out = *it
		out.Title, out.Body, out.Author, out.Provenance = after.Title, after.Body, after.Author, after.Provenance
		out.Tags, out.Links = after.Tags, after.Links
		out.UpdatedAt = msTime(now)
		return nil
	})
	if err != nil {
		return Item{}, err
	}
	return out, nil
}

func applyTags(old, remove, add []string) []string {
	rm := map[string]bool{}
	for _, t := range remove {
		rm[t] = true
	}
	var out []string
	for _, t := range old {
		if !rm[t] {
			out = append(out, t)
		}
	}
	return tagSet(append(out, add...))
}

func applyLinks(old, remove, add []gating.Link) []gating.Link {
	rm := map[gating.Link]bool{}
	for _, l := range remove {
		rm[l] = true
	}
	var out []gating.Link
	for _, l := range old {
		if !rm[l] {
			out = append(out, l)
		}
	}
	return linkSet(append(out, add...))
}

// ---- forget ----

// Forget deletes an item (pm, human or warden), admitted by the fence like
// any write and refused while any item is blockedBy or partOf it. The grant
// log stays: the number's fencing high-water mark survives.
func (l *Ledger) Forget(ctx context.Context, repoID int64, id gating.ItemID, token *int64, actor Actor) error {
	n, err := parseNumber(id)
	if err != nil {
		return err
	}
	if err := checkActor(actor); err != nil {
		return err
	}
	if !gating.Authors(actor.Role) {
		return refusal(ReasonRoleNotAllowed, "only pm, human and warden forget items; this token is %s", actor.Role)
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := servedRepo(ctx, tx, repoID); err != nil {
			return err
		}
		it, err := l.loadItem(ctx, tx, lockUpdate, repoID, n)
		if err != nil {
			return err
		}
		if it == nil {
			return fmt.Errorf("%s in repository %d: %w", id, repoID, ErrNotFound)
		}
		if v := gating.Admit(it.Fence, token, l.cfg.Region, nil); v != gating.Accepted {
			return &FenceError{Verdict: v, Item: it.ID, Presented: token, Current: it.Fence.Token}
		}
		deps, err := dependents(ctx, tx, repoID, it.ID)
		if err != nil {
			return err
		}
		var lookupErr error
		r := gating.CheckWrite(gating.Write{Kind: gating.Delete, Before: it.Snapshot(), Role: actor.Role,
			Lookup: l.lookup(ctx, tx, lockShare, repoID, nil, &lookupErr), Dependents: deps})
		if lookupErr != nil {
			return lookupErr
		}
		if r != nil {
			return r
		}
		for _, q := range []string{
			`DELETE FROM ledger_tags WHERE repo_id = $1 AND number = $2`,
			`DELETE FROM ledger_links WHERE repo_id = $1 AND number = $2`,
			`DELETE FROM ledger_items WHERE repo_id = $1 AND number = $2`,
		} {
			if _, err := tx.ExecContext(ctx, q, repoID, n); err != nil {
				return fmt.Errorf("forget %s: %w", it.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.wake(itemKey{repoID, n}) // waiters see "missing"
	return nil
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

// Lock takes the named lock (across replicas on PostgreSQL) until the
// returned function is called: one check-run evaluation per head, one park
// finish per item, one reconcile pass per repository.
func (l *Ledger) Lock(ctx context.Context, name string) (func(), error) {
	return l.db.Lock(ctx, name)
}
