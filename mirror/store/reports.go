package store

import "github.com/wardenhq/warden/internal/db"

// ReportRows is the report comments' rows (report_comments): what each item's report comment holds and its write lease.
type ReportRows struct {
	db *db.DB
	pg bool
}
