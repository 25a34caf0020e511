package mirror

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// ReportInterval is the least time between two writes of one item's report
// comment: edits within it are coalesced into one (CONTRACT.md §6).
const ReportInterval = time.Minute

// Report comment bookkeeping bounds.
const (
	// ReportRefusals is how many refusal lines an item's report keeps (the
	// newest).
	ReportRefusals = 5
	// reportLease is how long one writer owns an item's report comment while
	// it writes to GitHub; another writer (a goroutine, a replica) stores its
	// change as pending meanwhile. It outlasts any single API call.
	reportLease = 2 * time.Minute
	// reportRetry is how long a failed write waits before Flush retries it.
	reportRetry = 30 * time.Second
	// reportFlushBatch bounds the items one Flush writes.
	reportFlushBatch = 200
)

// Outcomes of Publish, Refuse, Refresh and Flush.
const (
	ReportCreated   = "report comment created"
	ReportEdited    = "report comment edited"
	ReportRecreated = "report comment recreated (the previous one was deleted)"
	ReportCoalesced = "report edit coalesced"
	ReportUnchanged = "report unchanged"
	ReportNotNeeded = "no report comment needed"
	ReportDryRun    = "report rendered; nothing written (dry_run)"
	ReportBusy      = "report comment being written elsewhere; edit pending"
	ReportIssueGone = "report not written: the issue is gone"
	reportNotDue    = "report edit not due"
)

// Reports keeps each item's report comment (CONTRACT.md §6 "The report
// comment"): one comment per item with something to report, created at its
// first finding and edited in place after, at most once per ReportInterval.
// It is safe for concurrent use, also by several replicas over one
// database: a write lease on the item's row makes one writer at a time, so
// an item never gets two report comments.
type Reports struct {
	rows *store.ReportRows
	gh   Clients
	log  *slog.Logger

	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Settings returns a repository's settings (dry_run); nil: the defaults.
	Settings func(ctx context.Context, r store.Repo) gating.Settings
	// StatusHint points to warden's status page (its URL), named in a
	// comment cut for length.
	StatusHint string
	// Bot returns warden's own login, by which a comment posted by a writer
	// that stopped before recording it is recognised (nil or "": such a
	// write waits until it is known).
	Bot func() string
	// Trail finds warden's own comments as the comment trail recorded them
	// (the store's ledger): a report comment this database has no row for
	// (a new or restored database) is edited, not posted twice. nil: none
	// is looked for.
	Trail ownComments
}

// ownComments finds the newest comment warden itself made on an issue
// whose text begins with a prefix (store.Ledger.OwnComment).
type ownComments interface {
	OwnComment(ctx context.Context, repoID int64, n int, prefix string) (int64, string, error)
}

// OpenReports returns the publisher over the store's report rows.
func OpenReports(st *store.Store, gh Clients, log *slog.Logger) (*Reports, error) {
	if st == nil {
		return nil, errors.New("open reports: no store")
	}
	if gh == nil {
		return nil, errors.New("open reports: no GitHub clients")
	}
	if log == nil {
		log = slog.Default()
	}
	return &Reports{rows: st.Reports, gh: gh, log: log.With("component", "reports")}, nil
}

func (r *Reports) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reports) settings(ctx context.Context, repo store.Repo) gating.Settings {
	if r.Settings != nil {
		return r.Settings(ctx, repo)
	}
	return gating.DefaultSettings()
}

// reportNeeded reports whether the item has, or must get, a report comment.
func reportNeeded(w *store.ReportRow) bool {
	return w.CommentID != 0 || len(w.Findings) > 0 || len(w.Refusals) > 0
}

// reportWrite is a write to GitHub decided under the lease.
type reportWrite struct {
	repo      store.Repo
	number    int
	commentID int64 // 0: create
	body      string
	token     string
	// lookSince is set when the last writer's lease lapsed unrecorded: its
	// create may have reached GitHub, so a create first looks for the
	// comment among those made since this time.
	lookSince time.Time
}

// Publish sets the item's open findings and brings its report comment in
// line. With no comment yet and nothing to report it does nothing (an item
// gets its comment at its first finding). Otherwise it renders the comment;
// if that is what GitHub has, nothing is written. If the comment was
// written less than ReportInterval ago the edit is stored as pending, due
// ReportInterval after the last write (Flush writes it); else it is created
// or edited now (a comment deleted on GitHub is created again). With
// dry_run it renders and stores, and writes nothing. It returns a short
// outcome (the Report* constants).
func (r *Reports) Publish(ctx context.Context, repo store.Repo, number int, findings []gating.ReportFinding) (string, error) {
	fs := normFindings(findings)
	return r.update(ctx, repo, number, func(w *store.ReportRow) { w.Findings = fs }, func(w *store.ReportRow) bool {
		return slices.Equal(w.Findings, fs)
	})
}

