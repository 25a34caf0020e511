package store

import "github.com/wardenhq/warden/internal/db"

// SettingsRows is the settings in effect per repository (repo_settings), written compare-and-swap on a version.
type SettingsRows struct {
	db *db.DB
	pg bool
}
