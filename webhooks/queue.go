package webhooks

import (
	"container/heap"
	"slices"
	"time"
)

// queue is the dispatcher's picture of the inbox's pending deliveries, one
// FIFO per order key, kept in memory so that picking the next delivery
// costs O(log keys), never a walk of the backlog. It is built from the
// inbox's columns (Inbox.queuedSince) and fed by the inbox's writer as
// deliveries commit; the inbox stays the truth and the queue is rebuilt
// from it at every start. It belongs to the dispatcher's loop goroutine.
//
// The rule it keeps is the one the inbox scan kept: a key's deliveries run
// one at a time, and the next to run is its earliest delivery that is due
// (a delivery waiting out its retry delay does not hold back a later one
// that is due). Keys compete in receipt order of their next delivery.
type queue struct {
	keys   map[string]*keyQueue
	known  map[int64]*entry
	ready  readyHeap
	timers timerHeap
	cached int // bytes of payloads held in memory
}

// maxCached bounds the payloads the queue keeps from the writer's hand-over;
// past it a delivery's payload is read back from the inbox when it runs.
const maxCached = 64 << 20

// dueScan bounds how far into one key's deliveries the queue looks for a
// due one when the earliest are all waiting out retry delays: past it, a
// due delivery waits for the earlier ones (a key with hundreds of retrying
// deliveries at once is a GitHub outage, and they retry in order anyway).
const dueScan = 256

type entry struct {
	Queued
	kq *keyQueue
}

type keyQueue struct {
	key   string
	items []*entry // pending deliveries of the key, by seq
	busy  bool     // one of them is being handled here
	hold  time.Time
	// readySeq is the delivery the ready heap holds for this key (0: none);
	// wakeAt is when the timer heap will look at the key again (zero: never).
	readySeq int64
	wakeAt   time.Time
}

func newQueue() *queue {
	return &queue{keys: map[string]*keyQueue{}, known: map[int64]*entry{}}
}

// add puts a pending delivery in its key's FIFO, unless it is there already.
func (q *queue) add(d Queued, now time.Time) {
	if _, ok := q.known[d.Seq]; ok {
		return
	}
	kq := q.keys[d.Meta.OrderKey]
	if kq == nil {
		kq = &keyQueue{key: d.Meta.OrderKey}
		q.keys[d.Meta.OrderKey] = kq
	}
	if d.payload != nil {
		if q.cached+len(d.payload) > maxCached {
			d.payload = nil
		} else {
			q.cached += len(d.payload)
		}
	}
	e := &entry{Queued: d, kq: kq}
	q.known[d.Seq] = e
	if n := len(kq.items); n == 0 || kq.items[n-1].Seq < d.Seq {
		kq.items = append(kq.items, e)
	} else {
		i, _ := slices.BinarySearchFunc(kq.items, d.Seq, func(x *entry, s int64) int { return cmpInt64(x.Seq, s) })
		kq.items = slices.Insert(kq.items, i, e)
	}
	q.consider(kq, now)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// consider puts the key's next startable delivery in the ready heap, or
// sets a timer for when it may have one.
func (q *queue) consider(kq *keyQueue, now time.Time) {
	if kq.busy {
		return
	}
	if kq.hold.After(now) {
		q.wake(kq, kq.hold)
		return
	}
	var soonest time.Time
	for i, e := range kq.items {
		if i == dueScan {
			break
		}
		if !e.Due.After(now) {
			if kq.readySeq != e.Seq {
				kq.readySeq = e.Seq
				heap.Push(&q.ready, readyItem{seq: e.Seq, kq: kq})
			}
			return
		}
		if soonest.IsZero() || e.Due.Before(soonest) {
			soonest = e.Due
		}
	}
	if !soonest.IsZero() {
		q.wake(kq, soonest)
	}
}

func (q *queue) wake(kq *keyQueue, at time.Time) {
	if !kq.wakeAt.IsZero() && !kq.wakeAt.After(at) {
		return // an earlier look is set already
	}
	kq.wakeAt = at
	heap.Push(&q.timers, timerItem{at: at, kq: kq})
}

// tick looks again at the keys whose timers are due.
func (q *queue) tick(now time.Time) {
	for len(q.timers) > 0 && !q.timers[0].at.After(now) {
		t := heap.Pop(&q.timers).(timerItem)
		if t.kq.wakeAt.Equal(t.at) {
			t.kq.wakeAt = time.Time{}
		}
		q.consider(t.kq, now)
		q.gc(t.kq)
	}
}

// next returns when the queue's next timer is due (zero: none).
func (q *queue) next() time.Time {
	if len(q.timers) == 0 {
		return time.Time{}
	}
	return q.timers[0].at
}

// pop takes the startable delivery received first, marking its key busy,
// or returns nil.
func (q *queue) pop(now time.Time) *entry {
	for len(q.ready) > 0 {
		r := heap.Pop(&q.ready).(readyItem)
		kq := r.kq
		if kq.readySeq != r.seq {
			continue // superseded
		}
		kq.readySeq = 0
		if kq.busy || kq.hold.After(now) {
			continue
		}
		e := q.known[r.seq]
		if e == nil || e.Due.After(now) {
			q.consider(kq, now)
			continue
		}
		kq.busy = true
		return e
	}
	return nil
}

// putBack returns a popped delivery that was not started.
func (q *queue) putBack(e *entry, now time.Time) {
	e.kq.busy = false
	q.consider(e.kq, now)
}

// finished ends a delivery's run: its key is free again, and the delivery
// leaves the queue (done, dead, or gone) or waits until due.
func (q *queue) finished(e *entry, gone bool, due time.Time, now time.Time) {
	kq := e.kq
	kq.busy = false
	if gone {
		q.remove(e)
	} else {
		e.Due = due
	}
	q.consider(kq, now)
}

// holdKey leaves a key alone until the time given (another replica holds it).
func (q *queue) holdKey(kq *keyQueue, until time.Time) {
	kq.hold = until
}

func (q *queue) remove(e *entry) {
	kq := e.kq
	delete(q.known, e.Seq)
	q.cached -= len(e.payload)
	e.payload = nil
	if i := slices.Index(kq.items, e); i >= 0 {
		if i == 0 {
			kq.items[0] = nil
			kq.items = kq.items[1:]
		} else {
			kq.items = slices.Delete(kq.items, i, i+1)
		}
	}
	q.gc(kq)
}

// gc forgets a key with nothing pending, busy or scheduled.
func (q *queue) gc(kq *keyQueue) {
	if len(kq.items) == 0 && !kq.busy && kq.readySeq == 0 && kq.wakeAt.IsZero() && q.keys[kq.key] == kq {
		delete(q.keys, kq.key)
	}
}

// len is how many pending deliveries the queue holds.
func (q *queue) len() int { return len(q.known) }

type readyItem struct {
	seq int64
	kq  *keyQueue
}

type readyHeap []readyItem

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].seq < h[j].seq }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(readyItem)) }
func (h *readyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type timerItem struct {
	at time.Time
	kq *keyQueue
}

type timerHeap []timerItem

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerItem)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
