package lease

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// FenceHistory is how many recent heartbeats a Fence remembers the sending time of. A word
// whose Beat is older than that makes the fence inactive.
const FenceHistory = 64

// Fence is the agent side of the lease: it says whether this agent is the site's active
// boot server. The zero value is ready to use; it is safe for concurrent use. Its Active
// method is the fence interface every package takes (tftpd.Fence, ipxe.Fence,
// imagecache.Fence), so a *Fence is handed to them as it is.
type Fence struct {
	// Clock's Monotonic reading measures the window; nil: [clock.Real].
	Clock clock.Clock
	// TTL is used for a word that carries none; zero: DefaultTTL.
	TTL time.Duration
	// Margin is taken off the TTL for clock-rate drift (see the package documentation);
	// zero: DefaultMargin. A negative Margin counts as zero.
	Margin time.Duration
	// Rand seeds the heartbeat numbers, which must differ from any earlier run of the
	// agent; nil: crypto/rand.
	Rand io.Reader
	// Logger receives a line when the fence starts or stops holding; nil: discard.
	Logger *slog.Logger
	// Events, if set, receives EventFenceActive when the fence becomes active and
	// EventFenceInactive (with the reason) when it stops, as Observe, Active or State
	// first sees it; a window that ends with nobody asking is reported at the next call.
	// Nil: no event is built.
	Events Sink

	mu      sync.Mutex
	started bool
	clock   clock.Clock
	next    uint64
	sent    [FenceHistory]sentBeat
	n       int // heartbeats sent so far (index of the next slot: n % FenceHistory)
	holds   bool
	epoch   uint64        // highest epoch heard
	holder  string        // the holder the last word at epoch named
	basis   time.Duration // when the heartbeat the renewal answers was sent
	until   time.Duration // basis + TTL - Margin
	heard   time.Duration // when the last word arrived
	words   uint64
	shown   bool // the state last reported to Events: active or not
}

type sentBeat struct {
	id uint64
	at time.Duration
}

// FenceState is the agent's view of the lease.
type FenceState struct {
	// Active is what Active answers now.
	Active bool
	// Holding says the last word said this agent holds the lease (whether or not its window
	// has passed).
	Holding bool
	// Epoch is the highest epoch heard.
	Epoch uint64
	// Holder is the lease's holder as the last word at Epoch named it; "" when it named
	// none (or the control plane does not say).
	Holder string
	// Heard is how long ago the last word arrived; negative when none arrived.
	Heard time.Duration
	// Remaining is how long the fence stays active without another word (0 when inactive).
	Remaining time.Duration
	// Words counts the words observed.
	Words uint64
}

func (f *Fence) init() {
	if f.started {
		return
	}
	f.started = true
	f.clock = f.Clock
	if f.clock == nil {
		f.clock = clock.Real
	}
	var b [8]byte
	r := f.Rand
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b[:]); err != nil {
		_, _ = rand.Read(b[:])
	}
	// Leave room below 2^64 so that numbers never wrap to zero within a run.
	f.next = binary.BigEndian.Uint64(b[:])>>1 | 1
}

// Heartbeat returns the number for a new heartbeat and notes when it was sent. Call it just
// before sending the heartbeat, and send the number with it.
func (f *Fence) Heartbeat() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	id := f.next
	f.next++
	f.sent[f.n%FenceHistory] = sentBeat{id: id, at: f.clock.Monotonic()}
	f.n++
	return id
}

func (f *Fence) sentAt(id uint64) (time.Duration, bool) {
	if id == 0 {
		return 0, false
	}
	k := min(f.n, FenceHistory)
	for i := 0; i < k; i++ {
		if s := f.sent[(f.n-1-i)%FenceHistory]; s.id == id {
			return s.at, true
		}
	}
	return 0, false
}

// Observe records a word from the control plane. A word's TTL counts up to MaxTTL. Words
// may arrive late, twice or out of order: a word of an older epoch than one already heard is ignored, and of two words that
// say this agent holds the lease at one epoch, the one answering the later heartbeat counts.
func (f *Fence) Observe(w Word) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	now := f.clock.Monotonic()
	f.words++
	f.heard = now
	if w.Epoch < f.epoch {
		return
	}
	was := f.holds && now < f.until
	newer := w.Epoch > f.epoch
	f.epoch = w.Epoch
	f.holder = w.Holder
	at, known := f.sentAt(w.Beat)
	switch {
	case !w.Holds || w.Epoch == 0 || !known:
		f.holds = false
		f.until = 0
	case newer || !f.holds || at >= f.basis:
		ttl := w.TTL
		if ttl <= 0 {
			ttl = f.TTL
		}
		if ttl <= 0 {
			ttl = DefaultTTL
		}
		ttl = min(ttl, MaxTTL)
		margin := f.Margin
		if margin == 0 {
			margin = DefaultMargin
		}
		margin = max(margin, 0)
		f.holds = true
		f.basis = at
		f.until = at + ttl - margin
	}
	if f.Events != nil {
		why := WhyLapsed
		switch {
		case !w.Holds || w.Epoch == 0:
			why = WhyNotHolder
		case !known:
			why = WhyBeatUnknown
		}
		f.report(now, why)
	}
	if is := f.holds && now < f.until; is != was && f.Logger != nil {
		if is {
			f.Logger.Info("boot lease fence active", "epoch", f.epoch, "remaining", f.until-now)
		} else {
			f.Logger.Warn("boot lease fence inactive", "epoch", f.epoch, "holds", w.Holds, "beat_known", known)
		}
	}
}

// Active returns the epoch and true while this agent is the active boot server: the last
// word says it holds the lease at a non-zero epoch and the window measured from the
// heartbeat the renewal answers has not passed.
func (f *Fence) Active() (epoch uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	now := f.clock.Monotonic()
	if f.Events != nil {
		f.report(now, WhyLapsed)
	}
	if f.holds && f.epoch != 0 && now < f.until {
		return f.epoch, true
	}
	return 0, false
}

// report hands Events the fence's transition, if its state at now is not the one last
// reported; why is the reason it would be inactive. Called with f.mu held.
func (f *Fence) report(now time.Duration, why string) {
	is := f.holds && f.epoch != 0 && now < f.until
	if is == f.shown {
		return
	}
	f.shown = is
	e := Event{Time: f.clock.Now(), Kind: EventFenceInactive, Epoch: f.epoch, Why: why}
	if is {
		e.Kind, e.Why, e.Remaining = EventFenceActive, "", f.until-now
	}
	f.Events.Emit(e)
}

// State returns the agent's view of the lease.
func (f *Fence) State() FenceState {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	now := f.clock.Monotonic()
	if f.Events != nil {
		f.report(now, WhyLapsed)
	}
	s := FenceState{Holding: f.holds, Epoch: f.epoch, Holder: f.holder, Heard: -1, Words: f.words}
	if f.words > 0 {
		s.Heard = now - f.heard
	}
	if f.holds && f.epoch != 0 && now < f.until {
		s.Active = true
		s.Remaining = f.until - now
	}
	return s
}
