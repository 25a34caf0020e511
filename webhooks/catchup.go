package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/google/go-github/v66/github"
)

// RedeliveryWindow is how far back GitHub redelivers a webhook.
const RedeliveryWindow = 3 * 24 * time.Hour

// StoredChecker says which delivery ids the inbox holds (*Inbox does).
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
}

// CatchUpResult counts what one catch-up run saw and did. Listed counts
// rows of the delivery log; the others count deliveries (guids).
type CatchUpResult struct {
	Listed      int // delivery-log rows read
	Missing     int // handled deliveries never stored, with no OK attempt, within the window
	Redelivered int // redeliveries GitHub accepted (202)
	TooOld      int // handled deliveries never stored whose last attempt is past the window
	Failed      int // redelivery requests GitHub refused or that failed
	Deferred    int // missing deliveries left for the next run (over MaxRedeliveries)
	Truncated   bool
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
	var res CatchUpResult
	cutoff := opt.Now().Add(-opt.Window)
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
	var firstErr error
	for _, guid := range candidates {
		if stored[guid] {
			continue
		}
		g := groups[guid]
		if !g.newest.GetDeliveredAt().Time.After(cutoff) {
			res.TooOld++
			continue
		}
		res.Missing++
		if res.Redelivered+res.Failed >= opt.MaxRedeliveries {
			res.Deferred++
			continue
		}
		_, _, err := gh.Apps.RedeliverHookDelivery(ctx, g.newest.GetID())
		var accepted *github.AcceptedError
		if err == nil || errors.As(err, &accepted) {
			res.Redelivered++
			opt.Log.Info("catch-up: redelivery requested", "delivery", guid, "event", g.event, "attempt", g.newest.GetID())
			continue
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Failed++
		if firstErr == nil {
			firstErr = err
		}
		opt.Log.Warn("catch-up: redelivery refused", "delivery", guid, "event", g.event, "attempt", g.newest.GetID(), "err", err)
	}
	level := slog.LevelDebug
	if res.Missing > 0 || res.TooOld > 0 || res.Failed > 0 {
		level = slog.LevelInfo
	}
	opt.Log.Log(ctx, level, "catch-up: delivery log checked", "listed", res.Listed, "missing", res.Missing,
		"redelivered", res.Redelivered, "too_old", res.TooOld, "failed", res.Failed, "deferred", res.Deferred,
		"truncated", res.Truncated)
	if firstErr != nil {
		return res, fmt.Errorf("catch-up: %d redeliveries failed, the first: %w", res.Failed, firstErr)
	}
	return res, nil
}
