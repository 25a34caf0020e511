package webhooks

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestQueueOrder holds the queue to the inbox scan's rule: one delivery
// per key at a time, a key's earliest due delivery next, keys in receipt
// order of their next delivery, a delivery waiting out a retry never
// holding back a later one that is due, and a held key left alone.
func TestQueueOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	type add struct {
		seq int64
		key string
		due time.Duration // after t0
	}
	tests := []struct {
		name string
		adds []add
		hold string // a key held until t0+1m
		at   time.Duration
		want string // the seqs popped, in order, without finishing any
	}{
		{"one key: only its first", []add{{1, "a", 0}, {2, "a", 0}, {3, "a", 0}}, "", 0, "1"},
		{"keys in receipt order", []add{{3, "c", 0}, {1, "a", 0}, {2, "b", 0}}, "", 0, "1,2,3"},
		{"a key's first runs even when a later key came first",
			[]add{{5, "b", 0}, {2, "a", 0}, {1, "b", 0}}, "", 0, "1,2"},
		{"a retrying delivery does not hold back a due one", []add{{1, "a", time.Minute}, {2, "a", 0}}, "", 0, "2"},
		{"nothing due", []add{{1, "a", time.Minute}, {2, "b", time.Hour}}, "", 0, ""},
		{"due later", []add{{1, "a", time.Minute}, {2, "b", time.Hour}}, "", 2 * time.Minute, "1"},
		{"a held key is passed over", []add{{1, "a", 0}, {2, "b", 0}}, "a", 0, "2"},
		{"a hold ends", []add{{1, "a", 0}, {2, "b", 0}}, "a", 2 * time.Minute, "1,2"},
		{"out-of-order adds keep seq order in a key", []add{{9, "a", 0}, {4, "a", 0}, {7, "a", 0}}, "", 0, "4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue()
			if tc.hold != "" {
				q.add(Queued{Seq: 100, Meta: Meta{OrderKey: tc.hold}, Due: t0.Add(time.Hour)}, t0)
				q.holdKey(q.keys[tc.hold], t0.Add(time.Minute))
			}
			for _, a := range tc.adds {
				q.add(Queued{Seq: a.seq, Meta: Meta{OrderKey: a.key}, Due: t0.Add(a.due)}, t0)
			}
			now := t0.Add(tc.at)
			q.tick(now)
			var got []string
			for e := q.pop(now); e != nil; e = q.pop(now) {
				got = append(got, fmt.Sprint(e.Seq))
			}
			if g := strings.Join(got, ","); g != tc.want {
				t.Fatalf("popped %q, want %q", g, tc.want)
			}
		})
	}
}

// TestQueueFinish: finishing a delivery frees its key for the next; a
// failed try waits until due; a delivery added twice is queued once.
func TestQueueFinish(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	q := newQueue()
	for seq := int64(1); seq <= 3; seq++ {
		q.add(Queued{Seq: seq, Meta: Meta{OrderKey: "a"}, Due: t0}, t0)
	}
	q.add(Queued{Seq: 2, Meta: Meta{OrderKey: "a"}, Due: t0}, t0) // again: ignored
	e := q.pop(t0)
	if e == nil || e.Seq != 1 || q.pop(t0) != nil {
		t.Fatalf("first pop %v; the key must be busy after it", e)
	}
	q.finished(e, true, time.Time{}, t0)
	e = q.pop(t0)
	if e == nil || e.Seq != 2 {
		t.Fatalf("after 1 finished, popped %v, want 2", e)
	}
	// 2 fails and retries in a minute: 3 runs first.
	q.finished(e, false, t0.Add(time.Minute), t0)
	if e = q.pop(t0); e == nil || e.Seq != 3 {
		t.Fatalf("with 2 waiting, popped %v, want 3", e)
	}
	q.finished(e, true, time.Time{}, t0)
	if e = q.pop(t0); e != nil {
		t.Fatalf("popped %d before 2 was due", e.Seq)
	}
	if next := q.next(); !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next timer %s, want %s", next, t0.Add(time.Minute))
	}
	later := t0.Add(time.Minute)
	q.tick(later)
	if e = q.pop(later); e == nil || e.Seq != 2 {
		t.Fatalf("when due, popped %v, want 2", e)
	}
	q.finished(e, true, time.Time{}, later)
	if q.len() != 0 || len(q.keys) != 0 {
		t.Fatalf("empty queue holds %d deliveries and %d keys", q.len(), len(q.keys))
	}
}
