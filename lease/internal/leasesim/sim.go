// Package leasesim is the randomised simulation of the fenced boot lease (DESIGN L6), shared by
// the lease package's tests and the etcd store's, which runs it on a real etcd.
package leasesim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock"

	"github.com/bettercompute/siteboot/internal/eventq"
	"github.com/bettercompute/siteboot/lease"
)

// The simulation: site agents with real Fences, control-plane controllers with real
// Controllers on one Store, and a network between them, all on one simulated timeline driven
// by a seeded random source, so that a seed replays exactly. Every event is one step; after
// each step the invariants are checked:
//
//   - no two agents' fences report active at the same instant (activity only ends between
//     events, so checking after every event covers every instant);
//   - an active agent's epoch is the store's current epoch and the store names it holder.
//
// Faults: messages in both directions delayed up to simMaxDelay (so reordered), lost and
// duplicated; partitions cutting an agent off in one or both directions; agents crashing and
// restarting with a fresh fence and a fresh monotonic clock; controllers restarting (losing
// what they watched); store errors, including writes that land but report failure; wall
// clocks of agents and controllers jumping by up to two minutes either way; monotonic clock
// rates off by up to simDrift.

// Flags are a run's settings, from the test binary's flags (see RegisterFlags).
type Flags struct {
	Seeds int    // seeds to run
	Steps int    // steps (events) per seed
	Seed  uint64 // run this seed only (replay); 0: fresh seeds
}

// RegisterFlags registers the simulation's flags on fs, with their defaults.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.IntVar(&f.Seeds, "lease.sim.seeds", 8, "seeds the lease simulation runs")
	fs.IntVar(&f.Steps, "lease.sim.steps", 100000, "steps (events) per seed of the lease simulation")
	fs.Uint64Var(&f.Seed, "lease.sim.seed", 0, "run the lease simulation for this seed only (replay)")
	return f
}

const (
	simSite        = "site-1"
	simTTL         = 15 * time.Second
	simInterval    = 5 * time.Second
	simHeartbeat   = 2 * time.Second // plus up to 500 ms of jitter
	simSession     = 6 * time.Second // the control plane drops a session heard from this long ago
	simMaxDelay    = 5 * time.Second // bound on a message's delay, either direction
	simDrift       = 0.02            // bound on a monotonic clock's rate error
	simMaxWallJump = 2 * time.Minute
)

var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// simFence is what the simulation needs of a fence, so that it can run a wrong one too.
type simFence interface {
	Heartbeat() uint64
	Observe(lease.Word)
	Active() (uint64, bool)
}

type simConfig struct {
	Agents, Controllers int
	Steps               int
	Loss, Dup           float64 // message loss and duplication probabilities
	StoreFaults         float64 // probability of a store error per operation
	Faults              bool    // partitions, crashes, restarts, clock jumps
	Drift               float64
	Store               lease.Store // nil: a MemoryStore
	// NewFence makes an agent's fence; nil: a real lease.Fence.
	NewFence func(c clock.Clock, rng *rand.Rand) simFence
	// Check, when set, runs after every step too.
	Check func(s *sim) error
}

// simClock is a Clock on the simulated timeline: a monotonic reading running at rate from
// base, and a wall clock that may jump.
type simClock struct {
	s      *sim
	rate   float64
	base   time.Duration // monotonic reading at start
	start  time.Duration // simulated time the clock started
	wallOf time.Duration // wall clock offset (jumps)
}

func (c *simClock) Monotonic() time.Duration {
	return c.base + time.Duration(float64(c.s.now-c.start)*c.rate)
}

// AfterFunc is never called: the fence and the controller take no timers, and the
// simulation steps them itself.
func (c *simClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("leasesim: no timers on the simulated timeline")
}

func (c *simClock) Now() time.Time {
	return simEpoch.Add(time.Duration(float64(c.s.now)*c.rate) + c.wallOf)
}

type simAgent struct {
	node        string
	inc         int // incarnation: bumped on every crash
	alive       bool
	fence       simFence
	clock       *simClock
	cutUp       time.Duration // heartbeats to the control plane lost until then
	cutDown     time.Duration // words to the agent lost until then
	heardAt     time.Duration // control plane: when its last heartbeat arrived (-1 never)
	lastBeat    uint64        // control plane: that heartbeat's number
	activeSince time.Duration // -1 when not active
}

type simController struct {
	gen   int
	c     *lease.Controller
	clock *simClock
}

