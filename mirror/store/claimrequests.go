package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/wardenhq/warden/gating"
)

// Idempotent claims (CONTRACT.md §11 requestId). A claim, renew, release or
// POST /ready/claim may carry a requestId. Its first answer is recorded in
// claim_requests in the same transaction as the write it answers, so a
// request that committed has its answer on record, and one that did not
// has none. A resend by the same token with the same id and the same body
// is answered with that answer (Replayed true) while it is current:
//
//   - a grant (claim, renew, /ready/claim), until its lease expires: the
//     same fencingToken and leaseExpiresAtUtc, not "contended" against the
//     claim the first send won;
//   - a release that released, for as long as the record is kept;
//   - a refusal, never: a refusal changed nothing, so the resend runs again
//     (and may be granted where the first send was not).
//
// A grant's record that has outlived its lease runs again too: the old
// grant is never handed out as if it were live. The same id with another
// body (another item, owner, lease, branch, operation) is refused with
// ReasonKeyReused while the record is kept (requestRetention; then pruned).
//
// On PostgreSQL the record's row is inserted (or locked) before anything
// else in the transaction, so two sends of one request racing each other
// take turns on it: the second waits for the first's commit and then
// replays its answer. On SQLite the one writer serialises them.

// ReasonKeyReused is the refusal of a requestId sent again with a
// different request (the agent API's idempotency-key-reused).
const ReasonKeyReused = "idempotency-key-reused"

// MaxRequestID is the longest requestId accepted.
const MaxRequestID = 128

// requestRetention is how long a request's record is kept at least (a
// day), and pruneEvery how often the ledger prunes older ones.
const (
	requestRetention = 24 * time.Hour
	pruneEvery       = 10 * time.Minute
)

// requestIDRe is a requestId: a UUID, a ULID, "run-7/claim-3".
var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)

// CheckRequestID refuses a requestId that is not 1 to MaxRequestID
// letters, digits and . _ : / - beginning with a letter or a digit. The
// empty string is no requestId and passes.
func CheckRequestID(id string) error {
	if id == "" || requestIDRe.MatchString(id) {
		return nil
	}
	shown := id
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	return refusal(ReasonInvalidRequest, "requestId %q must be 1 to %d letters, digits and . _ : / - beginning with a letter or a digit (a UUID does)", shown, MaxRequestID)
}

// The operations a requestId may key.
const (
	opClaim   = "claim"
	opRenew   = "renew"
	opRelease = "release"
	opNext    = "next" // POST /ready/claim: the item is the one it claimed
)

// keyed is one request that carries a requestId.
type keyed struct {
	actor  string // the token: role and name
	id     string
	op     string
	number int    // the item (for opNext: the candidate being tried)
	body   string // the request without its id, canonical JSON
}

// newKeyed is the keyed request of id (nil when id is empty): body is the
// request's fields as a struct, marshalled in field order.
func newKeyed(actor Actor, id, op string, n int, body any) (*keyed, error) {
	if id == "" {
		return nil, nil
	}
	if err := CheckRequestID(id); err != nil {
		return nil, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("requestId %s: encode the request: %w", id, err)
	}
	return &keyed{actor: string(actor.Role) + ":" + actor.Name, id: id, op: op, number: n, body: string(b)}, nil
}

// sameRequest refuses a record of another request under k's id.
func (k *keyed) sameRequest(op string, number int, body string, retention time.Duration) error {
	if op == k.op && body == k.body && (op == opNext || number == k.number) {
		return nil
	}
	what := op + " of " + string(gating.IDFor(number))
	if op == opNext {
		what = "POST /ready/claim"
	}
	return refusal(ReasonKeyReused, "requestId %q was used within the last %s for another request (%s with %s); a requestId names one request: send a new one for a new request",
		k.id, retention, what, body)
}

// requestRetention is how long records are kept: a day, or the lease
// ceiling if longer (a grant is replayed for its whole lease).
func (l *Ledger) requestRetention() time.Duration { return max(requestRetention, l.cfg.LeaseMax) }

// beginKeyed starts k (nil: nothing to do) in write transaction q, before
// any other statement: it returns the recorded answer to replay, or nil
// when the request is to run (then finishKeyed records its answer). A
// record of another request under the id is a ReasonKeyReused refusal.
func (l *Ledger) beginKeyed(ctx context.Context, q Querier, repoID int64, k *keyed) ([]byte, error) {
	if k == nil {
		return nil, nil
	}
	now := l.nowMs()
	res, err := q.ExecContext(ctx, `INSERT INTO claim_requests (repo_id, actor, request_id, op, number, body, answer, replay_until, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, '', 0, $7) ON CONFLICT (repo_id, actor, request_id) DO NOTHING`,
		repoID, k.actor, k.id, k.op, k.number, k.body, now)
	if err != nil {
		return nil, fmt.Errorf("requestId %s: record: %w", k.id, err)
	}
	if c, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("requestId %s: record: %w", k.id, err)
	} else if c == 1 {
		return nil, nil // the first send
	}
	lock := ""
	if l.pg {
		lock = " FOR UPDATE"
	}
	var op, body, answer string
	var number int
	var until, created int64
	if err := q.QueryRowContext(ctx, `SELECT op, number, body, answer, replay_until, created_at FROM claim_requests
		WHERE repo_id = $1 AND actor = $2 AND request_id = $3`+lock, repoID, k.actor, k.id).Scan(&op, &number, &body, &answer, &until, &created); err != nil {
		return nil, fmt.Errorf("requestId %s: read the record: %w", k.id, err)
	}
	if created < now-l.requestRetention().Milliseconds() {
		// Older than the retention and not pruned yet: as good as gone.
		_, err := q.ExecContext(ctx, `UPDATE claim_requests SET op = $4, number = $5, body = $6, answer = '', replay_until = 0, created_at = $7
			WHERE repo_id = $1 AND actor = $2 AND request_id = $3`, repoID, k.actor, k.id, k.op, k.number, k.body, now)
		if err != nil {
			return nil, fmt.Errorf("requestId %s: renew the record: %w", k.id, err)
		}
		return nil, nil
	}
	if err := k.sameRequest(op, number, body, l.requestRetention()); err != nil {
		return nil, err
	}
	if answer != "" && until > now {
		return []byte(answer), nil
	}
	return nil, nil // a refusal, or a grant whose lease is over: run again
}

