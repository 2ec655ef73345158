package imagecache

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Priority orders pulls waiting for a slot, and the re-verification of cached images after
// Open: higher first, then first come first served.
type Priority int

// Priorities. The zero value means "by role": PriorityPinned for an image named in
// SetPinned, PriorityRest otherwise; an image listed in Config.BootImages is always
// PriorityBoot.
const (
	PriorityDefault Priority = 0
	PriorityRest    Priority = 1 // images pulled only by Pull
	PriorityPinned  Priority = 2 // the images the host named in SetPinned
	PriorityBoot    Priority = 3 // the site's ramdisk kernel and initrd
)

func (p Priority) String() string {
	switch p {
	case PriorityDefault:
		return "default"
	case PriorityRest:
		return "rest"
	case PriorityPinned:
		return "pinned"
	case PriorityBoot:
		return "boot"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// scheduler hands out the pull slots. A waiter of higher priority than a running pull
// takes that pull's slot (the running attempt ends with errPreempted and resumes later by
// Range); equal priorities wait their turn, first come first served. A pull holds a slot for
// one attempt at a time: between attempts (back-off, a too-slow source) others go first,
// and an attempt that held its slot for a rate window while a pull of at least its
// priority waits gives the slot up (when its source can resume), so equal priorities share
// the slots round robin.
type scheduler struct {
	mu        sync.Mutex
	free      int
	seq       uint64
	waiting   []*ticket
	running   map[*ticket]struct{}
	onPreempt func()
}

type ticket struct {
	prio      Priority
	seq       uint64
	ctx       context.Context
	cancel    context.CancelCauseFunc
	ready     chan struct{}
	granted   bool
	preempted bool
}

func newScheduler(slots int, onPreempt func()) *scheduler {
	return &scheduler{free: slots, running: map[*ticket]struct{}{}, onPreempt: onPreempt}
}

// nextSeq returns a place at the back of the queue.
func (s *scheduler) nextSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

// acquire waits for a slot for a pull of priority prio holding place seq. The context
// returned ends when ctx does, or when the slot is taken back for a higher priority; others
// reports whether a pull of at least the holder's priority waits for a slot.
func (s *scheduler) acquire(ctx context.Context, prio Priority, seq uint64) (context.Context, func(), func() bool, error) {
	tctx, cancel := context.WithCancelCause(ctx)
	tk := &ticket{prio: prio, seq: seq, ctx: tctx, cancel: cancel, ready: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, tk)
	s.dispatchLocked()
	s.mu.Unlock()
	select {
	case <-tk.ready:
		return tctx, func() { s.release(tk) }, func() bool { return s.othersWaiting(tk) }, nil
	case <-ctx.Done():
		s.mu.Lock()
		if tk.granted {
			s.releaseLocked(tk)
		} else {
			s.waiting = slices.DeleteFunc(s.waiting, func(w *ticket) bool { return w == tk })
		}
		s.dispatchLocked()
		s.mu.Unlock()
		cancel(nil)
		return nil, nil, nil, context.Cause(ctx)
	}
}

// othersWaiting reports whether a pull of at least tk's priority waits for a slot.
func (s *scheduler) othersWaiting(tk *ticket) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waiting {
		if w.prio >= tk.prio {
			return true
		}
	}
	return false
}

func (s *scheduler) release(tk *ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(tk)
	s.dispatchLocked()
}

func (s *scheduler) releaseLocked(tk *ticket) {
	if _, ok := s.running[tk]; !ok {
		return
	}
	delete(s.running, tk)
	s.free++
	tk.cancel(nil)
}

// setPriority raises or lowers the priority of a waiter or running pull holding seq.
func (s *scheduler) setPriority(seq uint64, prio Priority) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waiting {
		if w.seq == seq {
			w.prio = prio
		}
	}
	for r := range s.running {
		if r.seq == seq {
			r.prio = prio
		}
	}
	s.dispatchLocked()
}

func (s *scheduler) dispatchLocked() {
	slices.SortFunc(s.waiting, func(a, b *ticket) int {
		if a.prio != b.prio {
			return int(b.prio) - int(a.prio)
		}
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	for s.free > 0 && len(s.waiting) > 0 {
		tk := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.free--
		tk.granted = true
		s.running[tk] = struct{}{}
		close(tk.ready)
	}
	// Each waiter left may take the slot of a running pull of lower priority; slots already
	// being given back count for the first waiters.
	pending := 0
	for r := range s.running {
		if r.preempted {
			pending++
		}
	}
	for i, w := range s.waiting {
		if i < pending {
			continue
		}
		var victim *ticket
		for r := range s.running {
			if r.preempted || r.prio >= w.prio {
				continue
			}
			if victim == nil || r.prio < victim.prio || (r.prio == victim.prio && r.seq > victim.seq) {
				victim = r
			}
		}
		if victim == nil {
			break
		}
		victim.preempted = true
		victim.cancel(errPreempted)
		pending++
		if s.onPreempt != nil {
			s.onPreempt()
		}
	}
}
