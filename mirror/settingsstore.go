package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// settingsRecord is one row of repo_settings.
type settingsRecord struct {
	settings  gating.Settings
	problems  []SettingsProblem
	sourceSHA string
	pushedAt  int64
	changedBy string
	pending   *settingsFile
	version   int64
}

// findings are the problems to show for a record with a push pending (not
// made by a human): the file it brought, judged against the settings in
// effect. Without one, the problems of the file in effect.
func (rec settingsRecord) findings() []SettingsProblem {
	if rec.pending == nil {
		return rec.problems
	}
	proposed, problems := rec.pending.parse(rec.settings)
	_, findings := DecideSettingsChange(rec.settings, proposed, problems, false)
	return locateProblems(rec.pending.Content, findings)
}

// read returns the repository's row, decoded; with none, found is false and
// the record holds the defaults.
func (s *SettingsStore) read(ctx context.Context, repoID int64) (rec settingsRecord, found bool, err error) {
	row, found, err := s.rows.Get(ctx, repoID)
	if err != nil {
		return settingsRecord{}, false, err
	}
	if !found {
		return settingsRecord{settings: gating.DefaultSettings()}, false, nil
	}
	rec = settingsRecord{sourceSHA: row.SourceSHA, pushedAt: row.PushedAt, changedBy: row.ChangedBy, version: row.Version}
	rec.settings = gating.DefaultSettings() // a field the stored JSON lacks (an older warden's) keeps its default
	if err := json.Unmarshal([]byte(row.SettingsJSON), &rec.settings); err != nil {
		return settingsRecord{}, false, fmt.Errorf("read the settings of repository %d: settings_json: %w", repoID, err)
	}
	if err := json.Unmarshal([]byte(row.ProblemsJSON), &rec.problems); err != nil {
		return settingsRecord{}, false, fmt.Errorf("read the settings of repository %d: problems_json: %w", repoID, err)
	}
	if row.PendingJSON != "" {
		rec.pending = &settingsFile{}
		if err := json.Unmarshal([]byte(row.PendingJSON), rec.pending); err != nil {
			return settingsRecord{}, false, fmt.Errorf("read the settings of repository %d: pending_json: %w", repoID, err)
		}
	}
	return rec, true, nil
}

// save writes next over prev (read with found) if nobody wrote the row
// since; ok is false when somebody did.
func (s *SettingsStore) save(ctx context.Context, repoID int64, prev settingsRecord, found bool, next settingsRecord) (ok bool, err error) {
	settingsJSON, err := json.Marshal(next.settings)
	if err != nil {
		return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
	}
	problems := next.problems
	if problems == nil {
		problems = []SettingsProblem{}
	}
	problemsJSON, err := json.Marshal(problems)
	if err != nil {
		return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
	}
	pendingJSON := []byte{}
	if next.pending != nil {
		if pendingJSON, err = json.Marshal(next.pending); err != nil {
			return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
		}
	}
	next.version = prev.version + 1
	row := store.SettingsRow{SettingsJSON: string(settingsJSON), ProblemsJSON: string(problemsJSON), SourceSHA: next.sourceSHA,
		PushedAt: next.pushedAt, ChangedBy: next.changedBy, PendingJSON: string(pendingJSON), Version: next.version}
	if ok, err := s.rows.Save(ctx, repoID, prev.version, found, row, s.now().UnixMilli()); err != nil || !ok {
		return false, err
	}
	s.remember(repoID, next, true)
	return true, nil
}

func (s *SettingsStore) cached(repoID int64) (settingsCached, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cache[repoID]
	return c, ok
}

func (s *SettingsStore) remember(repoID int64, rec settingsRecord, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache[repoID] = settingsCached{settings: cloneSettings(rec.settings), problems: slices.Clone(rec.problems), found: found, at: s.now()}
}

func cloneSettings(s gating.Settings) gating.Settings {
	s.Agents = slices.Clone(s.Agents)
	s.AgentAssignees = slices.Clone(s.AgentAssignees)
	return s
}

// errSettingsUnknown: nothing is stored for the repository (its settings
// file was never read).
var errSettingsUnknown = errors.New("no settings stored for the repository yet (its settings file was not read)")

// DryRun reports whether warden must write nothing to GitHub on r (its
// dry_run setting): the dry-run guard's question before each write. It
// reads the table, not the cache, so a push of dry_run that another
// replica applied a moment ago holds this replica's next write, and
// refreshes the cache with what it read. With nothing stored for r the
// settings are unknown: an error (errSettingsUnknown), on which the guard
// writes nothing.
func (s *SettingsStore) DryRun(ctx context.Context, r store.Repo) (bool, error) {
	rec, found, err := s.read(ctx, r.ID)
	if err != nil {
		return false, fmt.Errorf("read the settings of %s: %w", r.FullName, err)
	}
	s.remember(r.ID, rec, found)
	if !found {
		return false, fmt.Errorf("settings of %s: %w", r.FullName, errSettingsUnknown)
	}
	return rec.settings.DryRun, nil
}

// ensureLoaded makes sure r's settings are stored before warden acts on r:
// with nothing stored (a repository served before its file was read, or
// whose read failed), its settings file is read now (Load). A repository
// whose file says dry_run then gets no write caused by a delivery handled
// before the file was read.
func (s *SettingsStore) ensureLoaded(ctx context.Context, r store.Repo) error {
	if c, ok := s.cached(r.ID); ok && c.found {
		return nil
	}
	rec, found, err := s.read(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("read the settings of %s: %w", r.FullName, err)
	}
	if found {
		s.remember(r.ID, rec, found)
		return nil
	}
	if _, err := s.Load(ctx, r); err != nil {
		return fmt.Errorf("read the settings file of %s before acting on it: %w", r.FullName, err)
	}
	return nil
}