type simTrace struct {
	at   time.Duration
	what string
	arg  int
	x    uint64
}

type sim struct {
	cfg    simConfig
	seed   uint64
	rng    *rand.Rand
	now    time.Duration
	q      eventq.Queue
	agents []*simAgent
	ctls   []*simController
	store  *simStore
	steps  int
	trace  [48]simTrace
	ntrace int
	ctx    context.Context

	// Counters of what happened, for the test's log.
	activeTime                time.Duration // simulated time with an agent active
	lastActive                bool
	promotions, conflicts     int
	lost, partitions, crashes int
}

// simStore is the Store the controllers and the gateway use: it injects errors, including
// writes that land but report failure, and remembers the last record written, which is the
// store's current record (the simulation is single-threaded).
type simStore struct {
	s     *sim
	inner lease.Store
	cur   lease.Record
	// prev is a record and version superseded by the latest write: a read that returns it
	// stands for another writer getting in between a controller's read and its write.
	prev    lease.Record
	prevVer lease.Version
	stale   int
}

var errSimStore = errors.New("simulated store failure")

func (st *simStore) Get(ctx context.Context, site string) (lease.Record, lease.Version, error) {
	if st.s.rng.Float64() < st.s.cfg.StoreFaults {
		return lease.Record{}, 0, errSimStore
	}
	if st.prevVer != 0 && st.s.rng.Float64() < st.s.cfg.StoreFaults {
		st.stale++
		return st.prev, st.prevVer, nil
	}
	return st.inner.Get(ctx, site)
}

func (st *simStore) CompareAndSwap(ctx context.Context, site string, old lease.Version, rec lease.Record) (lease.Version, error) {
	if st.s.rng.Float64() < st.s.cfg.StoreFaults {
		return 0, errSimStore
	}
	prev, prevVer, err := st.inner.Get(ctx, site)
	if err != nil {
		return 0, err
	}
	v, err := st.inner.CompareAndSwap(ctx, site, old, rec)
	if err != nil {
		return v, err
	}
	st.prev, st.prevVer = prev, prevVer
	if rec.Epoch < st.cur.Epoch || (rec.Epoch == st.cur.Epoch && rec.Holder != st.cur.Holder) {
		st.s.fail("store went from %v to %v", st.cur, rec)
	}
	st.cur = rec
	if st.s.rng.Float64() < st.s.cfg.StoreFaults {
		return 0, errSimStore // landed, but the answer was lost
	}
	return v, nil
}

// simFleet is the control plane's view of the agents' sessions.
type simFleet struct{ s *sim }

func (f simFleet) Sites(context.Context) ([]string, error) { return []string{simSite}, nil }

func (f simFleet) Connected(_ context.Context, site string) ([]lease.Agent, error) {
	var out []lease.Agent
	for _, a := range f.s.agents {
		if a.heardAt >= 0 && f.s.now-a.heardAt <= simSession {
			out = append(out, lease.Agent{Node: a.node, Site: simSite, Beat: a.lastBeat})
		}
	}
	return out, nil
}

type simViolation struct{ msg string }

func (s *sim) fail(format string, args ...any) {
	panic(simViolation{fmt.Sprintf(format, args...)})
}

func (s *sim) at(d time.Duration, fn func()) {
	s.q.Push(s.now+d, fn)
}

func (s *sim) note(what string, arg int, x uint64) {
	s.trace[s.ntrace%len(s.trace)] = simTrace{s.now, what, arg, x}
	s.ntrace++
}

func (s *sim) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

func (s *sim) newClock() *simClock {
	return &simClock{s: s, rate: 1 + (s.rng.Float64()*2-1)*s.cfg.Drift,
		base: s.uniform(0, time.Hour), start: s.now}
}

func newSim(cfg simConfig, seed uint64) *sim {
	s := &sim{cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x1ea5e)), ctx: context.Background()}
	inner := cfg.Store
	if inner == nil {
		inner = &lease.MemoryStore{}
	}
	s.store = &simStore{s: s, inner: inner, cur: lease.Record{Site: simSite}}
	for i := range cfg.Agents {
		a := &simAgent{node: fmt.Sprintf("agent-%02d", i), heardAt: -1, activeSince: -1}
		s.agents = append(s.agents, a)
		s.startAgent(i)
	}
	for i := range cfg.Controllers {
		s.ctls = append(s.ctls, &simController{})
		s.startController(i)
	}
	if cfg.Faults {
		s.at(s.uniform(0, time.Minute), s.faultLoop)
	}
	return s
}

