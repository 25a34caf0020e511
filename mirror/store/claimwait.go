package store

import (
	"context"
	"time"

	"github.com/wardenhq/warden/gating"
)

// A claim that may wait (maxWaitSeconds > 0) joins a FIFO queue of this
// process's claimants for the item. Only the head of the queue tries; it
// tries again when the holder releases (woken at once), when the holder's
// lease is due, and at least every pollInterval (which also catches a
// release by another replica, or a clock moved by a test). When the head
// is granted, times out or gives up, the next in line becomes head. A claim
// that does not wait is refused "contended" while anyone is queued: a
// release is handed to the waiters first.

// pollInterval bounds how long the head of a wait queue sleeps between
// attempts.
const pollInterval = 100 * time.Millisecond

type waiter struct{ ch chan struct{} }

func (l *Ledger) enqueue(k itemKey) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	l.mu.Lock()
	l.queues[k] = append(l.queues[k], w)
	l.mu.Unlock()
	return w
}

// dequeue removes w; when w was the head, the next waiter becomes head and
// is woken to try.
func (l *Ledger) dequeue(k itemKey, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[k]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			if len(q) == 0 {
				delete(l.queues, k)
			} else {
				l.queues[k] = q
				if i == 0 {
					signal(q[0])
				}
			}
			return
		}
	}
}

func (l *Ledger) isHead(k itemKey, w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[k]
	return len(q) > 0 && q[0] == w
}

func (l *Ledger) queued(k itemKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queues[k])
}

// wake tells the head waiter of an item to try now (after a release or a
// forget).
func (l *Ledger) wake(k itemKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[k]; len(q) > 0 {
		signal(q[0])
	}
}

func signal(w *waiter) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// claimWaiting queues for the item for up to wait (real time); rk is the
// request's requestId record, if any (each try consults it).
func (l *Ledger) claimWaiting(ctx context.Context, repoID int64, n int, req ClaimRequest, lease, wait time.Duration, rk *keyed) (ClaimResult, error) {
	k := itemKey{repoID, n}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	w := l.enqueue(k)
	defer l.dequeue(k, w)
	timeout := notGranted(gating.IDFor(n), ReasonTimeout)
	for {
		if !l.isHead(k, w) {
			select {
			case <-w.ch:
				continue
			case <-deadline.C:
				return timeout, nil
			case <-ctx.Done():
				return ClaimResult{}, ctx.Err()
			}
		}
		a, err := l.claimOnce(ctx, repoID, n, req, lease, true, rk)
		if err != nil || !a.contended {
			return a.res, err
		}
		pause := pollInterval
		if a.holderExp > 0 {
			if left := time.Duration(a.holderExp-l.nowMs()) * time.Millisecond; left < pause {
				pause = max(left, time.Millisecond)
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-w.ch:
		case <-t.C:
		case <-deadline.C:
			t.Stop()
			return timeout, nil
		case <-ctx.Done():
			t.Stop()
			return ClaimResult{}, ctx.Err()
		}
		t.Stop()
	}
}