// Refuse adds a refusal line (why a /backlog command was refused; the
// newest ReportRefusals are kept) and republishes, coalesced like any edit:
// the line reaches the report comment even when the item has no findings.
func (r *Reports) Refuse(ctx context.Context, repo store.Repo, number int, line string) (string, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", errors.New("report refusal: empty line")
	}
	return r.update(ctx, repo, number, func(w *store.ReportRow) {
		w.Refusals = append(w.Refusals, line)
		if len(w.Refusals) > ReportRefusals {
			w.Refusals = slices.Clone(w.Refusals[len(w.Refusals)-ReportRefusals:])
		}
	}, nil)
}

// Refresh republishes the stored findings (for `/backlog status`): the
// comment is written again even when warden's record says GitHub has it
// (so a comment edited or deleted by hand is restored), coalesced like any
// edit. An item with nothing to report and no comment gets none.
func (r *Reports) Refresh(ctx context.Context, repo store.Repo, number int) (string, error) {
	return r.update(ctx, repo, number, func(w *store.ReportRow) {
		if w.CommentID != 0 {
			w.WrittenHash = "" // unknown: write it again
		}
	}, nil)
}

// CommentID returns the id of the item's report comment (0: none), so the
// comment trail recognises warden's own comment.
func (r *Reports) CommentID(ctx context.Context, repoID int64, number int) (int64, error) {
	return r.rows.CommentID(ctx, repoID, number)
}

// Listed returns, by issue number, the codes of the findings each item's
// report lists (or is about to, once a pending edit is written): the sweep
// judges again the items whose report lists a finding no longer held.
func (r *Reports) Listed(ctx context.Context, repo store.Repo) (map[int][]string, error) {
	return r.rows.Listed(ctx, repo.ID)
}

// Flush writes every pending edit that is due (a timer calls it every few
// seconds) and returns how many it wrote to GitHub. An error on one item
// does not stop the others: it is logged, the edit stays pending (retried
// after reportRetry), and the errors are returned joined.
func (r *Reports) Flush(ctx context.Context) (int, error) {
	dues, err := r.rows.Due(ctx, r.now().UnixMilli(), reportFlushBatch)
	if err != nil {
		return 0, fmt.Errorf("flush reports: %w", err)
	}
	written := 0
	var errs []error
	for _, d := range dues {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		out, err := r.run(ctx, d.Repo, d.Number, nil, true)
		if err != nil {
			r.log.Warn("report flush failed", "repo", d.Repo.FullName, "item", gating.IDFor(d.Number), "err", err)
			errs = append(errs, err)
			continue
		}
		switch out {
		case ReportCreated, ReportEdited, ReportRecreated:
			written++
		}
	}
	return written, errors.Join(errs...)
}

// update applies change to the item's row and republishes. same, when not
// nil, reports whether change would leave the row as it is: then a read
// alone can answer "nothing to do" without a write transaction.
func (r *Reports) update(ctx context.Context, repo store.Repo, number int, change func(*store.ReportRow), same func(*store.ReportRow) bool) (string, error) {
	if number <= 0 {
		return "", fmt.Errorf("report comment: issue number %d", number)
	}
	if repo.ID == 0 || !strings.Contains(repo.FullName, "/") {
		return "", fmt.Errorf("report comment of %s: repository %d %q is incomplete", gating.IDFor(number), repo.ID, repo.FullName)
	}
	if same != nil {
		if out, ok, err := r.quick(ctx, repo, number, change, same); err != nil || ok {
			return out, err
		}
	}
	return r.run(ctx, repo, number, change, false)
}

// quick answers from a read when nothing would change: no comment and
// nothing to report, or the same findings already on GitHub.
func (r *Reports) quick(ctx context.Context, repo store.Repo, number int, change func(*store.ReportRow), same func(*store.ReportRow) bool) (string, bool, error) {
	w, found, err := r.rows.Get(ctx, repo.ID, number)
	if err != nil {
		return "", false, err
	}
	if !found {
		w = &store.ReportRow{Repo: repo, Number: number}
		change(w)
		if !reportNeeded(w) {
			return ReportNotNeeded, true, nil
		}
		return "", false, nil
	}
	if !same(w) || w.Pending || w.LeaseOwner != "" || w.CommentID == 0 || w.Repo != repo {
		return "", false, nil
	}
	if hashBody(r.render(w)) == w.WrittenHash {
		return ReportUnchanged, true, nil
	}
	return "", false, nil
}