func (s *sim) startAgent(i int) {
	a := s.agents[i]
	a.inc++
	a.alive = true
	a.clock = s.newClock()
	a.clock.wallOf = s.uniform(-simMaxWallJump, simMaxWallJump)
	rng := rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
	if s.cfg.NewFence != nil {
		a.fence = s.cfg.NewFence(a.clock, rng)
	} else {
		a.fence = &lease.Fence{Clock: a.clock, TTL: simTTL, Rand: rngReader{rng}}
	}
	inc := a.inc
	s.note("agent-start", i, uint64(inc))
	s.at(s.uniform(0, simHeartbeat), func() { s.heartbeat(i, inc) })
}

func (s *sim) startController(i int) {
	sc := s.ctls[i]
	sc.gen++
	sc.clock = s.newClock()
	sc.clock.wallOf = s.uniform(-5*time.Second, 5*time.Second)
	sc.c = &lease.Controller{Store: s.store, Fleet: simFleet{s}, Clock: sc.clock, TTL: simTTL,
		Interval: simInterval, OnDecision: func(_ context.Context, d lease.Decision) { s.push(d.Next) }}
	gen := sc.gen
	s.note("controller-start", i, uint64(gen))
	s.at(s.uniform(0, simInterval), func() { s.tick(i, gen) })
}

// rngReader adapts a seeded random source to the io.Reader a Fence takes.
type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// delay returns a message's delay, or false when the message is lost.
func (s *sim) delay() (time.Duration, bool) {
	if s.rng.Float64() < s.cfg.Loss {
		s.lost++
		return 0, false
	}
	return s.uniform(0, simMaxDelay), true
}

func (s *sim) heartbeat(i, inc int) {
	a := s.agents[i]
	if !a.alive || a.inc != inc {
		return
	}
	beat := a.fence.Heartbeat()
	s.note("heartbeat", i, beat)
	s.send(s.now < a.cutUp, func() { s.receiveHeartbeat(i, beat) })
	// The agent's own timer: its clock's rate does not matter here.
	s.at(simHeartbeat+s.uniform(0, 500*time.Millisecond), func() { s.heartbeat(i, inc) })
}

// send delivers fn after a random delay unless cut or lost, sometimes twice.
func (s *sim) send(cut bool, fn func()) {
	if cut {
		s.lost++
		return
	}
	d, ok := s.delay()
	if !ok {
		return
	}
	s.at(d, fn)
	if s.rng.Float64() < s.cfg.Dup {
		s.at(d+s.uniform(0, simMaxDelay), fn)
	}
}

func (s *sim) receiveHeartbeat(i int, beat uint64) {
	a := s.agents[i]
	if s.now < a.cutUp {
		s.lost++
		return
	}
	a.heardAt, a.lastBeat = s.now, beat
	s.note("heartbeat-received", i, beat)
	// The gateway answers with the lease's state as stored now.
	rec, _, err := s.store.Get(s.ctx, simSite)
	if err != nil {
		return
	}
	s.word(i, rec.WordFor(a.node))
}

// push sends every agent the word about a record a controller just decided.
func (s *sim) push(rec lease.Record) {
	for i, a := range s.agents {
		s.word(i, rec.WordFor(a.node))
	}
}

func (s *sim) word(i int, w lease.Word) {
	a := s.agents[i]
	inc := a.inc
	s.send(s.now < a.cutDown, func() {
		if !a.alive || a.inc != inc || s.now < a.cutDown {
			s.lost++
			return
		}
		s.note("word", i, w.Epoch)
		a.fence.Observe(w)
	})
}

func (s *sim) tick(i, gen int) {
	sc := s.ctls[i]
	if sc.gen != gen {
		return
	}
	before := s.store.cur
	_, err := sc.c.TickSite(s.ctx, simSite)
	if errors.Is(err, lease.ErrConflict) {
		s.conflicts++
	}
	if s.store.cur.Holder != before.Holder && s.store.cur.Holder != "" && before.Holder != "" {
		s.promotions++
	}
	s.note("tick", i, s.store.cur.Epoch)
	s.at(simInterval, func() { s.tick(i, gen) })
}

