package bmc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/internal/eventq"
)

// The simulation of the claim protocol: site agents, each with a real Executor, a journal
// that survives its crashes (MemoryJournal records copied to a "disk" on every write,
// settled on restart as FileJournal settles them) and a link to a real ClaimRegistry on a
// faulty store; fake BMCs that count every destructive operation they receive; and a control
// plane that routes each command to the current holder (the first connected agent, or
// sometimes any connected one) and re-sends it until it has an outcome. All on one
// simulated timeline driven by a seeded random source; a seed replays exactly.
//
// Faults: messages in both directions delayed, lost and duplicated; claim and report calls
// lost before or after the registry applied them, or applied twice; agents partitioned;
// agents killed at random points (before or after a journal write, a claim, the BMC
// receiving the operation) and restarted, now and then with their data dir wiped; store
// errors, including writes that land but report failure.
//
// Invariants, checked after every step: no BMC has received a destructive operation id
// twice. At the end (after a calm spell with every agent back and no faults) every
// command has a recorded outcome or is reported by Route as unknown.
var (
	bsimSeeds = flag.Int("bmc.sim.seeds", 8, "seeds the claim simulation runs")
	bsimSteps = flag.Int("bmc.sim.steps", 100000, "steps (events) per seed of the claim simulation")
	bsimSeed  = flag.Uint64("bmc.sim.seed", 0, "run the claim simulation for this seed only (replay)")
)

const (
	bsimAgents   = 3
	bsimBMCs     = 4
	bsimTick     = 2 * time.Second
	bsimMaxDelay = 3 * time.Second
	bsimCalm     = 10 * time.Minute
)

var bsimEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type bsimConfig struct {
	Steps      int
	Loss, Dup  float64
	Kill       float64 // probability of a kill at each kill point
	Wipe       float64 // probability that a restart comes with a wiped data dir
	StoreFault float64
	// NoClaims runs the executors without the claim protocol (journal only): the
	// simulation must find doubles then.
	NoClaims bool
}

type bsimAgent struct {
	node  string
	inc   int
	alive bool
	cut   time.Duration // partitioned until
	disk  []Record      // the journal as stored
	jid   string
	exec  *Executor
}

type bsimCommand struct {
	id          string
	bmc         int
	destructive bool
	done        bool
	unknown     bool // the control plane was told "outcome unknown"
}

type bsim struct {
	cfg   bsimConfig
	seed  uint64
	rng   *rand.Rand
	now   time.Duration
	clk   *clocktest.Fake // at bsimEpoch+now
	q     eventq.Queue
	steps int
	ctx   context.Context

	agents   []*bsimAgent
	reg      *ClaimRegistry
	store    *bsimStore
	holder   int
	cmds     []*bsimCommand
	received []map[string]int // per BMC: destructive op id -> times received

	// figures
	sent, queries, kills, wipes, partitions, lost, resends, unknown, doubles int
	trace                                                                    []string
	violation                                                                string
}

type bsimViolation struct{ msg string }

func (s *bsim) fail(format string, args ...any) { panic(bsimViolation{fmt.Sprintf(format, args...)}) }

func (s *bsim) at(d time.Duration, fn func()) {
	s.q.Push(s.now+d, fn)
}

func (s *bsim) note(format string, args ...any) {
	if len(s.trace) >= 40 {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, fmt.Sprintf("%12v ", s.now)+fmt.Sprintf(format, args...))
}

func (s *bsim) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

func (s *bsim) chance(p float64) bool { return s.rng.Float64() < p }

// bsimStore injects store errors, including writes that land but report failure.
type bsimStore struct {
	s     *bsim
	inner MemoryClaimStore
}

var errBsimStore = errors.New("simulated store failure")

func (st *bsimStore) Get(ctx context.Context, id string) (ClaimRecord, ClaimVersion, error) {
	if st.s.chance(st.s.cfg.StoreFault) {
		return ClaimRecord{}, 0, errBsimStore
	}
	return st.inner.Get(ctx, id)
}

