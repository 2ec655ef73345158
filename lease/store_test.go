package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/lease"
)

// testStore runs the Store contract against any store; the etcd store's tests run it too.
func testStore(t *testing.T, s lease.Store) {
	ctx := context.Background()
	rec, ver, err := s.Get(ctx, "s1")
	if err != nil || ver != 0 || rec != (lease.Record{Site: "s1"}) {
		t.Fatalf("Get of a missing site = %+v, %d, %v; want Record{Site: s1}, 0, nil", rec, ver, err)
	}
	r1 := lease.Record{Site: "s1", Holder: "a", Epoch: 1, Expires: t0.Add(15 * time.Second), TTL: 15 * time.Second, Beat: 42}
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
					Expires: t0, TTL: time.Second}
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

func TestMemoryStore(t *testing.T) {
	testStore(t, &lease.MemoryStore{})
}

func TestMemoryStoreRefusesAnotherSitesRecord(t *testing.T) {
	var s lease.MemoryStore
	_, err := s.CompareAndSwap(context.Background(), "s1", 0, lease.Record{Site: "s2", TTL: time.Second})
	if !errors.Is(err, lease.ErrBadRecord) {
		t.Fatalf("err %v, want ErrBadRecord", err)
	}
}

func TestMemoryStoreCanceled(t *testing.T) {
	var s lease.MemoryStore
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Get(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if _, err := s.CompareAndSwap(ctx, "s", 0, lease.Record{Site: "s", TTL: time.Second}); !errors.Is(err, context.Canceled) {
		t.Errorf("CAS: %v", err)
	}
}