func (s *sim) faultLoop() {
	switch k := s.rng.IntN(10); {
	case k < 4: // partition an agent in one or both directions
		i := s.rng.IntN(len(s.agents))
		until := s.now + s.uniform(time.Second, 45*time.Second)
		switch s.rng.IntN(3) {
		case 0:
			s.agents[i].cutUp = until
		case 1:
			s.agents[i].cutDown = until
		default:
			s.agents[i].cutUp, s.agents[i].cutDown = until, until
		}
		s.partitions++
		s.note("partition", i, uint64(until))
	case k < 6: // crash an agent; it comes back later with a fresh fence and clock
		i := s.rng.IntN(len(s.agents))
		if a := s.agents[i]; a.alive {
			a.alive = false
			a.activeSince = -1
			s.crashes++
			s.note("crash", i, 0)
			s.at(s.uniform(time.Second, time.Minute), func() { s.startAgent(i) })
		}
	case k < 7: // restart a controller: it forgets what it watched
		i := s.rng.IntN(len(s.ctls))
		s.ctls[i].gen++
		gen := s.ctls[i].gen
		s.note("controller-down", i, 0)
		s.at(s.uniform(0, 10*time.Second), func() {
			if s.ctls[i].gen == gen {
				s.startController(i)
			}
		})
	case k < 9: // a wall clock jumps
		j := s.uniform(-simMaxWallJump, simMaxWallJump)
		n := s.rng.IntN(len(s.agents) + len(s.ctls))
		if n < len(s.agents) {
			s.agents[n].clock.wallOf += j
		} else {
			s.ctls[n-len(s.agents)].clock.wallOf += j
		}
		s.note("wall-jump", n, uint64(j))
	default: // a quiet spell
	}
	s.at(s.uniform(0, time.Minute), s.faultLoop)
}

func (s *sim) check() {
	var active []int
	for i, a := range s.agents {
		if !a.alive {
			continue
		}
		e, ok := a.fence.Active()
		if !ok {
			a.activeSince = -1
			continue
		}
		if a.activeSince < 0 {
			a.activeSince = s.now
		}
		active = append(active, i)
		if cur := s.store.cur; e != cur.Epoch || cur.Holder != a.node {
			s.fail("%s active at epoch %d but the store has %v", a.node, e, cur)
		}
	}
	s.lastActive = len(active) > 0
	if len(active) > 1 {
		var b strings.Builder
		for _, i := range active {
			e, _ := s.agents[i].fence.Active()
			fmt.Fprintf(&b, " %s(epoch %d, since %v)", s.agents[i].node, e, s.agents[i].activeSince)
		}
		s.fail("%d agents active at once:%s", len(active), b.String())
	}
	if s.cfg.Check != nil {
		if err := s.cfg.Check(s); err != nil {
			s.fail("%v", err)
		}
	}
}

// run runs until the configured steps (or simulated time limit) are done and returns the
// first violation with its trace.
func (s *sim) run(limit time.Duration) (err error) {
	defer func() {
		if r := recover(); r != nil {
			v, ok := r.(simViolation)
			if !ok {
				panic(r)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "seed %d, step %d, at %v: %s\nlast events:\n", s.seed, s.steps, s.now, v.msg)
			for k := max(0, s.ntrace-len(s.trace)); k < s.ntrace; k++ {
				tr := s.trace[k%len(s.trace)]
				fmt.Fprintf(&b, "  %12v %-18s %d %d\n", tr.at, tr.what, tr.arg, tr.x)
			}
			fmt.Fprintf(&b, "replay with: go test ./lease -run TestSimulation -lease.sim.seed=%d -lease.sim.steps=%d", s.seed, s.cfg.Steps)
			err = errors.New(b.String())
		}
	}()
	for s.steps < s.cfg.Steps && s.q.Len() > 0 {
		at, fn, _ := s.q.Pop()
		if limit > 0 && at > limit {
			break
		}
		if s.lastActive {
			s.activeTime += at - s.now
		}
		s.now = at
		fn()
		s.steps++
		s.check()
	}
	return nil
}

func simSeedsToRun(f Flags) []uint64 {
	if f.Seed != 0 {
		return []uint64{f.Seed}
	}
	seeds := make([]uint64, f.Seeds)
	base := uint64(time.Now().UnixNano())
	for i := range seeds {
		seeds[i] = base + uint64(i)*0x9e3779b97f4a7c15
	}
	return seeds
}

var simFaulty = simConfig{Agents: 3, Controllers: 2, Loss: 0.1, Dup: 0.02, StoreFaults: 0.03,
	Faults: true, Drift: simDrift}

