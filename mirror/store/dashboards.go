package store

import "github.com/wardenhq/warden/internal/db"

// DashboardRows is the dashboards' rows (dashboards): each repository's dashboard issue, what was last written to it, and its write lease.
type DashboardRows struct {
	db *db.DB
	pg bool
}
