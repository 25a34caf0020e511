package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// RedeliveryWindow is how far back GitHub redelivers a webhook.
const RedeliveryWindow = 3 * 24 * time.Hour

// StoredChecker says which delivery ids the inbox holds (*Inbox does).
// An *Inbox also keeps the catch-up's record of the redeliveries it asked
// for (see CatchUp).
type StoredChecker interface {
	Stored(ctx context.Context, ids []string) (map[string]bool, error)
}

// CatchUpOptions tune a catch-up run. The zero value is usable.
type CatchUpOptions struct {
	// MaxRedeliveries caps the redelivery requests of one run; 0 = 100.
	MaxRedeliveries int
	// MaxPages caps the delivery-log pages read per run; 0 = 50.
	MaxPages int
	// PerPage is the page size; 0 = 100 (GitHub's maximum).
	PerPage int
	// Window is how far back deliveries are redelivered; 0 = RedeliveryWindow.
	Window time.Duration
	// Now is the clock the window is measured on; nil = time.Now.
	Now func() time.Time
	// Log receives the run's summary; nil = discard.
	Log *slog.Logger
	// RetryAfter is how long a redelivery GitHub accepted is waited for
	// before the delivery is asked for again; it doubles with each request
	// for the same delivery, up to MaxRetryWait. 0 = DefaultRetryAfter.
	RetryAfter time.Duration
	// MaxRetryWait caps that wait (and the wait after a refusal GitHub may
	// not repeat); 0 = an hour, never less than RetryAfter.
	MaxRetryWait time.Duration
	// Retention is how long the record of a redelivery request is kept;
	// 0 = 7 days (the inbox's default retention), never less than Window.
	Retention time.Duration
}

// DefaultRetryAfter is how long the catch-up waits for a redelivery GitHub
// accepted before asking for the delivery again. GitHub sends one within
// seconds; one that has not arrived after minutes was lost on the way (or
// warden was unreachable again).
const DefaultRetryAfter = 5 * time.Minute

// CatchUpResult counts what one catch-up run saw and did. Listed counts
// rows of the delivery log; the others count deliveries (guids).
type CatchUpResult struct {
	Listed      int // delivery-log rows read
	Missing     int // handled deliveries never stored, with no OK attempt, within the window
	Redelivered int // redeliveries GitHub accepted (202)
	TooOld      int // handled deliveries never stored whose last attempt is past the window
	Failed      int // redelivery requests GitHub refused or that failed
	Deferred    int // missing deliveries left for the next run (over MaxRedeliveries)
	// Waiting counts missing deliveries not asked for because a run (this
	// process's or another replica's) asked for them recently, or GitHub
	// refused them: their redelivery is awaited, or not to be asked again yet.
	Waiting int
	// Again counts, of Redelivered, the deliveries asked for before whose
	// redelivery never arrived (or was refused), asked for once more.
	Again     int
	Truncated bool
}

// guidRows is one delivery (guid) across its attempts in the log.
type guidRows struct {
	event  string
	ok     bool
	newest *github.HookDelivery // the latest attempt (highest id)
}

