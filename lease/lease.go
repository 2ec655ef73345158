package lease

import (
	"fmt"
	"time"
)

// Defaults used when a field is zero.
const (
	// DefaultTTL is the lease's time to live.
	DefaultTTL = 15 * time.Second
	// DefaultInterval is how often the controller ticks every site.
	DefaultInterval = 5 * time.Second
	// DefaultMargin is what the fence takes off the TTL for clock-rate drift.
	DefaultMargin = time.Second
	// DefaultParallel is how many sites a controller ticks at once.
	DefaultParallel = 8
)

// Name returns the lease's name for a site: site:SITE:boot.
func Name(site string) string { return "site:" + site + ":boot" }

// Record is a site's lease as a Store keeps it.
type Record struct {
	// Site is the site's id.
	Site string
	// Holder is the node id of the agent holding the lease; empty when no agent holds it
	// (never held, or released).
	Holder string
	// Epoch is the fencing epoch: 0 for a lease never held, then one more on every change of
	// holder and on every release.
	Epoch uint64
	// Expires is when the lease lapses unless renewed, on the wall clock of the controller
	// that last wrote it; zero when no agent holds it.
	Expires time.Time
	// TTL is the lease's time to live, the one the holder's fence uses.
	TTL time.Duration
	// Beat is the holder's heartbeat that the latest renewal answers (see [Agent.Beat]); the
	// holder's fence measures its window from when it sent that heartbeat.
	Beat uint64
}

// Held reports whether an agent holds the lease and it has not lapsed at now.
func (r Record) Held(now time.Time) bool {
	return r.Holder != "" && now.Before(r.Expires)
}

// String returns a short human-readable form for logs.
func (r Record) String() string {
	if r.Holder == "" {
		return fmt.Sprintf("%s free epoch=%d", Name(r.Site), r.Epoch)
	}
	return fmt.Sprintf("%s holder=%s epoch=%d expires=%s", Name(r.Site), r.Holder, r.Epoch,
		r.Expires.UTC().Format(time.RFC3339Nano))
}

// WordFor returns what the control plane tells agent node about the lease: whether it holds
// it, at which epoch, with which TTL, and the heartbeat the renewal answers. It does not look
// at the clock: a word about a lapsed, not yet promoted lease still says holds, and the
// agent's fence, measured from the heartbeat, has ended by then.
func (r Record) WordFor(node string) Word {
	w := Word{Epoch: r.Epoch, TTL: r.TTL, Holder: r.Holder}
	if node != "" && r.Holder == node {
		w.Holds = true
		w.Beat = r.Beat
	}
	return w
}

// Agent is a site agent with a live session to the control plane, as a [Fleet] reports it.
type Agent struct {
	// Node is the agent's node id.
	Node string
	// Site is the site the agent serves.
	Site string
	// Beat is the latest heartbeat number received from the agent over its session (from
	// [Fence.Heartbeat]). It must be one the agent really sent: the holder's fence trusts the
	// lease from the moment it sent this heartbeat. Zero when the agent sent none, which
	// leaves a holder's fence inactive.
	Beat uint64
}

// Word is the control plane's word to one agent about its site's lease (the seed's
// BootLeaseState), built by [Record.WordFor] and fed to [Fence.Observe].
type Word struct {
	// Holds says the agent is the lease's holder.
	Holds bool
	// Epoch is the lease's current epoch.
	Epoch uint64
	// TTL is the lease's TTL; zero means [DefaultTTL] (or the Fence's TTL).
	TTL time.Duration
	// Beat is the agent's heartbeat that the lease's latest renewal answers, when Holds.
	Beat uint64
	// Holder is the node id of the agent holding the lease ("" when none holds it): what
	// an agent that does not hold it tells its operator about who does.
	Holder string
}

// Change says what a tick did to a lease.
type Change uint8

// The outcomes of a tick.
const (
	// Idle: no holder and no connected agent; nothing written.
	Idle Change = iota
	// Acquired: a free lease taken by the first connected agent, under epoch+1.
	Acquired
	// Renewed: the holder is connected; the expiry moves on, the epoch stays.
	Renewed
	// Kept: the holder lost its session but the lease has not lapsed; nothing written.
	Kept
	// Promoted: the holder's lease lapsed; the first connected standby holds it under epoch+1.
	Promoted
	// Released: the holder's lease lapsed and no agent is connected; no holder, epoch+1.
	Released
)

var changeNames = [...]string{"idle", "acquired", "renewed", "kept", "promoted", "released"}

func (c Change) String() string {
	if int(c) < len(changeNames) {
		return changeNames[c]
	}
	return fmt.Sprintf("change(%d)", uint8(c))
}

// Writes reports whether the change writes a new record.
func (c Change) Writes() bool {
	return c == Acquired || c == Renewed || c == Promoted || c == Released
}

// Decision is the outcome of one tick of one site's lease.
type Decision struct {
	Change Change
	// Prev is the record the tick read, Next the one it wrote (equal to Prev when the
	// change writes nothing).
	Prev, Next Record
}

// Tick decides one site's lease at now, given the agents connected to the control plane
// (agents of other sites are ignored) and the TTL for a renewal (zero: [DefaultTTL]). It is
// pure: the same inputs give the same decision, whatever order agents are listed in.
//
//   - holder connected: renewed until now+ttl, same epoch, Beat from the holder's Agent;
//   - holder not connected, lease not lapsed (now before Expires): kept, unchanged;
//   - holder not connected, lapsed: promoted to the first connected agent by node id under
//     epoch+1, or released under epoch+1 when none is connected;
//   - no holder: acquired by the first connected agent by node id under epoch+1, or idle.
func Tick(rec Record, connected []Agent, now time.Time, ttl time.Duration) Decision {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	d := Decision{Change: Idle, Prev: rec, Next: rec}
	var first *Agent
	var holder *Agent
	for i := range connected {
		a := &connected[i]
		if a.Node == "" || a.Site != rec.Site {
			continue
		}
		if rec.Holder != "" && a.Node == rec.Holder {
			if holder == nil || a.Beat > holder.Beat {
				holder = a
			}
		}
		if first == nil || a.Node < first.Node {
			first = a
		}
	}
	take := func(c Change, a *Agent) Decision {
		d.Change = c
		d.Next = Record{Site: rec.Site, Holder: a.Node, Epoch: rec.Epoch + 1,
			Expires: now.Add(ttl), TTL: ttl, Beat: a.Beat}
		return d
	}
	switch {
	case rec.Holder == "":
		if first == nil {
			return d
		}
		return take(Acquired, first)
	case holder != nil:
		d.Change = Renewed
		d.Next = Record{Site: rec.Site, Holder: rec.Holder, Epoch: rec.Epoch,
			Expires: now.Add(ttl), TTL: ttl, Beat: holder.Beat}
		return d
	case now.Before(rec.Expires):
		d.Change = Kept
		return d
	case first != nil:
		return take(Promoted, first)
	default:
		d.Change = Released
		d.Next = Record{Site: rec.Site, Epoch: rec.Epoch + 1, TTL: ttl}
		return d
	}
}
