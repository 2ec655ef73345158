package bmc

import (
	"context"
	"slices"
	"sync"
)

// DefaultMaxHeld bounds a Dispatcher's commands, running and finished, when MaxHeld is
// zero.
const DefaultMaxHeld = 256

// Tally is what a finished command counts as in DispatchStats.
type Tally struct {
	Kind     Kind
	Status   Status
	Replayed bool
}

// Report is a finished command's result as a host reports it to its control plane
// (sitelink.BMCResult is one). This package does not know the host's message; it asks
// the result for its command id and for what it counts as.
type Report interface {
	// CommandID is the id of the command the result answers.
	CommandID() string
	// Tally is what the result counts as.
	Tally() Tally
}

// Dispatcher runs an agent's BMC commands off its loop, so that a BMC that hangs never
// holds a heartbeat, and keeps each result until the host says a report carrying it was
// answered. A command id is never run twice while it runs or while its result waits to be
// delivered; the control plane sends a command again until its result arrives, so a
// repeat is ignored, not refused. What runs a command is the host's function (typically
// sitelink.BMCOp, Executor.RunOp and sitelink.BMCResultOf); the Executor keeps its own
// rules (one operation per BMC, at most once, deadlines).
//
// Set the fields before first use; a Dispatcher is safe for concurrent use. Close (or
// Shutdown) waits for every command it started.
type Dispatcher[R Report] struct {
	// MaxHeld bounds the commands held: running, and finished but not yet delivered. Start
	// does not start a command over it (counted in DispatchStats.Deferred): the control
	// plane sends it again and it starts once results are delivered. Size it so a report
	// carrying every held result stays within the link's bound. Zero means
	// DefaultMaxHeld.
	MaxHeld int
	// OnDone, when set, is called after each command ends and its result is kept, so the
	// host can send a report sooner. It must not block.
	OnDone func(id string)

	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	running map[string]context.CancelFunc
	held    []R // finished, in the order they ended
	stats   DispatchStats
}

// Start runs run under id in a goroutine of its own and reports whether it started it. It
// does not when id is running or its result is held, when the Dispatcher holds MaxHeld
// commands, when ctx is done, or after Close or Shutdown began. run's context ends with
// ctx or at Close. A result of StatusNotSent from a run whose context ended is dropped,
// not held: the command never reached its BMC and runs when it is sent again.
func (d *Dispatcher[R]) Start(ctx context.Context, id string, run func(ctx context.Context) R) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running[id] != nil || slices.ContainsFunc(d.held, func(r R) bool { return r.CommandID() == id }) {
		return false
	}
	if d.closed || ctx.Err() != nil {
		return false
	}
	limit := d.MaxHeld
	if limit <= 0 {
		limit = DefaultMaxHeld
	}
	if len(d.running)+len(d.held) >= limit {
		d.stats.Deferred++
		return false
	}
	if d.running == nil {
		d.running = make(map[string]context.CancelFunc)
	}
	rctx, cancel := context.WithCancel(ctx)
	d.running[id] = cancel
	d.wg.Go(func() {
		defer cancel()
		r := run(rctx)
		t := r.Tally()
		d.mu.Lock()
		d.stats.count(t)
		delete(d.running, id)
		if rctx.Err() == nil || t.Status != StatusNotSent {
			d.held = append(d.held, r)
		}
		d.mu.Unlock()
		if d.OnDone != nil {
			d.OnDone(id)
		}
	})
	return true
}

// Pending returns the held results, in the order their commands ended: what the host's
// next report carries.
func (d *Dispatcher[R]) Pending() []R {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.held)
}

// Delivered drops the held results of the commands sent names (the results of a report
// the control plane answered); a result that ended after the report was made stays.
func (d *Dispatcher[R]) Delivered(sent []R) {
	if len(sent) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = slices.DeleteFunc(d.held, func(r R) bool {
		return slices.ContainsFunc(sent, func(s R) bool { return s.CommandID() == r.CommandID() })
	})
}

// Running returns the number of commands running: waiting for their BMC or a slot,
// claiming, or sent.
func (d *Dispatcher[R]) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.running)
}