// CatchUp asks GitHub to redeliver the webhooks warden missed. It pages the
// App's delivery log (GET /app/hook/deliveries, newest first, cursor paging;
// gh must be the App's JWT client), groups the rows by guid, and for each
// guid of an event handles accepts that has no OK attempt and that the
// inbox never stored, requests one redelivery of its latest attempt when
// that attempt lies within the redelivery window (GitHub answers 202).
// Paging stops at the first page reaching past the window. Each guid is
// redelivered at most once per run, and at most MaxRedeliveries in all.
//
// A delivery is asked for once, whatever the number of runs: each request
// is first claimed in a record (kept in the inbox's database when inbox is
// an *Inbox, shared by every process on it and kept across restarts; in
// this process's memory otherwise), and a delivery whose record is not due
// is left alone (Waiting). A redelivery GitHub accepted that has not
// arrived is asked for again after RetryAfter (doubling with each request,
// up to MaxRetryWait), and the log says so; one GitHub refused is recorded
// with the reason and asked for again after the same wait, or, when GitHub
// refused that delivery itself (a 4xx answer other than a rate limit), not
// within the window. Records older than Retention are pruned.
func CatchUp(ctx context.Context, gh *github.Client, inbox StoredChecker, handles func(event string) bool, opt CatchUpOptions) (CatchUpResult, error) {
	if opt.MaxRedeliveries <= 0 {
		opt.MaxRedeliveries = 100
	}
	if opt.MaxPages <= 0 {
		opt.MaxPages = 50
	}
	if opt.PerPage <= 0 {
		opt.PerPage = 100
	}
	if opt.Window <= 0 {
		opt.Window = RedeliveryWindow
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.RetryAfter <= 0 {
		opt.RetryAfter = DefaultRetryAfter
	}
	if opt.MaxRetryWait <= 0 {
		opt.MaxRetryWait = time.Hour
	}
	opt.MaxRetryWait = max(opt.MaxRetryWait, opt.RetryAfter)
	if opt.Retention <= 0 {
		opt.Retention = 7 * 24 * time.Hour
	}
	opt.Retention = max(opt.Retention, opt.Window)
	records, ok := inbox.(redeliveryLog)
	if !ok {
		records = memoryRedeliveries
	}
	var res CatchUpResult
	cutoff := opt.Now().Add(-opt.Window)
	if n, err := records.pruneRedeliveries(ctx, opt.Now().Add(-opt.Retention)); err != nil {
		opt.Log.Warn("catch-up: prune the records of redeliveries asked for", "err", err)
	} else if n > 0 {
		opt.Log.Debug("catch-up: pruned the records of redeliveries asked for", "count", n, "older_than", opt.Retention.String())
	}
	groups := map[string]*guidRows{}
	cursor := ""
	for page := 0; ; page++ {
		if page == opt.MaxPages {
			res.Truncated = true
			break
		}
		rows, resp, err := gh.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: opt.PerPage, Cursor: cursor})
		if err != nil {
			return res, fmt.Errorf("catch-up: list the App's deliveries: %w", err)
		}
		pastWindow := false
		for _, d := range rows {
			res.Listed++
			guid := d.GetGUID()
			if guid == "" {
				continue
			}
			if !d.GetDeliveredAt().Time.After(cutoff) {
				pastWindow = true
			}
			g := groups[guid]
			if g == nil {
				g = &guidRows{event: d.GetEvent()}
				groups[guid] = g
			}
			if d.GetStatus() == "OK" {
				g.ok = true
			}
			if g.newest == nil || d.GetID() > g.newest.GetID() {
				g.newest = d
			}
		}
		if pastWindow || resp == nil || resp.Cursor == "" || len(rows) == 0 {
			break
		}
		cursor = resp.Cursor
	}

	var candidates []string
	for guid, g := range groups {
		if g.ok || (handles != nil && !handles(g.event)) {
			continue
		}
		candidates = append(candidates, guid)
	}
	sort.Slice(candidates, func(i, j int) bool { // oldest first: order matters less than loss
		return groups[candidates[i]].newest.GetID() < groups[candidates[j]].newest.GetID()
	})
	stored, err := inbox.Stored(ctx, candidates)
	if err != nil {
		return res, fmt.Errorf("catch-up: %w", err)
	}
	var missing []string
	for _, guid := range candidates {
		if stored[guid] {
			continue
		}
		if !groups[guid].newest.GetDeliveredAt().Time.After(cutoff) {
			res.TooOld++
			continue
		}
		missing = append(missing, guid)
	}
	res.Missing = len(missing)
	asked, err := records.redeliveries(ctx, missing)
	if err != nil {
		return res, fmt.Errorf("catch-up: %w", err)
	}
	var firstErr, recordErr error
	for _, guid := range missing {
		g := groups[guid]
		prev, before := asked[guid]
		now := opt.Now()
		if before && now.Before(prev.next) {
			res.Waiting++
			logWaiting(ctx, opt.Log, guid, g, prev, now)
			continue
		}
		if res.Redelivered+res.Failed >= opt.MaxRedeliveries {
			res.Deferred++
			continue
		}
		claim := redelivery{guid: guid, event: g.event, attempt: g.newest.GetID(), requested: now,
			requests: prev.requests + 1}
		claim.next = now.Add(retryWait(opt, claim.requests))
		won, err := records.claimRedelivery(ctx, claim)
		if err != nil {
			return res, fmt.Errorf("catch-up: %w", err)
		}
		if !won { // another run claimed it since we read its record
			res.Waiting++
			opt.Log.Debug("catch-up: redelivery being asked for by another run", "delivery", guid, "event", g.event)
			continue
		}
		if before {
			logAskingAgain(opt.Log, guid, g, prev, now)
		}
		_, _, err = gh.Apps.RedeliverHookDelivery(ctx, claim.attempt)
		var accepted *github.AcceptedError
		if err == nil || errors.As(err, &accepted) {
			res.Redelivered++
			if before {
				res.Again++
			}
			claim.outcome = redeliveryAccepted
			opt.Log.Info("catch-up: redelivery requested", "delivery", guid, "event", g.event, "attempt", claim.attempt,
				"requests", claim.requests, "ask_again_after", claim.next.UTC().Format(time.RFC3339))
		} else {
			if ctx.Err() != nil {
				// The claim stays: the request may have reached GitHub.
				return res, fmt.Errorf("catch-up: %w", ctx.Err())
			}
			res.Failed++
			if firstErr == nil {
				firstErr = err
			}
			claim.outcome, claim.reason = redeliveryRefused, reason(err)
			if refusedForGood(err) {
				// GitHub will not redeliver this one (gone, too old):
				// asking again within the window would be refused again.
				claim.next = now.Add(opt.Window)
				opt.Log.Warn("catch-up: redelivery refused; not asking for it again", "delivery", guid, "event", g.event,
					"attempt", claim.attempt, "err", err)
			} else {
				opt.Log.Warn("catch-up: redelivery refused", "delivery", guid, "event", g.event, "attempt", claim.attempt,
					"err", err, "ask_again_after", claim.next.UTC().Format(time.RFC3339))
			}
		}
		// Recorded even when ctx ends now: the request was made.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = records.settleRedelivery(wctx, claim)
		cancel()
		if err != nil && recordErr == nil {
			recordErr = err
		}
	}
	level := slog.LevelDebug
	if res.Missing > 0 || res.TooOld > 0 || res.Failed > 0 {
		level = slog.LevelInfo
	}
	opt.Log.Log(ctx, level, "catch-up: delivery log checked", "listed", res.Listed, "missing", res.Missing,
		"redelivered", res.Redelivered, "again", res.Again, "waiting", res.Waiting, "too_old", res.TooOld,
		"failed", res.Failed, "deferred", res.Deferred, "truncated", res.Truncated)
	var errs []error
	if firstErr != nil {
		errs = append(errs, fmt.Errorf("catch-up: %d redeliveries failed, the first: %w", res.Failed, firstErr))
	}
	if recordErr != nil {
		// The claims hold (each was recorded before its request), so a
		// delivery is not asked for again early; only GitHub's answer is lost.
		errs = append(errs, fmt.Errorf("catch-up: %w", recordErr))
	}
	return res, errors.Join(errs...)
}

