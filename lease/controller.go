package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// Fleet is what a Controller asks the control plane about its site agents.
type Fleet interface {
	// Sites lists the sites whose leases the controller ticks.
	Sites(ctx context.Context) ([]string, error)
	// Connected lists the site's agents that have a live session, each with the latest
	// heartbeat number received from it.
	Connected(ctx context.Context, site string) ([]Agent, error)
}

// Controller runs the lease tick for every site against a Store (the seed's SiteBoot
// controller). Several controllers may share one Store: compare-and-swap lets one of them
// win each round. Set the fields before the first call; a Controller is safe for
// concurrent use.
type Controller struct {
	// Store keeps the records. Required.
	Store Store
	// Fleet lists sites and their connected agents. Required.
	Fleet Fleet
	// Clock: wall time for records, monotonic time for watching them; nil: [clock.Real].
	Clock clock.Clock
	// TTL of a renewed lease; zero: DefaultTTL.
	TTL time.Duration
	// Interval between passes in Run; zero: DefaultInterval.
	Interval time.Duration
	// Parallel is how many sites a pass ticks at once; zero: DefaultParallel.
	Parallel int
	// Logger receives changes of holder and errors; nil: discard.
	Logger *slog.Logger
	// OnDecision, when set, is called after every tick that changed or kept a lease
	// (not Idle), once the change is stored: the host pushes the new words to the agents.
	OnDecision func(ctx context.Context, d Decision)
	// Events, if set, receives EventChanged for every change of holder or release it
	// stores, EventDeferred for a takeover its own watch holds back, EventConflict for a
	// write lost to another writer and EventError for a failed read or write. Renewals and
	// idle ticks are not reported (Stats counts them). Nil: no event is built.
	Events Sink

	once  sync.Once
	clock clock.Clock
	mu    sync.Mutex
	seen  map[string]observation

	ticks, writes, conflicts, errs, deferred atomic.Uint64
	changes                                  [len(changeNames)]atomic.Uint64
}

// observation is when this controller first saw a version of a site's record, on its
// monotonic clock.
type observation struct {
	ver Version
	at  time.Duration
}

// Stats are a controller's counters since it was made.
type Stats struct {
	Ticks     uint64 // site ticks run
	Writes    uint64 // records written
	Conflicts uint64 // writes lost to another writer
	Errors    uint64 // ticks failed on the store or the fleet (conflicts not counted)
	// Deferred counts takeovers the record's expiry allowed but this controller's own
	// monotonic watch did not yet (a wall clock ahead, or a record seen too recently).
	Deferred uint64
	// Changes counts ticks by outcome, indexed by Change.
	Changes [len(changeNames)]uint64
}

// Validate reports a missing dependency or a setting out of range.
func (c *Controller) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("lease: controller has no Store")
	case c.Fleet == nil:
		return errors.New("lease: controller has no Fleet")
	case c.TTL < 0 || c.TTL > MaxTTL || c.TTL%time.Millisecond != 0:
		return fmt.Errorf("lease: TTL %v out of range (whole milliseconds up to %v)", c.TTL, MaxTTL)
	case c.Interval < 0:
		return fmt.Errorf("lease: negative Interval %v", c.Interval)
	case c.Parallel < 0:
		return fmt.Errorf("lease: negative Parallel %d", c.Parallel)
	}
	ttl, iv := c.ttl(), c.interval()
	if iv >= ttl {
		return fmt.Errorf("lease: Interval %v must be shorter than TTL %v", iv, ttl)
	}
	return nil
}

func (c *Controller) ttl() time.Duration {
	if c.TTL == 0 {
		return DefaultTTL
	}
	return c.TTL
}

func (c *Controller) interval() time.Duration {
	if c.Interval == 0 {
		return DefaultInterval
	}
	return c.Interval
}

func (c *Controller) init() {
	c.once.Do(func() {
		c.clock = c.Clock
		if c.clock == nil {
			c.clock = clock.Real
		}
	})
}