// Simulation runs the fenced lease under every fault over many seeds (fresh each run;
// a failure prints its seed and the command that replays it).
func Simulation(t *testing.T, f Flags) {
	total := 0
	for _, seed := range simSeedsToRun(f) {
		cfg := simFaulty
		cfg.Steps = f.Steps
		s := newSim(cfg, seed)
		if err := s.run(0); err != nil {
			t.Fatal(err)
		}
		total += s.steps
		checkFinalRecord(t, s)
		if s.promotions == 0 || s.partitions == 0 || s.crashes == 0 || s.conflicts == 0 {
			t.Errorf("seed %d: the run exercised too little: %d promotions, %d partitions, %d crashes, %d conflicts",
				seed, s.promotions, s.partitions, s.crashes, s.conflicts)
		}
		avail := float64(s.activeTime) / float64(s.now)
		if avail < 0.5 {
			t.Errorf("seed %d: an agent was active only %.0f%% of the time", seed, 100*avail)
		}
		t.Logf("seed %d: %d steps, %v simulated, active %.0f%%, %d promotions, %d conflicts, %d partitions, %d crashes, %d messages lost, final epoch %d",
			seed, s.steps, s.now.Round(time.Second), 100*avail, s.promotions, s.conflicts, s.partitions, s.crashes, s.lost, s.store.cur.Epoch)
	}
	if f.Seed == 0 && total < 100000 {
		t.Errorf("only %d steps simulated, want at least 100000", total)
	}
}

// naiveFence measures the window from when the word arrived: the mistake the real Fence
// avoids. The simulation must catch it.
type naiveFence struct {
	clock clock.Clock
	n     uint64
	epoch uint64
	until time.Duration
	holds bool
}

func (f *naiveFence) Heartbeat() uint64 { f.n++; return f.n }

func (f *naiveFence) Observe(w lease.Word) {
	f.holds, f.epoch = w.Holds && w.Epoch != 0, w.Epoch
	f.until = f.clock.Monotonic() + simTTL - lease.DefaultMargin
}

func (f *naiveFence) Active() (uint64, bool) {
	if f.holds && f.clock.Monotonic() < f.until {
		return f.epoch, true
	}
	return 0, false
}

// CatchesNaiveFence: the same simulation, run with a fence measured from the
// word's arrival, finds two agents active at once.
func CatchesNaiveFence(t *testing.T, f Flags) {
	cfg := simFaulty
	cfg.Steps = f.Steps
	cfg.NewFence = func(c clock.Clock, _ *rand.Rand) simFence { return &naiveFence{clock: c} }
	caught := 0
	var first error
	seeds := simSeedsToRun(f)
	for _, seed := range seeds {
		if err := newSim(cfg, seed).run(0); err != nil {
			caught++
			if first == nil {
				first = err
			}
		}
	}
	if caught == 0 {
		t.Fatalf("the naive fence passed %d seeds of %d steps: the simulation does not catch it", len(seeds), cfg.Steps)
	}
	t.Logf("naive fence caught in %d of %d seeds; the first:\n%v", caught, len(seeds), first)
}

