package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/lease"
)

// fleet is a Fleet whose agents tests connect and disconnect by hand.
type fleet struct {
	mu     sync.Mutex
	sites  []string
	agents map[string]lease.Agent // by node
	err    error
}

func newFleet(sites ...string) *fleet {
	return &fleet{sites: sites, agents: map[string]lease.Agent{}}
}

func (f *fleet) connect(node, site string, beat uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents[node] = lease.Agent{Node: node, Site: site, Beat: beat}
}

func (f *fleet) disconnect(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.agents, node)
}

func (f *fleet) Sites(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sites), f.err
}

func (f *fleet) Connected(_ context.Context, site string) ([]lease.Agent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []lease.Agent
	for _, a := range f.agents {
		if a.Site == site {
			out = append(out, a)
		}
	}
	return out, f.err
}

type tickResult struct {
	At     time.Duration
	Change lease.Change
	Holder string
	Epoch  uint64
}

// TestControllerFailover: the holder's session ends; the lease is kept to its expiry, then
// the first standby by id is promoted under a new epoch; with no agent left it is released
// and the epoch still moves on.
func TestControllerFailover(t *testing.T) {
	clock := newFakeClock()
	fl := newFleet("s1")
	c := &lease.Controller{Store: &lease.MemoryStore{}, Fleet: fl, Clock: clock}
	ctx := context.Background()
	fl.connect("b", "s1", 1)
	fl.connect("c", "s1", 1)
	var got []tickResult
	step := func() {
		d, err := c.TickSite(ctx, "s1")
		if err != nil {
			t.Fatalf("at %v: %v", clock.Monotonic(), err)
		}
		got = append(got, tickResult{clock.Monotonic(), d.Change, d.Next.Holder, d.Next.Epoch})
		clock.Advance(5 * time.Second)
	}
	step()                   // 0 s: b acquires at epoch 1
	fl.connect("a", "s1", 1) // a arrives later: lower id, but the lease is live
	step()                   // 5 s: renewed
	fl.disconnect("b")       // b lost its session; last renewal at 5 s, expires at 20 s
	step()                   // 10 s: kept
	step()                   // 15 s: kept
	step()                   // 20 s: lapsed, a promoted at epoch 2
	fl.disconnect("a")
	fl.disconnect("c")
	step() // 25 s: kept
	step() // 30 s: kept
	step() // 35 s: released at epoch 3
	step() // 40 s: idle
	fl.connect("c", "s1", 5)
	step() // 45 s: c acquires at epoch 4
	want := []tickResult{
		{0, lease.Acquired, "b", 1},
		{5 * time.Second, lease.Renewed, "b", 1},
		{10 * time.Second, lease.Kept, "b", 1},
		{15 * time.Second, lease.Kept, "b", 1},
		{20 * time.Second, lease.Promoted, "a", 2},
		{25 * time.Second, lease.Kept, "a", 2},
		{30 * time.Second, lease.Kept, "a", 2},
		{35 * time.Second, lease.Released, "", 3},
		{40 * time.Second, lease.Idle, "", 3},
		{45 * time.Second, lease.Acquired, "c", 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	st := c.Stats()
	wantStats := lease.Stats{Ticks: 10, Writes: 5}
	wantStats.Changes = [6]uint64{1, 2, 1, 4, 1, 1}
	if diff := cmp.Diff(wantStats, st); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

// TestControllerWallClockJump: a wall clock that jumps forward makes the record look lapsed
// early, but the controller takes the lease only after watching it a full TTL on its
// monotonic clock.
func TestControllerWallClockJump(t *testing.T) {
	clock := newFakeClock()
	fl := newFleet("s1")
	c := &lease.Controller{Store: &lease.MemoryStore{}, Fleet: fl, Clock: clock}
	ctx := context.Background()
	fl.connect("b", "s1", 1)
	if d, err := c.TickSite(ctx, "s1"); err != nil || d.Change != lease.Acquired {
		t.Fatalf("acquire: %+v %v", d, err)
	}
	fl.disconnect("b")
	fl.connect("c", "s1", 1)
	clock.Set(clock.Now().Add(time.Hour))
	var got []tickResult
	for range 4 {
		clock.Advance(5 * time.Second)
		d, err := c.TickSite(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tickResult{clock.Monotonic(), d.Change, d.Next.Holder, d.Next.Epoch})
	}
	want := []tickResult{
		{5 * time.Second, lease.Kept, "b", 1},
		{10 * time.Second, lease.Kept, "b", 1},
		{15 * time.Second, lease.Promoted, "c", 2},
		{20 * time.Second, lease.Renewed, "c", 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if st := c.Stats(); st.Deferred != 2 {
		t.Errorf("Deferred = %d, want 2", st.Deferred)
	}
}

// TestControllerNewcomerWaits: a controller that never saw the record (restarted, or a
// second one) waits a full TTL from its first sight before taking a lapsed lease.
func TestControllerNewcomerWaits(t *testing.T) {
	clock := newFakeClock()
	var store lease.MemoryStore
	ctx := context.Background()
	if _, err := store.CompareAndSwap(ctx, "s1", 0, lease.Record{Site: "s1", Holder: "old", Epoch: 9,
		Expires: clock.Now().Add(-time.Hour), TTL: 15 * time.Second, Beat: 3}); err != nil {
		t.Fatal(err)
	}
	fl := newFleet("s1")
	fl.connect("a", "s1", 1)
	c := &lease.Controller{Store: &store, Fleet: fl, Clock: clock}
	var changes []lease.Change
	for range 5 {
		d, err := c.TickSite(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, d.Change)
		clock.Advance(5 * time.Second)
	}
	want := []lease.Change{lease.Kept, lease.Kept, lease.Kept, lease.Promoted, lease.Renewed}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// barrierStore holds every Get until n of them are waiting, so that n controllers read the
// same version before any of them writes.
type barrierStore struct {
	lease.Store
	n    int
	mu   sync.Mutex
	wait []chan struct{}
}

func (b *barrierStore) Get(ctx context.Context, site string) (lease.Record, lease.Version, error) {
	rec, ver, err := b.Store.Get(ctx, site)
	ch := make(chan struct{})
	b.mu.Lock()
	b.wait = append(b.wait, ch)
	if len(b.wait) == b.n {
		for _, c := range b.wait {
			close(c)
		}
		b.wait = nil
	}
	b.mu.Unlock()
	<-ch
	return rec, ver, err
}

// TestControllersRacing: two controllers read the same version of one lease each round and
// both try to write it: exactly one wins each round, the other gets ErrConflict.
func TestControllersRacing(t *testing.T) {
	clock := newFakeClock()
	store := &barrierStore{Store: &lease.MemoryStore{}, n: 2}
	fl := newFleet("s1")
	fl.connect("a", "s1", 1)
	c1 := &lease.Controller{Store: store, Fleet: fl, Clock: clock}
	c2 := &lease.Controller{Store: store, Fleet: fl, Clock: clock}
	ctx := context.Background()
	for round := range 50 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*lease.Controller{c1, c2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.TickSite(ctx, "s1")
			}()
		}
		wg.Wait()
		wins, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, lease.ErrConflict):
				conflicts++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d wins, %d conflicts; want 1 and 1", round, wins, conflicts)
		}
		clock.Advance(time.Second)
	}
	s1, s2 := c1.Stats(), c2.Stats()
	if s1.Writes+s2.Writes != 50 || s1.Conflicts+s2.Conflicts != 50 {
		t.Errorf("writes %d+%d, conflicts %d+%d: want 50 and 50", s1.Writes, s2.Writes, s1.Conflicts, s2.Conflicts)
	}
	rec, _, _ := store.Store.Get(ctx, "s1")
	if rec.Holder != "a" || rec.Epoch != 1 {
		t.Errorf("record %+v: want a at epoch 1", rec)
	}
}

type failingStore struct{ lease.MemoryStore }

var _ lease.Store = (*failingStore)(nil)

var errDown = errors.New("store down")

func (*failingStore) Get(context.Context, string) (lease.Record, lease.Version, error) {
	return lease.Record{}, 0, errDown
}

func TestControllerErrors(t *testing.T) {
	fl := newFleet("s1", "s2")
	c := &lease.Controller{Store: &failingStore{}, Fleet: fl, Clock: newFakeClock()}
	err := c.TickAll(context.Background())
	var oe *lease.OpError
	if !errors.Is(err, errDown) || !errors.As(err, &oe) || oe.Op != "get" {
		t.Fatalf("TickAll = %v, want a get OpError wrapping the store's error", err)
	}
	if st := c.Stats(); st.Errors != 2 || st.Ticks != 2 {
		t.Errorf("Stats = %+v, want 2 ticks, 2 errors", st)
	}
	fl.err = errors.New("fleet down")
	c2 := &lease.Controller{Store: &lease.MemoryStore{}, Fleet: fl}
	if err := c2.TickAll(context.Background()); err == nil || !errors.Is(err, fl.err) {
		t.Errorf("TickAll with a failing fleet = %v", err)
	}
}

func TestControllerValidate(t *testing.T) {
	ok := func() *lease.Controller { return &lease.Controller{Store: &lease.MemoryStore{}, Fleet: newFleet()} }
	if err := ok().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mut := range map[string]func(*lease.Controller){
		"no store":             func(c *lease.Controller) { c.Store = nil },
		"no fleet":             func(c *lease.Controller) { c.Fleet = nil },
		"negative TTL":         func(c *lease.Controller) { c.TTL = -time.Second },
		"sub-millisecond TTL":  func(c *lease.Controller) { c.TTL = 15*time.Second + 1 },
		"interval beyond TTL":  func(c *lease.Controller) { c.Interval = 20 * time.Second },
		"negative parallelism": func(c *lease.Controller) { c.Parallel = -1 },
	} {
		c := ok()
		mut(c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate passed", name)
		}
		if err := c.Run(context.Background()); err == nil {
			t.Errorf("%s: Run started", name)
		}
	}
}

// TestControllerRun runs the loop on synctest's fake time: a pass at once and one every
// Interval, OnDecision after each, and Run returns nil once ctx is done, leaving no
// goroutine behind.
func TestControllerRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		fl := newFleet("s1", "s2")
		fl.connect("a", "s1", 1)
		var mu sync.Mutex
		var seen []string
		start := time.Now()
		c := &lease.Controller{Store: &lease.MemoryStore{}, Fleet: fl, Parallel: 1,
			OnDecision: func(_ context.Context, d lease.Decision) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, time.Since(start).String()+" "+d.Prev.Site+" "+d.Change.String())
			}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		time.Sleep(11 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		want := []string{"0s s1 acquired", "5s s1 renewed", "10s s1 renewed"}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("decisions (-want +got):\n%s", diff)
		}
		if st := c.Stats(); st.Ticks != 6 || st.Changes[lease.Idle] != 3 {
			t.Errorf("Stats = %+v, want 6 ticks of which 3 idle (s2)", st)
		}
	})
}

