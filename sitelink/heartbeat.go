package sitelink

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Heartbeat is an agent's side of /v1/sync over time: it calls Beat at once, then every
// Every and sooner when [Heartbeat.Wake] is called, until its context ends. It keeps what
// a host reports about the link ([HeartbeatStats]) and logs a broken link once at warning
// level, the failures that follow at debug level, and the link's return at info level.
//
// While the control plane cannot be reached an agent keeps serving from its last desired
// state; the boot lease's fence, measured from the last heartbeat its renewal answered,
// ends the serving on its own. A Heartbeat holds no rule of its own about that.
type Heartbeat struct {
	// Every is the time between two calls of Beat. Required.
	Every time.Duration
	// Beat sends one status report (with [Client.Sync]) and applies the answer; an error
	// means the control plane was not reached or refused the report. Required.
	Beat func(ctx context.Context) error
	// Clock gives the time; nil means [clock.Real].
	Clock clock.Clock
	// Logger receives the link's breaks and returns; nil discards.
	Logger *slog.Logger

	wake wakeup

	mu      sync.Mutex
	last    time.Time
	errors  uint64
	failing uint64
}

// wakeup is a pending request to a loop; requests while one is pending are one. The zero
// value is ready.
type wakeup struct {
	once sync.Once
	ch   chan struct{}
}

func (w *wakeup) c() chan struct{} {
	w.once.Do(func() { w.ch = make(chan struct{}, 1) })
	return w.ch
}

func (w *wakeup) signal() {
	select {
	case w.c() <- struct{}{}:
	default:
	}
}

// HeartbeatStats are a [Heartbeat]'s counters.
type HeartbeatStats struct {
	Last    time.Time // when Beat last succeeded; zero before the first success
	Errors  uint64    // calls of Beat that failed
	Failing uint64    // calls of Beat that failed since the last success
}

// Wake asks for a heartbeat before the next one is due; calls while one is pending are one.
func (h *Heartbeat) Wake() { h.wake.signal() }

// Stats returns the counters.
func (h *Heartbeat) Stats() HeartbeatStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HeartbeatStats{Last: h.last, Errors: h.errors, Failing: h.failing}
}

// Run calls Beat until ctx ends, and then returns nil.
func (h *Heartbeat) Run(ctx context.Context) error {
	clk := clock.Or(h.Clock)
	tick := make(chan struct{}, 1)
	for {
		h.once(ctx, clk)
		t := clk.AfterFunc(h.Every, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-tick:
		case <-h.wake.c():
			t.Stop()
		}
	}
}

func (h *Heartbeat) once(ctx context.Context, clk clock.Clock) {
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	err := h.Beat(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.errors++
		h.failing++
		// Once at warning level when the link breaks; the rest are counted.
		if ctx.Err() == nil {
			level := slog.LevelDebug
			if h.failing == 1 {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "control plane unreachable; serving from the last desired state until the fence ends", "err", err)
		}
		return
	}
	if h.failing > 0 {
		log.Info("control plane reachable again", "failed_heartbeats", h.failing)
		h.failing = 0
	}
	h.last = clk.Now()
}
