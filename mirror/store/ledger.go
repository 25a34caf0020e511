package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

	stmts stmtCache    // the hot writers' prepared statements (SQLite; stmtcache.go)
	batch writeBatcher // the hot writers' group commit (SQLite; writebatch.go)

	pruned atomic.Int64 // unix ms of the last prune of claim_requests (claimrequests.go)
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

// ---- create ----

// ---- read ----

// ---- update ----

// ---- forget ----

// Lock takes the named lock (across replicas on PostgreSQL) until the
// returned function is called: one check-run evaluation per head, one park
// finish per item, one reconcile pass per repository.
func (l *Ledger) Lock(ctx context.Context, name string) (func(), error) {
	return l.db.Lock(ctx, name)
}