func (st *bsimStore) CompareAndSwap(ctx context.Context, id string, old ClaimVersion, rec ClaimRecord) (ClaimVersion, error) {
	if st.s.chance(st.s.cfg.StoreFault) {
		return 0, errBsimStore
	}
	v, err := st.inner.CompareAndSwap(ctx, id, old, rec)
	if err == nil && st.s.chance(st.s.cfg.StoreFault) {
		return 0, errBsimStore // landed; the answer was lost
	}
	return v, err
}

func newBsim(cfg bsimConfig, seed uint64) *bsim {
	s := &bsim{cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, 0xb3c)), ctx: context.Background(), clk: clocktest.New(bsimEpoch)}
	s.store = &bsimStore{s: s}
	s.reg = &ClaimRegistry{Store: s.store, Clock: s.clk}
	for i := range bsimBMCs {
		_ = i
		s.received = append(s.received, map[string]int{})
	}
	for i := range bsimAgents {
		s.agents = append(s.agents, &bsimAgent{node: fmt.Sprintf("agent-%d", i)})
		s.start(i, true)
	}
	s.at(0, s.controlTick)
	s.at(s.uniform(0, 30*time.Second), s.faultLoop)
	return s
}

// alive reports whether agent i is still the incarnation inc.
func (s *bsim) alive(i, inc int) bool { a := s.agents[i]; return a.alive && a.inc == inc }

// kill kills agent i at a kill point with the configured probability.
func (s *bsim) maybeKill(i, inc int, where string) bool {
	if !s.alive(i, inc) {
		return true
	}
	if s.chance(s.cfg.Kill) {
		s.crash(i, where)
		return true
	}
	return false
}

func (s *bsim) crash(i int, where string) {
	a := s.agents[i]
	if !a.alive {
		return
	}
	a.alive = false
	a.inc++
	s.kills++
	s.note("kill %s at %s", a.node, where)
	wipe := s.chance(s.cfg.Wipe)
	s.at(s.uniform(time.Second, time.Minute), func() { s.start(i, wipe) })
}

func (s *bsim) start(i int, wipe bool) {
	a := s.agents[i]
	a.inc++
	a.alive = true
	if wipe || a.jid == "" {
		a.disk = nil
		a.jid = fmt.Sprintf("%016x%016x", s.rng.Uint64(), s.rng.Uint64())
		if s.steps > 0 {
			s.wipes++
		}
	}
	inc := a.inc
	recs := append([]Record(nil), a.disk...)
	settle(recs)
	mem := &MemoryJournal{Window: 24 * time.Hour}
	mem.load(recs)
	j := &bsimJournal{s: s, i: i, inc: inc, mem: mem}
	j.persist()
	a.exec = &Executor{
		Opener:      OpenerFunc(func(_ context.Context, t Target) (Driver, error) { return s.open(i, inc, t) }),
		Credentials: CredentialsFunc(func(context.Context, string) (Credential, error) { return Credential{"u", "p"}, nil }),
		Journal:     j,
		Clock:       s.clk,
	}
	if !s.cfg.NoClaims {
		a.exec.Claims = &bsimLink{s: s, i: i, inc: inc}
	}
	s.note("start %s (journal %s)", a.node, a.jid[:6])
}

// bsimJournal is the agent's journal: every write reaches the disk unless the agent died.
type bsimJournal struct {
	s   *bsim
	i   int
	inc int
	mem *MemoryJournal
}

var errBsimDead = errors.New("agent dead")

func (j *bsimJournal) ID() string { return j.s.agents[j.i].jid }

func (j *bsimJournal) persist() { j.s.agents[j.i].disk = j.mem.snapshot() }

func (j *bsimJournal) Claim(ctx context.Context, id, op string, now time.Time) (Record, bool, error) {
	if j.s.maybeKill(j.i, j.inc, "journal claim") {
		return Record{}, false, errBsimDead
	}
	rec, ok, err := j.mem.Claim(ctx, id, op, now)
	if ok {
		j.persist()
	}
	j.s.maybeKill(j.i, j.inc, "after journal claim")
	return rec, ok, err
}

