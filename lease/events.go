package lease

import (
	"strconv"
	"time"
)

// EventKind says what an [Event] reports.
type EventKind uint8

// The kinds of events. A Fence reports its own transitions; a Controller reports what it
// did to a site's lease.
const (
	_ EventKind = iota
	// EventFenceActive: the agent's fence became active (this agent is the site's boot
	// server at Epoch, for Remaining more without another word).
	EventFenceActive
	// EventFenceInactive: the fence stopped being active; Why says why.
	EventFenceInactive
	// EventChanged: a controller stored a change of holder or a release (Change is
	// Acquired, Promoted or Released; Holder and Prev are the holders after and before).
	EventChanged
	// EventDeferred: the record's expiry allowed a takeover but the controller has not yet
	// watched the record for a full TTL on its own clock; the lease is kept.
	EventDeferred
	// EventConflict: the controller's write lost to another writer (Err).
	EventConflict
	// EventError: the store or the fleet failed a tick (Err).
	EventError
	numEventKinds
)

var eventKindNames = [numEventKinds]string{"", "fence-active", "fence-inactive", "changed", "deferred", "conflict", "error"}

// String returns the kind's name: "fence-active", "fence-inactive", "changed", "deferred",
// "conflict" or "error".
func (k EventKind) String() string {
	if k < numEventKinds && k != 0 {
		return eventKindNames[k]
	}
	return "event-" + strconv.Itoa(int(k))
}

// Why a fence stopped being active (Event.Why of EventFenceInactive).
const (
	WhyNotHolder   = "not-holder"   // a word said another agent holds the lease, or nobody does
	WhyBeatUnknown = "beat-unknown" // the word answers a heartbeat this fence does not remember
	WhyLapsed      = "lapsed"       // no renewal came before the window measured from the heartbeat ended
)

// Event is one thing a Fence or a Controller decided or saw. Fields a kind does not use are
// zero.
type Event struct {
	// Time is the wall-clock time of the Fence's or Controller's clock.
	Time time.Time
	Kind EventKind
	// Site is the site of a Controller's event; "" for a Fence's.
	Site string
	// Epoch is the lease's epoch: the fence's (the highest heard), or the record's after
	// the change.
	Epoch uint64
	// Change is what the tick did (EventChanged, EventDeferred: Kept).
	Change Change
	// Holder and Prev are the lease's holders after and before an EventChanged ("" for
	// none).
	Holder, Prev string
	// Remaining is how long an active fence stays active without another word.
	Remaining time.Duration
	// Why is one of the Why constants, for EventFenceInactive.
	Why string
	// Err is the store's or the fleet's error (EventConflict, EventError).
	Err error
}

// Sink receives a Fence's or a Controller's events. Emit is called with the component's
// lock held, on the path of the caller (Fence.Active sits on the path of every request):
// it must return quickly, must not block, and must not call back into the Fence or the
// Controller.
type Sink interface {
	Emit(e Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(e Event)

// Emit calls f(e).
func (f SinkFunc) Emit(e Event) { f(e) }
