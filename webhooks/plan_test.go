package webhooks

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestDueUsesThePendingIndex: the due scan reads the pending deliveries
// through an index, not every row of the inbox (the done ones pile up).
func TestDueUsesThePendingIndex(t *testing.T) {
	d := openTestDB(t, filepath.Join(t.TempDir(), "w.db"))
	defer d.Close()
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	rows, err := ib.db.Read.QueryContext(context.Background(), `EXPLAIN QUERY PLAN SELECT seq, delivery_id, event, attempts, received_at FROM inbox
		WHERE state = 'pending' AND next_attempt_at <= $1 AND seq > $2 ORDER BY seq LIMIT $3`, 1, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "inbox_pending") {
		t.Fatalf("the due scan does not use a pending index: %s", got)
	}
}