func (j *bsimJournal) Finish(ctx context.Context, rec Record) error {
	if j.s.maybeKill(j.i, j.inc, "journal write") {
		return errBsimDead
	}
	_ = j.mem.Finish(ctx, rec)
	j.persist()
	j.s.maybeKill(j.i, j.inc, "after journal write")
	return nil
}

// bsimLink is the agent's claim link: calls lost before or after they applied, applied
// twice, or cut by a partition.
type bsimLink struct {
	s   *bsim
	i   int
	inc int
}

var errBsimLink = errors.New("link: no answer")

func (l *bsimLink) call(fn func() error) error {
	s, a := l.s, l.s.agents[l.i]
	if !s.alive(l.i, l.inc) {
		return errBsimDead
	}
	if s.now < a.cut || s.chance(s.cfg.Loss) {
		s.lost++
		return errBsimLink
	}
	err := fn()
	if s.chance(s.cfg.Dup) {
		err = fn()
	}
	if s.maybeKill(l.i, l.inc, "claim link") {
		return errBsimDead
	}
	if s.now < a.cut || s.chance(s.cfg.Loss) {
		s.lost++
		return errBsimLink
	}
	return err
}

func (l *bsimLink) Claim(ctx context.Context, req ClaimRequest) (g Grant, err error) {
	err = l.call(func() error {
		var e error
		g, e = l.s.reg.Claim(ctx, l.s.agents[l.i].node, req)
		return e
	})
	return g, err
}

func (l *bsimLink) Report(ctx context.Context, req ClaimRequest, o Outcome) error {
	return l.call(func() error { return l.s.reg.Report(ctx, l.s.agents[l.i].node, req, o) })
}

// bsimDriver is a BMC seen through one open session.
type bsimDriver struct {
	s      *bsim
	i, inc int
	bmc    int
}

func (d *bsimDriver) Name() string { return "sim" }
func (d *bsimDriver) Close() error { return nil }

func (s *bsim) open(i, inc int, t Target) (Driver, error) {
	if !s.alive(i, inc) {
		return nil, errBsimDead
	}
	var b int
	fmt.Sscanf(t.Address, "bmc-%d", &b)
	if s.chance(0.02) {
		return nil, &OpError{Op: "open", Kind: ErrUnreachable, Message: "no answer"}
	}
	return &bsimDriver{s: s, i: i, inc: inc, bmc: b}, nil
}

// receive is the BMC receiving a destructive operation.
func (d *bsimDriver) receive(id string) error {
	s := d.s
	if s.maybeKill(d.i, d.inc, "before the BMC") {
		return errBsimDead
	}
	s.received[d.bmc][id]++
	s.sent++
	s.note("%s sends %s to bmc-%d", s.agents[d.i].node, id, d.bmc)
	if n := s.received[d.bmc][id]; n > 1 {
		// Not a panic: the executor recovers a driver's panics. The run loop fails.
		s.doubles++
		s.violation = fmt.Sprintf("bmc-%d received %s %d times", d.bmc, id, n)
	}
	if s.maybeKill(d.i, d.inc, "after the BMC") {
		return errBsimDead
	}
	if s.chance(0.05) {
		return &OpError{Op: "power", Kind: ErrRefused, Code: "0xcc", Message: "refused"}
	}
	return nil
}

func (s *bsim) connected(i int) bool { a := s.agents[i]; return a.alive && s.now >= a.cut }