// finishKeyed records answer as k's (nil k: nothing), for n, in the
// transaction that made it; until is when a resend stops being answered
// with it (unix ms; 0: never).
func (l *Ledger) finishKeyed(ctx context.Context, q Querier, repoID int64, k *keyed, n int, answer any, until int64) error {
	if k == nil {
		return nil
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return fmt.Errorf("requestId %s: encode the answer: %w", k.id, err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE claim_requests SET number = $4, answer = $5, replay_until = $6, created_at = $7
		WHERE repo_id = $1 AND actor = $2 AND request_id = $3`, repoID, k.actor, k.id, n, string(b), until, l.nowMs()); err != nil {
		return fmt.Errorf("requestId %s: record the answer: %w", k.id, err)
	}
	return nil
}

// lookupKeyed reads k's record outside any write (POST /ready/claim, before
// it reads the ready set): the answer to replay, or nil; a record of
// another request is refused as beginKeyed refuses it.
func (l *Ledger) lookupKeyed(ctx context.Context, repoID int64, k *keyed) ([]byte, error) {
	if k == nil {
		return nil, nil
	}
	var op, body, answer string
	var number int
	var until, created int64
	err := l.db.Read.QueryRowContext(ctx, `SELECT op, number, body, answer, replay_until, created_at FROM claim_requests
		WHERE repo_id = $1 AND actor = $2 AND request_id = $3`, repoID, k.actor, k.id).Scan(&op, &number, &body, &answer, &until, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("requestId %s: read the record: %w", k.id, err)
	}
	now := l.nowMs()
	if created < now-l.requestRetention().Milliseconds() {
		return nil, nil
	}
	if err := k.sameRequest(op, number, body, l.requestRetention()); err != nil {
		return nil, err
	}
	if answer != "" && until > now {
		return []byte(answer), nil
	}
	return nil, nil
}

// grantUntil is until when a claim or renew answer is replayed: a grant's
// lease expiry, a refusal never.
func grantUntil(r ClaimResult) int64 {
	if !r.Granted || r.LeaseExpiresAtUtc == nil {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, *r.LeaseExpiresAtUtc)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// replayedClaim decodes a recorded claim or renew answer.
func replayedClaim(b []byte) (ClaimResult, error) {
	var r ClaimResult
	if err := json.Unmarshal(b, &r); err != nil {
		return ClaimResult{}, fmt.Errorf("decode a recorded claim answer: %w", err)
	}
	r.Replayed = true
	return r, nil
}

// pruneRequests deletes the records older than the retention, at most once
// every pruneEvery per ledger (on the request path of a keyed request; a
// failure is harmless: a stale record is ignored anyway).
func (l *Ledger) pruneRequests(ctx context.Context) {
	now := l.nowMs()
	last := l.pruned.Load()
	if now-last < pruneEvery.Milliseconds() || !l.pruned.CompareAndSwap(last, now) {
		return
	}
	cut := now - l.requestRetention().Milliseconds()
	_, _ = l.db.Write.ExecContext(context.WithoutCancel(ctx), `DELETE FROM claim_requests WHERE created_at < $1`, cut)
}

// pruneFor prunes old records when k is a keyed request (outside its
// transaction: on SQLite the prune needs the one write connection).
func (l *Ledger) pruneFor(ctx context.Context, k *keyed) {
	if k != nil {
		l.pruneRequests(ctx)
	}
}

// The bodies a requestId keys, without the id: a resend must repeat them
// exactly.
type (
	claimBody struct {
		Owner          string   `json:"owner"`
		LeaseSeconds   *float64 `json:"leaseSeconds"`
		MaxWaitSeconds *float64 `json:"maxWaitSeconds,omitempty"`
		Branch         string   `json:"branch,omitempty"`
		Purpose        string   `json:"purpose,omitempty"`
	}
	renewBody struct {
		FencingToken int64    `json:"fencingToken"`
		LeaseSeconds *float64 `json:"leaseSeconds"`
	}
	releaseBody struct {
		FencingToken int64 `json:"fencingToken"`
	}
)

// claimKeyed is the keyed request of a claim (op opClaim) or of POST
// /ready/claim (opNext) trying item n; nil without a requestId.
func claimKeyed(actor Actor, op string, n int, req ClaimRequest) (*keyed, error) {
	return newKeyed(actor, req.RequestID, op, n, claimBody{Owner: req.Owner, LeaseSeconds: req.LeaseSeconds,
		MaxWaitSeconds: req.MaxWaitSeconds, Branch: req.Branch, Purpose: req.Purpose})
}

// replayedRelease decodes a recorded release answer.
func replayedRelease(b []byte) (ReleaseResult, error) {
	var r ReleaseResult
	if err := json.Unmarshal(b, &r); err != nil {
		return ReleaseResult{}, fmt.Errorf("decode a recorded release answer: %w", err)
	}
	r.Replayed = true
	return r, nil
}

// releaseUntil is until when a release answer is replayed: one that
// released, as long as the record is kept; a refusal never.
func (l *Ledger) releaseUntil(r ReleaseResult) int64 {
	if !r.Released {
		return 0
	}
	return l.nowMs() + l.requestRetention().Milliseconds()
}
