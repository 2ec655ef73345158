// Package eventq is the event queue of siteboot's randomised simulations (the lease's and
// the BMC claims'): events run in the order of their simulated time, and events due at the
// same time in the order they were pushed, so one seed always replays the same run.
package eventq

import (
	"container/heap"
	"time"
)

// Queue holds events by their simulated time. The zero Queue is empty and ready.
type Queue struct {
	seq uint64
	h   events
}

// Push schedules fn at simulated time at.
func (q *Queue) Push(at time.Duration, fn func()) {
	q.seq++
	heap.Push(&q.h, event{at: at, seq: q.seq, fn: fn})
}

// Pop removes the earliest event and returns it; ok is false when the queue is empty.
func (q *Queue) Pop() (at time.Duration, fn func(), ok bool) {
	if len(q.h) == 0 {
		return 0, nil, false
	}
	e := heap.Pop(&q.h).(event)
	return e.at, e.fn, true
}

// Len is the number of events waiting.
func (q *Queue) Len() int { return len(q.h) }

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