// retryWait is how long after its n-th request (n ≥ 1) a delivery is not
// asked for again: RetryAfter, doubled for each request before, at most
// MaxRetryWait.
func retryWait(opt CatchUpOptions, n int) time.Duration {
	w := opt.RetryAfter
	for i := 1; i < n && w < opt.MaxRetryWait; i++ {
		w *= 2
	}
	return min(w, opt.MaxRetryWait)
}

// refusedForGood reports whether GitHub refused to redeliver this delivery
// itself (404: no such delivery; 422: too old to redeliver, say), as
// opposed to a refusal that may pass: a rate limit (403, 429), a time-out,
// a server error, a failed connection.
func refusedForGood(err error) bool {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil {
		return false
	}
	switch c := er.Response.StatusCode; {
	case c == http.StatusForbidden, c == http.StatusRequestTimeout, c == http.StatusTooManyRequests:
		return false
	default:
		return c >= 400 && c < 500
	}
}

// reason is err's text as recorded for a refused redelivery, at most 1000
// bytes.
func reason(err error) string {
	const limit = 1000
	msg := err.Error()
	if len(msg) <= limit {
		return msg
	}
	return strings.ToValidUTF8(msg[:limit], "") + "…"
}

// logWaiting says why a missing delivery is not asked for in this run.
func logWaiting(ctx context.Context, log *slog.Logger, guid string, g *guidRows, prev redelivery, now time.Time) {
	attrs := []any{"delivery", guid, "event", g.event, "asked_at", prev.requested.UTC().Format(time.RFC3339),
		"asked_ago", now.Sub(prev.requested).Round(time.Millisecond).String(), "requests", prev.requests,
		"ask_again_after", prev.next.UTC().Format(time.RFC3339)}
	switch prev.outcome {
	case redeliveryRefused:
		log.Log(ctx, slog.LevelInfo, "catch-up: redelivery refused before; not asking again yet", append(attrs, "reason", prev.reason)...)
	default:
		log.Log(ctx, slog.LevelDebug, "catch-up: redelivery already asked for; waiting for it", attrs...)
	}
}

// logAskingAgain says that a delivery asked for before is asked for again.
func logAskingAgain(log *slog.Logger, guid string, g *guidRows, prev redelivery, now time.Time) {
	attrs := []any{"delivery", guid, "event", g.event, "asked_at", prev.requested.UTC().Format(time.RFC3339),
		"asked_ago", now.Sub(prev.requested).Round(time.Second).String(), "requests", prev.requests}
	switch prev.outcome {
	case redeliveryRefused:
		log.Info("catch-up: redelivery refused before; asking again", append(attrs, "reason", prev.reason)...)
	case redeliveryAccepted:
		log.Warn("catch-up: a redelivery GitHub accepted never arrived; asking again", attrs...)
	default: // the asker stopped before recording GitHub's answer
		log.Warn("catch-up: a redelivery asked for never arrived (GitHub's answer was not recorded); asking again", attrs...)
	}
}
