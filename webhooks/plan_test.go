package webhooks

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestQueueReadsUseIndexes: the dispatcher's reads of the inbox go through
// an index, not every row of the inbox (the done ones pile up): what was
// queued since it last looked (inbox_queued), and its count of the pending
// ones for the depth gauge (the pending index).
func TestQueueReadsUseIndexes(t *testing.T) {
	d := openTestDB(t, filepath.Join(t.TempDir(), "w.db"))
	defer d.Close()
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	for _, c := range []struct {
		query string
		args  []any
		index string
	}{
		{queuedSelect + ` WHERE state = 'pending' AND queued > $1 ORDER BY queued LIMIT $2`, []any{0, 10}, "inbox_queued"},
		{`SELECT COUNT(*) FROM inbox WHERE state = 'pending'`, nil, "inbox_pending_seq"},
	} {
		rows, err := ib.db.Read.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+c.query, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if got := strings.Join(plan, "; "); !strings.Contains(got, c.index) {
			t.Errorf("%s does not use %s: %s", c.query, c.index, got)
		}
	}
}
