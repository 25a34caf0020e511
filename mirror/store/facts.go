package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/wardenhq/warden/gating"
)

// The per-item facts a snapshot reads beside the item rows: the recorded
// admissions, the issues' labels and the epochs; for a claim's judgement
// (judging) in one query with the items' true summaries.

// factsSelect is what a judgement reads of each item beside its row, in one
// query: whether an admission is recorded, the labels, the epoch,
// and the summary when it is true (summarySelect's conditions).
var factsSelect = `SELECT i.number, CASE WHEN a.number IS NULL THEN 0 ELSE 1 END, st.labels,
	COALESCE(e.epoch_start, 0), COALESCE(e.resolved_at, 0), sm.state
	FROM ledger_items i
	LEFT JOIN admissions a ON a.repo_id = i.repo_id AND a.number = i.number
	LEFT JOIN issue_state st ON st.repo_id = i.repo_id AND st.number = i.number
	LEFT JOIN item_epochs e ON e.repo_id = i.repo_id AND e.number = i.number
	LEFT JOIN ledger_summaries sm ON sm.repo_id = i.repo_id AND sm.number = i.number AND sm.fence = i.fence
		AND sm.version = ` + strconv.Itoa(gating.TrailSummaryVersion) + ` AND sm.summary_gen = sm.gen
	WHERE i.repo_id = $1`

// itemFacts are the per-item reads loadSnapshot makes beside the rows: the
// recorded admissions, whether the issue carries the admission label,
// whether it lacks the item label (both only for issues warden has labels
// for), and the epochs.
type itemFacts struct {
	admitted, gated, unlabeled map[int]bool
	epochs                     map[int]Epoch
}

func newItemFacts() itemFacts {
	return itemFacts{admitted: map[int]bool{}, gated: map[int]bool{}, unlabeled: map[int]bool{}, epochs: map[int]Epoch{}}
}

// labels records issue n's labels as read.
func (f itemFacts) labels(n int, labels string, set gating.Settings) error {
	ls, err := decodeLabels(labels)
	if err != nil {
		return fmt.Errorf("#%d: %w", n, err)
	}
	f.gated[n] = HasLabel(ls, set.AdmissionLabel)
	f.unlabeled[n] = !HasLabel(ls, set.ItemLabel)
	return nil
}

// epoch records item n's epoch columns (unix ms, 0: none).
func (f itemFacts) epoch(n int, start, resolved int64) {
	f.epochs[n] = Epoch{Start: epochTime(start), ResolvedAt: epochTime(resolved)}
}

// readFacts reads the facts of the items numbered nums, and their true
// summaries into j.sums, in one query per chunk.
func (j *judging) readFacts(ctx context.Context, q Querier, repoID int64, nums []int, set gating.Settings, f itemFacts) error {
	j.sums = map[int]gating.TrailSummary{}
	return eachChunk(ctx, q, repoID, nums, factsSelect, "i.number", func(rows *sql.Rows) error {
		var n, admitted int
		var labels, state sql.NullString
		var start, resolved int64
		if err := rows.Scan(&n, &admitted, &labels, &start, &resolved, &state); err != nil {
			return err
		}
		f.admitted[n] = admitted != 0
		if labels.Valid {
			if err := f.labels(n, labels.String, set); err != nil {
				return err
			}
		}
		// A row for every item: an epoch row of zeros reads as none.
		if start > 0 || resolved > 0 {
			f.epoch(n, start, resolved)
		}
		if state.Valid {
			if s, ok := decodeSummary(state.String, start, resolved); ok {
				j.sums[n] = s
			}
		}
		return nil
	})
}

// readFacts reads the admissions, issue labels and epochs of the items
// numbered nums (nil: the repository's) into f.
func (l *Ledger) readFacts(ctx context.Context, q Querier, repo Repo, nums []int, set gating.Settings, f itemFacts) error {
	err := eachChunk(ctx, q, repo.ID, nums, `SELECT number FROM admissions WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		if err := rows.Scan(&n); err != nil {
			return err
		}
		f.admitted[n] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("snapshot of %s: admissions: %w", repo.FullName, err)
	}
	err = eachChunk(ctx, q, repo.ID, nums, `SELECT number, labels FROM issue_state WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var labels string
		if err := rows.Scan(&n, &labels); err != nil {
			return err
		}
		return f.labels(n, labels, set)
	})
	if err != nil {
		return fmt.Errorf("snapshot of %s: issue labels: %w", repo.FullName, err)
	}
	err = eachChunk(ctx, q, repo.ID, nums, `SELECT number, epoch_start, resolved_at FROM item_epochs WHERE repo_id = $1`, "number", func(rows *sql.Rows) error {
		var n int
		var start, resolved int64
		if err := rows.Scan(&n, &start, &resolved); err != nil {
			return err
		}
		f.epoch(n, start, resolved)
		return nil
	})
	if err != nil {
		return fmt.Errorf("snapshot of %s: epochs: %w", repo.FullName, err)
	}
	return nil
}