func (c *Controller) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// TickSite runs one tick of one site's lease: read, decide, write with compare-and-swap.
// A write lost to another writer returns an error matching ErrConflict and changes nothing;
// the next tick decides again from what the winner wrote.
func (c *Controller) TickSite(ctx context.Context, site string) (Decision, error) {
	c.init()
	c.ticks.Add(1)
	rec, ver, err := c.Store.Get(ctx, site)
	if err != nil {
		c.errs.Add(1)
		return Decision{}, c.failed(&OpError{Op: "get", Site: site, Err: err}, EventError)
	}
	agents, err := c.Fleet.Connected(ctx, site)
	if err != nil {
		c.errs.Add(1)
		return Decision{}, c.failed(&OpError{Op: "connected", Site: site, Err: err}, EventError)
	}
	// Read the monotonic clock after the record and the heartbeats: the moment is no
	// earlier than the write of ver and than any heartbeat the fleet reported.
	mono := c.clock.Monotonic()
	watched := c.watch(site, ver, mono)

	d := Tick(rec, agents, c.clock.Now(), c.ttl())
	if (d.Change == Promoted || d.Change == Released) && watched < max(rec.TTL, c.ttl()) {
		c.deferred.Add(1)
		if c.Events != nil {
			c.Events.Emit(Event{Time: c.clock.Now(), Kind: EventDeferred, Site: site, Epoch: rec.Epoch,
				Change: Kept, Holder: rec.Holder, Prev: rec.Holder})
		}
		d = Decision{Change: Kept, Prev: rec, Next: rec}
	}
	c.changes[d.Change].Add(1)
	if !d.Change.Writes() {
		if d.Change != Idle && c.OnDecision != nil {
			c.OnDecision(ctx, d)
		}
		return d, nil
	}
	nv, err := c.Store.CompareAndSwap(ctx, site, ver, d.Next)
	if err != nil {
		kind := EventError
		if errors.Is(err, ErrConflict) {
			c.conflicts.Add(1)
			kind = EventConflict
		} else {
			c.errs.Add(1)
		}
		return d, c.failed(&OpError{Op: "cas", Site: site, Err: err}, kind)
	}
	c.writes.Add(1)
	c.mu.Lock()
	c.seen[site] = observation{ver: nv, at: mono}
	c.mu.Unlock()
	if d.Change != Renewed {
		c.log().Info("boot lease changed", "site", site, "change", d.Change.String(),
			"holder", d.Next.Holder, "epoch", d.Next.Epoch, "previous_holder", d.Prev.Holder)
		if c.Events != nil {
			c.Events.Emit(Event{Time: c.clock.Now(), Kind: EventChanged, Site: site, Epoch: d.Next.Epoch,
				Change: d.Change, Holder: d.Next.Holder, Prev: d.Prev.Holder})
		}
	}
	if c.OnDecision != nil {
		c.OnDecision(ctx, d)
	}
	return d, nil
}

// failed hands Events an event of kind for err, the error a tick returns, and returns it.
func (c *Controller) failed(err *OpError, kind EventKind) error {
	if c.Events != nil {
		c.Events.Emit(Event{Time: c.clock.Now(), Kind: kind, Site: err.Site, Err: err})
	}
	return err
}

// watch notes that ver is the site's version at mono and returns how long this controller
// has seen that version.
func (c *Controller) watch(site string, ver Version, mono time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = make(map[string]observation)
	}
	o, ok := c.seen[site]
	if !ok || o.ver != ver {
		c.seen[site] = observation{ver: ver, at: mono}
		return 0
	}
	return mono - o.at
}

// TickAll runs one pass: a tick of every site the Fleet lists, Parallel at a time. It
// returns the errors of the sites that failed, joined; conflicts are not errors here.
func (c *Controller) TickAll(ctx context.Context) error {
	c.init()
	sites, err := c.Fleet.Sites(ctx)
	if err != nil {
		c.errs.Add(1)
		return &OpError{Op: "sites", Err: err}
	}
	c.forget(sites)
	par := c.Parallel
	if par == 0 {
		par = DefaultParallel
	}
	var mu sync.Mutex
	var errs []error
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(sites) || ctx.Err() != nil {
				return
			}
			if _, err := c.TickSite(ctx, sites[i]); err != nil && !errors.Is(err, ErrConflict) {
				c.log().Warn("boot lease tick failed", "site", sites[i], "err", err)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
	}
	// A few workers take the sites in turn: no goroutine per site.
	workers := min(par, len(sites))
	if workers <= 1 {
		work()
	} else {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(work)
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// forget drops what the controller watched of sites no longer listed.
func (c *Controller) forget(sites []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) <= len(sites) {
		listed := make(map[string]struct{}, len(sites))
		for _, s := range sites {
			listed[s] = struct{}{}
		}
		for s := range c.seen {
			if _, ok := listed[s]; !ok {
				delete(c.seen, s)
			}
		}
		return
	}
	keep := make(map[string]observation, len(sites))
	for _, s := range sites {
		if o, ok := c.seen[s]; ok {
			keep[s] = o
		}
	}
	c.seen = keep
}

// Run runs a pass at once and then every Interval until ctx is done, and returns nil then.
// Errors of a pass are logged and counted, and the next pass tries again. It returns an
// error only when the Controller is not valid.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Validate(); err != nil {
		return err
	}
	t := time.NewTicker(c.interval())
	defer t.Stop()
	for {
		_ = c.TickAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Stats returns the controller's counters.
func (c *Controller) Stats() Stats {
	s := Stats{Ticks: c.ticks.Load(), Writes: c.writes.Load(), Conflicts: c.conflicts.Load(),
		Errors: c.errs.Load(), Deferred: c.deferred.Load()}
	for i := range c.changes {
		s.Changes[i] = c.changes[i].Load()
	}
	return s
}