// OnClaim counts a claim's answer; assign it to Executor.OnClaim.
func (d *Dispatcher[R]) OnClaim(_ ClaimRequest, a ClaimAnswer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch a {
	case ClaimAnswerGranted:
		d.stats.ClaimsGranted++
	case ClaimAnswerRefused:
		d.stats.ClaimsRefused++
	case ClaimAnswerReused:
		d.stats.ClaimsReused++
	case ClaimAnswerUnanswered:
		d.stats.ClaimsUnanswered++
	}
}

// Stats returns a copy of the counters.
func (d *Dispatcher[R]) Stats() DispatchStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Running, s.Held = uint64(len(d.running)), uint64(len(d.held))
	return s
}

// Shutdown starts nothing more and waits for the running commands to end. If ctx ends
// first, it ends their contexts, waits for them and returns ctx's error. Held results
// stay readable with Pending.
func (d *Dispatcher[R]) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		d.cancel()
		<-done
		return ctx.Err()
	}
}

// Close starts nothing more, ends the running commands' contexts and waits for them to
// end. It returns nil.
func (d *Dispatcher[R]) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	return nil
}

func (d *Dispatcher[R]) cancel() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cancel := range d.running {
		cancel()
	}
}

// KindStats counts the commands of one kind that ended, by status.
type KindStats struct {
	OK, Differs, Failed, Unknown, NotSent uint64
	// Other counts a status none of the above names.
	Other uint64
	// Replayed counts those answered from the journal or a claim record, nothing sent
	// (counted under their status too).
	Replayed uint64
}

// Status returns the count of status s (Other for a status outside the Status
// constants).
func (k KindStats) Status(s Status) uint64 {
	switch s {
	case StatusOK:
		return k.OK
	case StatusDiffers:
		return k.Differs
	case StatusFailed:
		return k.Failed
	case StatusUnknown:
		return k.Unknown
	case StatusNotSent:
		return k.NotSent
	}
	return k.Other
}

// Statuses lists every status, in the order KindStats holds them.
var Statuses = []Status{StatusOK, StatusDiffers, StatusFailed, StatusUnknown, StatusNotSent}

// DispatchStats are a Dispatcher's counters (and two gauges). A host exports them by
// walking Kinds and Statuses: ForKind(k).Status(s).
type DispatchStats struct {
	// The commands that ended, by kind.
	Query, Storage, Power, Boot, Rotate, Firmware, MediaInsert, MediaEject KindStats
	// OtherKind counts results of a kind outside Kinds.
	OtherKind KindStats
	// Claims through Executor.OnClaim, by answer.
	ClaimsGranted, ClaimsRefused, ClaimsReused, ClaimsUnanswered uint64
	// Deferred counts the commands Start did not start because MaxHeld were held.
	Deferred uint64
	// Running and Held are gauges: commands running, results waiting to be delivered.
	Running, Held uint64
}

// ForKind returns the counts of kind k (OtherKind for a kind outside Kinds).
func (s DispatchStats) ForKind(k Kind) KindStats { return *s.kind(k) }

// Claims returns the count of claims answered a.
func (s DispatchStats) Claims(a ClaimAnswer) uint64 {
	switch a {
	case ClaimAnswerGranted:
		return s.ClaimsGranted
	case ClaimAnswerRefused:
		return s.ClaimsRefused
	case ClaimAnswerReused:
		return s.ClaimsReused
	case ClaimAnswerUnanswered:
		return s.ClaimsUnanswered
	}
	return 0
}

func (s *DispatchStats) kind(k Kind) *KindStats {
	switch k {
	case KindQuery:
		return &s.Query
	case KindStorage:
		return &s.Storage
	case KindPower:
		return &s.Power
	case KindBoot:
		return &s.Boot
	case KindRotate:
		return &s.Rotate
	case KindFirmware:
		return &s.Firmware
	case KindMediaInsert:
		return &s.MediaInsert
	case KindMediaEject:
		return &s.MediaEject
	}
	return &s.OtherKind
}

func (s *DispatchStats) count(t Tally) {
	k := s.kind(t.Kind)
	switch t.Status {
	case StatusOK:
		k.OK++
	case StatusDiffers:
		k.Differs++
	case StatusFailed:
		k.Failed++
	case StatusUnknown:
		k.Unknown++
	case StatusNotSent:
		k.NotSent++
	default:
		k.Other++
	}
	if t.Replayed {
		k.Replayed++
	}
}