// TestControllerForgetsRemovedSites: a site dropped from the fleet and listed again is
// watched afresh: the controller waits a full TTL again before taking its lapsed lease.
func TestControllerForgetsRemovedSites(t *testing.T) {
	clock := newFakeClock()
	var store lease.MemoryStore
	ctx := context.Background()
	if _, err := store.CompareAndSwap(ctx, "s1", 0, lease.Record{Site: "s1", Holder: "old", Epoch: 1,
		Expires: clock.Now().Add(-time.Hour), TTL: 15 * time.Second}); err != nil {
		t.Fatal(err)
	}
	fl := newFleet("s1", "s2")
	fl.connect("a", "s1", 1)
	c := &lease.Controller{Store: &store, Fleet: fl, Clock: clock, Parallel: 2}
	for range 3 { // watched 0, 5, 10 s
		if err := c.TickAll(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Second)
	}
	fl.mu.Lock()
	fl.sites = []string{"s2"}
	fl.mu.Unlock()
	if err := c.TickAll(ctx); err != nil {
		t.Fatal(err)
	}
	fl.mu.Lock()
	fl.sites = []string{"s1", "s2"}
	fl.mu.Unlock()
	var changes []lease.Change
	for range 4 {
		d, err := c.TickSite(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, d.Change)
		clock.Advance(5 * time.Second)
	}
	want := []lease.Change{lease.Kept, lease.Kept, lease.Kept, lease.Promoted}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
