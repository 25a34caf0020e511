package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// Records is warden's store with what every reader of it needs: each
// repository's settings in effect (.github/backlog.yml as last loaded: the
// labels, the poison threshold) and the findings no item carries (settings
// problems, divergences, shared identities). The service builds it once in
// Build; the commands that read or write the ledger directly (warden ready,
// warden items) open it with OpenRecords, so they judge and report exactly
// as GET /ready and the status page do.
type Records struct {
	Store    *store.Store
	Settings *mirror.SettingsStore
}

// OpenRecords migrates d and assembles the records over it. gh may be nil
// for a command that never calls GitHub (the settings then come from the
// database alone); now is the clock (nil: time.Now).
func OpenRecords(ctx context.Context, d *db.DB, s *config.Settings, gh mirror.Clients, now func() time.Time, log *slog.Logger) (*Records, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Records{}
	// The store reads the settings through r.Settings, opened over the store
	// right after it: neither is used before both exist.
	st, err := store.Open(ctx, d, store.Config{Region: s.Region, LeaseDefault: s.LeaseDefault,
		LeaseMax: s.LeaseMax, Quarantine: s.Quarantine, Now: now,
		Settings:     func(ctx context.Context, repo store.Repo) gating.Settings { return r.Settings.Get(ctx, repo) },
		RepoFindings: r.repoFindings,
	})
	if err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	r.Store = st
	if r.Settings, err = mirror.OpenSettingsStore(st, gh, s.Agents, log.With("component", "settings")); err != nil {
		return nil, fmt.Errorf("open the settings store: %w", err)
	}
	r.Settings.IsRecordedAgent = func(repoID int64, login string) bool {
		rec, err := st.Acts.IsRecorded(context.WithoutCancel(ctx), repoID, login, store.AgentRecorded)
		if err != nil {
			log.Warn("recorded-agent lookup failed; the pusher counts as an agent (fail closed)", "login", login, "err", err)
			return true
		}
		return rec
	}
	return r, nil
}

// repoFindings are a repository's findings that no item carries: its
// settings file's problems, the pull requests that link no item, and the
// logins seen acting as both an agent and a human. A failed read is itself
// reported (the status page must not go quiet on an error).
func (r *Records) repoFindings(ctx context.Context, repo store.Repo) []gating.Defect {
	var out []gating.Defect
	probs, err := r.Settings.Problems(ctx, repo.ID)
	if err != nil {
		out = append(out, gating.Defect{Code: mirror.SettingsInvalid, Detail: "the settings findings could not be read: " + err.Error()})
	}
	for _, p := range probs {
		out = append(out, gating.Defect{Code: p.Code, Detail: p.String()})
	}
	if rd, err := r.Store.Ledger.RepoDivergences(ctx, repo.ID); err != nil {
		out = append(out, gating.Defect{Code: "pr-without-item", Detail: "the repository's divergences could not be read: " + err.Error()})
	} else {
		out = append(out, rd...)
	}
	logins, err := r.Store.Acts.RecordedLogins(ctx, repo.ID)
	if err != nil {
		return append(out, gating.Defect{Code: mirror.CodeSharedIdentity, Detail: "the recorded logins could not be read: " + err.Error()})
	}
	for _, l := range logins {
		if l.Kind == store.SharedIdentity {
			out = append(out, gating.Defect{Code: mirror.CodeSharedIdentity, Detail: l.Detail + "; it is refused every human act"})
		}
	}
	return out
}