func (r *Reports) render(w *store.ReportRow) string {
	return gating.RenderReportComment(gating.IDFor(w.Number), w.Findings, w.Refusals, r.StatusHint)
}

// run decides under the row lock, writes to GitHub outside the transaction
// when the decision is to write now, and records the result. change (may be
// nil) edits the desired state first. flush: only a pending edit that is due
// is written. An item with no row gets one only when the change gives it
// something to report (flush never creates one).
func (r *Reports) run(ctx context.Context, repo store.Repo, number int, change func(*store.ReportRow), flush bool) (string, error) {
	settings := r.settings(ctx, repo) // before the transaction: it may read the database
	create := false
	if !flush {
		probe := &store.ReportRow{Repo: repo, Number: number}
		if change != nil {
			change(probe)
		}
		create = reportNeeded(probe)
	}
	var out string
	var plan *reportWrite
	err := r.rows.Update(ctx, repo, number, create, r.now, func(w *store.ReportRow, now int64) (bool, error) {
		switch {
		case w == nil && flush:
			out = reportNotDue
			return false, nil
		case w == nil:
			out = ReportNotNeeded
			return false, nil
		case flush && (!w.Pending || w.DueAt > now):
			out = reportNotDue
			return false, nil
		}
		w.Repo = repo
		if change != nil {
			change(w)
		}
		out, plan = r.decide(w, now, settings.DryRun)
		return true, nil
	})
	if err != nil {
		return "", err
	}
	if plan == nil {
		return out, nil
	}
	return r.write(ctx, plan)
}

// decide renders the desired body and says what to do: an outcome with no
// write, or a write to make now (the lease is then taken on w).
func (r *Reports) decide(w *store.ReportRow, now int64, dryRun bool) (string, *reportWrite) {
	if !reportNeeded(w) {
		w.Pending, w.Body = false, ""
		return ReportNotNeeded, nil
	}
	prev := w.Body
	w.Body = r.render(w)
	switch {
	case dryRun:
		w.Pending = false
		if w.Body != prev {
			r.log.Info("dry run: report comment (not written)", "repo", w.Repo.FullName, "item", gating.IDFor(w.Number),
				"comment", w.CommentID, "body", cut(w.Body, 300))
		}
		return ReportDryRun, nil
	case w.CommentID != 0 && hashBody(w.Body) == w.WrittenHash:
		w.Pending = false
		return ReportUnchanged, nil
	case w.LeaseOwner != "" && w.LeaseUntil > now:
		// Another writer is at it; it re-checks what is desired when it
		// records its write (and sets when the edit is due). Should it never
		// record, Flush takes over once its lease has lapsed.
		w.Pending, w.DueAt = true, max(w.LeaseUntil, w.WrittenAt+ReportInterval.Milliseconds())
		return ReportBusy, nil
	case w.WrittenAt != 0 && now < w.WrittenAt+ReportInterval.Milliseconds():
		w.Pending, w.DueAt = true, w.WrittenAt+ReportInterval.Milliseconds()
		return ReportCoalesced, nil
	}
	var lookSince time.Time
	if w.LeaseOwner != "" { // a lapsed lease: its writer stopped before recording
		lookSince = time.UnixMilli(w.LeaseUntil - reportLease.Milliseconds())
	}
	w.LeaseOwner, w.LeaseUntil = leaseToken(), now+reportLease.Milliseconds()
	w.Pending, w.DueAt = true, now // until the write is recorded
	return "", &reportWrite{repo: w.Repo, number: w.Number, commentID: w.CommentID, body: w.Body, token: w.LeaseOwner, lookSince: lookSince}
}

// normFindings orders and de-duplicates findings as the comment lists them
// (so that the same set compares equal however it was gathered).
func normFindings(in []gating.ReportFinding) []gating.ReportFinding {
	fs := slices.Clone(in)
	slices.SortFunc(fs, func(a, b gating.ReportFinding) int {
		if c := strings.Compare(a.Code, b.Code); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	fs = slices.Compact(fs)
	if fs == nil {
		fs = []gating.ReportFinding{}
	}
	return fs
}

func hashBody(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

func leaseToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// isStatus reports whether err is a GitHub answer with the given status.
func isStatus(err error, code int) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == code
}
