package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/lease"
)

func t0() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// TestStore checks that s keeps the Store contract: a missing site reads as version 0, a
// create and an update succeed only on the version read, a superseded version is a
// conflict, sites are independent, and of writers racing on one version exactly one wins.
// It writes the sites "s1", "s2" and "race", which must not exist yet.
func TestStore(t *testing.T, s lease.Store) {
	t.Helper()
	ctx := context.Background()
	rec, ver, err := s.Get(ctx, "s1")
	if err != nil || ver != 0 || rec != (lease.Record{Site: "s1"}) {
		t.Fatalf("Get of a missing site = %+v, %d, %v; want Record{Site: s1}, 0, nil", rec, ver, err)
	}
	r1 := lease.Record{Site: "s1", Holder: "a", Epoch: 1, Expires: t0().Add(15 * time.Second), TTL: 15 * time.Second, Beat: 42}
	v1, err := s.CompareAndSwap(ctx, "s1", 0, r1)
	if err != nil || v1 == 0 {
		t.Fatalf("create: %d, %v", v1, err)
	}
	if _, err := s.CompareAndSwap(ctx, "s1", 0, r1); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("second create: err %v, want ErrConflict", err)
	}
	got, gv, err := s.Get(ctx, "s1")
	if err != nil || gv != v1 {
		t.Fatalf("Get = %d, %v; want version %d", gv, err, v1)
	}
	if diff := cmp.Diff(r1, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	r2 := r1
	r2.Epoch, r2.Holder = 2, "b"
	if _, err := s.CompareAndSwap(ctx, "s1", v1+1000, r2); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("CAS on a wrong version: err %v, want ErrConflict", err)
	}
	v2, err := s.CompareAndSwap(ctx, "s1", v1, r2)
	if err != nil || v2 == v1 {
		t.Fatalf("CAS on the current version: %d, %v (old %d)", v2, err, v1)
	}
	if _, err := s.CompareAndSwap(ctx, "s1", v1, r1); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("CAS on a superseded version: err %v, want ErrConflict", err)
	}
	if got, _, _ := s.Get(ctx, "s1"); got.Holder != "b" || got.Epoch != 2 {
		t.Errorf("after the lost CAS the record is %+v, want b at 2", got)
	}
	if _, v, _ := s.Get(ctx, "s2"); v != 0 {
		t.Errorf("another site sees version %d", v)
	}

	// Racing writers on one version: exactly one wins each round.
	for round := range 20 {
		_, base, err := s.Get(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := lease.Record{Site: "race", Holder: string(rune('a' + w)), Epoch: uint64(round + 1),
					Expires: t0(), TTL: time.Second}
				_, err := s.CompareAndSwap(ctx, "race", base, r)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, lease.ErrConflict):
					conflicts.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != 3 {
			t.Fatalf("round %d: %d wins, %d conflicts; want 1 and 3", round, wins.Load(), conflicts.Load())
		}
	}
}

// NewClock returns a [clocktest.Fake] at 2026-03-01 12:00 UTC, monotonic reading 0: Advance
// moves the wall and the monotonic readings together and runs the timers that fall due, Set
// only the wall clock (a jump either way).
func NewClock() *clocktest.Fake { return clocktest.New(t0()) }

// Fleet is a lease.Fleet of Sites sites named site-0000, site-0001, ..., each with two
// connected agents (SITE-a, SITE-b).
func Fleet(sites int) lease.Fleet {
	m := &fleet{agents: make(map[string][]lease.Agent, sites)}
	for i := range sites {
		s := fmt.Sprintf("site-%04d", i)
		m.sites = append(m.sites, s)
		m.agents[s] = []lease.Agent{{Node: s + "-a", Site: s, Beat: 1}, {Node: s + "-b", Site: s, Beat: 1}}
	}
	return m
}

type fleet struct {
	sites  []string
	agents map[string][]lease.Agent
}

func (m *fleet) Sites(context.Context) ([]string, error) { return m.sites, nil }

func (m *fleet) Connected(_ context.Context, site string) ([]lease.Agent, error) {
	return m.agents[site], nil
}

// BenchmarkTickAll runs b.N passes of a Controller over a Fleet of sites on s, ticking
// parallel sites at once, after a first pass that acquires every lease: each measured tick is
// a renewal, so each writes. It reports site ticks per second, and fails unless every tick
// renewed. A host benchmarks its own Store with it.
func BenchmarkTickAll(b *testing.B, s lease.Store, sites, parallel int) {
	c := &lease.Controller{Store: s, Fleet: Fleet(sites), Parallel: parallel, Clock: NewClock()}
	ctx := context.Background()
	if err := c.TickAll(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := c.TickAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sites*b.N)/time.Since(start).Seconds(), "ticks/s")
	if st := c.Stats(); st.Changes[lease.Renewed] != uint64(sites*b.N) {
		b.Fatalf("%d renewals, want %d", st.Changes[lease.Renewed], sites*b.N)
	}
}