// Failover: the holder is cut off at a random moment of a calm run (messages
// delayed up to simMaxDelay but none lost, clocks true). The standby is active no earlier
// than the old holder's fence has ended, and no later than the lapsed lease's expiry + one
// tick + the standby's next heartbeat and the answer to it.
func Failover(t *testing.T, f Flags) {
	seeds := simSeedsToRun(f)
	if f.Seed == 0 {
		seeds = nil
		base := uint64(time.Now().UnixNano())
		for i := range max(40, f.Seeds) {
			seeds = append(seeds, base+uint64(i))
		}
	}
	bound := simInterval + simHeartbeat + 500*time.Millisecond + 2*simMaxDelay
	var worst time.Duration
	for _, seed := range seeds {
		var (
			holder    = -1
			cutAt     time.Duration
			fenceEnd  time.Duration // when the cut-off holder's fence ended
			promoted  time.Duration // when the store named another holder
			expiry    time.Duration // the lapsed lease's expiry
			takenOver time.Duration // when another agent's fence went active
		)
		cfg := simConfig{Agents: 3, Controllers: 2, Steps: 1 << 30}
		cfg.Check = func(s *sim) error {
			cur := s.store.cur
			if holder < 0 {
				if s.now >= time.Minute && cur.Holder != "" {
					for i, a := range s.agents {
						if a.node == cur.Holder {
							holder = i
						}
					}
					d := s.uniform(0, simInterval)
					cutAt = s.now + d
					h := s.agents[holder]
					s.at(d, func() { h.cutUp, h.cutDown = 1<<62, 1<<62 })
				}
				return nil
			}
			h := s.agents[holder]
			if s.now < cutAt {
				return nil
			}
			if st := h.fence.(*lease.Fence).State(); st.Active {
				fenceEnd = s.now + st.Remaining
			}
			if promoted == 0 && cur.Holder != h.node {
				promoted = s.now
				if s.now < fenceEnd {
					return fmt.Errorf("promoted at %v before the old holder's fence ended at %v", s.now, fenceEnd)
				}
			}
			for i, a := range s.agents {
				if i != holder && a.activeSince >= 0 && takenOver == 0 {
					takenOver = a.activeSince
				}
			}
			return nil
		}
		s := newSim(cfg, seed)
		for _, sc := range s.ctls {
			sc.clock.wallOf = 0
		}
		var lapsed lease.Record
		prevCheck := cfg.Check
		s.cfg.Check = func(s *sim) error {
			before := s.store.cur
			err := prevCheck(s)
			if holder >= 0 && promoted == 0 && before.Holder == s.agents[holder].node {
				lapsed = before
			}
			return err
		}
		if err := s.run(cutAt + 2*time.Minute + 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if holder < 0 || promoted == 0 || takenOver == 0 {
			t.Fatalf("seed %d: no failover: holder %d, promoted %v, taken over %v", seed, holder, promoted, takenOver)
		}
		expiry = lapsed.Expires.Sub(simEpoch)
		if takenOver < fenceEnd {
			t.Errorf("seed %d: standby active at %v, before the old holder's fence ended at %v", seed, takenOver, fenceEnd)
		}
		if late := takenOver - expiry; late > bound {
			t.Errorf("seed %d: standby active at %v, %v after the expiry at %v (bound %v)", seed, takenOver, late, expiry, bound)
		}
		worst = max(worst, takenOver-expiry)
		if seed == seeds[0] {
			t.Logf("seed %d: holder cut off at %v, its fence ended at %v, lease expired at %v, standby promoted at %v and active at %v",
				seed, cutAt.Round(time.Millisecond), fenceEnd.Round(time.Millisecond), expiry.Round(time.Millisecond),
				promoted.Round(time.Millisecond), takenOver.Round(time.Millisecond))
		}
	}
	t.Logf("%d seeds: standby active at most %v after expiry (bound %v)", len(seeds), worst.Round(time.Millisecond), bound)
}

// checkFinalRecord: the record the simulation believes current is the one in the store.
func checkFinalRecord(t *testing.T, s *sim) {
	t.Helper()
	rec, _, err := s.store.inner.Get(s.ctx, simSite)
	if err != nil {
		t.Fatal(err)
	}
	if want := s.store.cur; rec.Holder != want.Holder || rec.Epoch != want.Epoch || !rec.Expires.Equal(want.Expires) {
		t.Fatalf("seed %d: store holds %v, the simulation last wrote %v", s.seed, rec, want)
	}
}

// OnStore runs the faulty simulation with the stores newStore gives (one per seed, each
// empty), f.Steps steps each: the same invariants hold, and the run as a whole must see a
// write conflict.
func OnStore(t *testing.T, f Flags, newStore func(i int) lease.Store) {
	seeds := simSeedsToRun(f)
	if f.Seed == 0 {
		seeds = seeds[:min(len(seeds), 3)]
	}
	// A seed of its own may happen to have no write conflict; the run as a whole must have
	// some, or the store's compare-and-swap was never tested against a rival.
	conflicts := 0
	for i, seed := range seeds {
		cfg := simFaulty
		cfg.Steps = f.Steps
		cfg.Store = newStore(i)
		s := newSim(cfg, seed)
		if err := s.run(0); err != nil {
			t.Fatal(err)
		}
		checkFinalRecord(t, s)
		conflicts += s.conflicts
		t.Logf("seed %d on the store: %d steps, %v simulated, %d promotions, %d conflicts, final epoch %d",
			seed, s.steps, s.now.Round(time.Second), s.promotions, s.conflicts, s.store.cur.Epoch)
	}
	if conflicts == 0 {
		t.Errorf("no write conflict in %d seeds: the compare-and-swap was never contested", len(seeds))
	}
}
