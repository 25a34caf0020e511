package mirror

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wardenhq/warden/gating"
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
	return findings
}

// read returns the repository's row; with none, found is false and the
// record holds the defaults.
func (s *SettingsStore) read(ctx context.Context, repoID int64) (rec settingsRecord, found bool, err error) {
	var settingsJSON, problemsJSON, pendingJSON string
	err = s.db.Read.QueryRowContext(ctx, `SELECT settings_json, problems_json, source_sha, pushed_at, changed_by, pending_json, version
		FROM repo_settings WHERE repo_id = $1`, repoID).Scan(&settingsJSON, &problemsJSON, &rec.sourceSHA, &rec.pushedAt,
		&rec.changedBy, &pendingJSON, &rec.version)
	if errors.Is(err, sql.ErrNoRows) {
		return settingsRecord{settings: gating.DefaultSettings()}, false, nil
	}
	if err != nil {
		return settingsRecord{}, false, fmt.Errorf("read the settings of repository %d: %w", repoID, err)
	}
	rec.settings = gating.DefaultSettings() // a field the stored JSON lacks (an older warden's) keeps its default
	if err := json.Unmarshal([]byte(settingsJSON), &rec.settings); err != nil {
		return settingsRecord{}, false, fmt.Errorf("read the settings of repository %d: settings_json: %w", repoID, err)
	}
	if err := json.Unmarshal([]byte(problemsJSON), &rec.problems); err != nil {
		return settingsRecord{}, false, fmt.Errorf("read the settings of repository %d: problems_json: %w", repoID, err)
	}
	if pendingJSON != "" {
		rec.pending = &settingsFile{}
		if err := json.Unmarshal([]byte(pendingJSON), rec.pending); err != nil {
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
	now := s.now().UnixMilli()
	var res sql.Result
	if found {
		res, err = s.db.Write.ExecContext(ctx, `UPDATE repo_settings SET settings_json = $1, problems_json = $2, source_sha = $3,
			pushed_at = $4, changed_by = $5, pending_json = $6, version = $7, updated_at = $8 WHERE repo_id = $9 AND version = $10`,
			string(settingsJSON), string(problemsJSON), next.sourceSHA, next.pushedAt, next.changedBy, string(pendingJSON),
			next.version, now, repoID, prev.version)
	} else {
		res, err = s.db.Write.ExecContext(ctx, `INSERT INTO repo_settings (repo_id, settings_json, problems_json, source_sha,
			pushed_at, changed_by, pending_json, version, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (repo_id) DO NOTHING`,
			repoID, string(settingsJSON), string(problemsJSON), next.sourceSHA, next.pushedAt, next.changedBy, string(pendingJSON),
			next.version, now)
	}
	if err != nil {
		return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("save the settings of repository %d: %w", repoID, err)
	}
	if n == 0 {
		return false, nil
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
	return s
}