// controlTick routes every unfinished command and makes new ones.
func (s *bsim) controlTick() {
	if !s.connected(s.holder) {
		for i := range s.agents {
			if s.connected(i) {
				s.holder = i
				s.note("holder now %s", s.agents[i].node)
				break
			}
		}
	}
	if s.steps < s.cfg.Steps && len(s.cmds) < 4000 && s.chance(0.7) {
		for range 1 + s.rng.IntN(3) {
			c := &bsimCommand{id: fmt.Sprintf("cmd-%d", len(s.cmds)), bmc: s.rng.IntN(bsimBMCs), destructive: s.chance(0.8)}
			s.cmds = append(s.cmds, c)
		}
	}
	for _, c := range s.cmds {
		if c.done {
			continue
		}
		to := s.holder
		if s.chance(0.1) {
			to = s.rng.IntN(len(s.agents)) // a routing mistake, or a stale view
		}
		if !c.destructive {
			s.deliver(to, c)
			continue
		}
		d, err := s.reg.Route(s.ctx, c.id, "power", s.agents[to].node)
		if err != nil {
			continue
		}
		switch d.Action {
		case RouteReuse:
			c.done = true
		case RouteUnknown:
			c.done, c.unknown = true, true
			s.unknown++
		case RouteSend:
			s.deliver(to, c)
		}
	}
	s.at(bsimTick, s.controlTick)
}

// deliver sends command c to agent i, which runs it and answers with the result.
func (s *bsim) deliver(i int, c *bsimCommand) {
	s.resends++
	s.message(i, func() {
		a := s.agents[i]
		if !a.alive {
			return
		}
		inc := a.inc
		op := operation{ID: c.id, Name: "power", Destructive: c.destructive,
			Target: TargetRef{Driver: "sim", Address: fmt.Sprintf("bmc-%d", c.bmc), Credential: "ref"},
			Do: func(_ context.Context, d Driver) (any, error) {
				if !c.destructive {
					s.queries++
					return PowerOn, nil
				}
				return nil, d.(*bsimDriver).receive(c.id)
			}}
		res := a.exec.run(s.ctx, op)
		if !s.alive(i, inc) {
			return // it died while running: its answer never leaves
		}
		s.message(i, func() {
			if res.Outcome.Status != StatusNotSent && !c.destructive {
				c.done = true
			}
		})
	})
}

// message delivers fn after a delay unless agent i is cut off or the message is lost,
// sometimes twice.
func (s *bsim) message(i int, fn func()) {
	if s.now < s.agents[i].cut || s.chance(s.cfg.Loss) {
		s.lost++
		return
	}
	d := s.uniform(0, bsimMaxDelay)
	s.at(d, fn)
	if s.chance(s.cfg.Dup) {
		s.at(d+s.uniform(0, bsimMaxDelay), fn)
	}
}

func (s *bsim) faultLoop() {
	if s.steps >= s.cfg.Steps {
		return // the calm spell
	}
	i := s.rng.IntN(len(s.agents))
	switch k := s.rng.IntN(10); {
	case k < 4:
		s.agents[i].cut = s.now + s.uniform(time.Second, 40*time.Second)
		s.partitions++
		s.note("partition %s", s.agents[i].node)
	case k < 7:
		s.crash(i, "random")
	}
	s.at(s.uniform(0, 20*time.Second), s.faultLoop)
}

func (s *bsim) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			v, ok := r.(bsimViolation)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("seed %d, step %d, at %v: %s\nlast events:\n  %s\nreplay with: go test ./bmc -run TestClaimSimulation -bmc.sim.seed=%d -bmc.sim.steps=%d",
				s.seed, s.steps, s.now, v.msg, strings.Join(s.trace, "\n  "), s.seed, s.cfg.Steps)
		}
	}()
	var calmFrom time.Duration
	for s.q.Len() > 0 {
		at, fn, _ := s.q.Pop()
		s.now = at
		s.clk.Set(bsimEpoch.Add(at))
		if s.steps == s.cfg.Steps && calmFrom == 0 {
			calmFrom = s.now
			// The calm spell: no loss, no kills, partitions healed, every agent back.
			s.cfg.Loss, s.cfg.Dup, s.cfg.Kill, s.cfg.StoreFault = 0, 0, 0, 0
			for i, a := range s.agents {
				a.cut = 0
				if !a.alive {
					s.start(i, false)
				}
			}
		}
		if calmFrom != 0 && s.now > calmFrom+bsimCalm {
			break
		}
		fn()
		s.steps++
		if s.violation != "" {
			s.fail("%s", s.violation)
		}
	}
	return nil
}

// finalCheck: every destructive command has a recorded outcome or is unknown; no query is
// left without an answer.
func (s *bsim) finalCheck() error {
	for _, c := range s.cmds {
		if !c.destructive {
			if !c.done {
				return fmt.Errorf("query %s never answered", c.id)
			}
			continue
		}
		rec, _, err := s.store.inner.Get(s.ctx, c.id)
		if err != nil {
			return err
		}
		switch rec.State {
		case ClaimReported:
		case ClaimGranted:
			if !c.unknown {
				return fmt.Errorf("command %s granted to %s, never reported, and not reported unknown", c.id, rec.Node)
			}
		default:
			return fmt.Errorf("command %s ended %q without an outcome", c.id, rec.State)
		}
	}
	return nil
}

func bsimSeedsToRun() []uint64 {
	if *bsimSeed != 0 {
		return []uint64{*bsimSeed}
	}
	seeds := make([]uint64, *bsimSeeds)
	base := uint64(time.Now().UnixNano())
	for i := range seeds {
		seeds[i] = base + uint64(i)*0x9e3779b97f4a7c15
	}
	return seeds
}

var bsimFaulty = bsimConfig{Loss: 0.1, Dup: 0.05, Kill: 0.01, Wipe: 0.1, StoreFault: 0.03}

// TestClaimSimulation: under every fault, over many seeds (fresh each run; a failure
// prints its seed and the command that replays it), no destructive operation reaches a
// BMC twice and every command ends with an outcome or "unknown".
func TestClaimSimulation(t *testing.T) {
	total, sent, cmds, unknown := 0, 0, 0, 0
	seeds := bsimSeedsToRun()
	for _, seed := range seeds {
		cfg := bsimFaulty
		cfg.Steps = *bsimSteps
		s := newBsim(cfg, seed)
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		if err := s.finalCheck(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s.kills == 0 || s.partitions == 0 || s.wipes == 0 || s.sent == 0 || s.lost == 0 {
			t.Errorf("seed %d exercised too little: %d kills, %d partitions, %d wipes, %d sent, %d lost",
				seed, s.kills, s.partitions, s.wipes, s.sent, s.lost)
		}
		reported := 0
		for _, c := range s.cmds {
			if rec, _, _ := s.store.inner.Get(s.ctx, c.id); rec.State == ClaimReported && rec.Outcome.Status == StatusUnknown {
				reported++
			}
		}
		total += s.steps
		sent += s.sent
		cmds += len(s.cmds)
		unknown += s.unknown + reported
		t.Logf("seed %d: %d steps, %v simulated, %d commands, %d destructive operations sent, %d queries, %d unknown, %d kills (%d wipes), %d partitions, %d messages lost, doubles %d",
			seed, s.steps, s.now.Round(time.Second), len(s.cmds), s.sent, s.queries, s.unknown+reported, s.kills, s.wipes, s.partitions, s.lost, s.doubles)
	}
	t.Logf("%d seeds x %d steps: %d steps, %d commands, %d destructive operations reached a BMC, %d ended unknown, 0 doubles",
		len(seeds), *bsimSteps, total, cmds, sent, unknown)
}

// TestClaimSimulationCatchesJournalOnly: the same simulation with the executors' claims
// switched off (each agent's journal alone) finds an operation sent twice: the check
// catches what the claim protocol prevents.
func TestClaimSimulationCatchesJournalOnly(t *testing.T) {
	caught := 0
	var first error
	seeds := bsimSeedsToRun()
	for _, seed := range seeds {
		cfg := bsimFaulty
		cfg.Steps = *bsimSteps
		cfg.NoClaims = true
		if err := newBsim(cfg, seed).run(); err != nil {
			caught++
			if first == nil {
				first = err
			}
		}
	}
	if caught == 0 {
		t.Fatalf("journal-only agents passed %d seeds: the simulation does not catch doubles", len(seeds))
	}
	t.Logf("journal-only agents caught in %d of %d seeds; the first:\n%v", caught, len(seeds), first)
}
