package imagecache_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/lease"
)

// The lease's fence is an imagecache.Fence as it is.
var _ imagecache.Fence = (*lease.Fence)(nil)

// boolFence is a Fence of the shape every package takes, at epoch 9, active while b is
// true.
type boolFence struct{ b *atomic.Bool }

func (f boolFence) Active() (uint64, bool) { return 9, f.b.Load() }

// TestFenceFuncAdapter: the adapter reports the function's epoch and answer.
func TestFenceFuncAdapter(t *testing.T) {
	for _, want := range []bool{false, true} {
		epoch, active := imagecache.FenceFunc(func() (uint64, bool) { return 4, want }).Active()
		if epoch != 4 || active != want {
			t.Errorf("FenceFunc(4, %v).Active() = (%d, %v), want (4, %v)", want, epoch, active, want)
		}
	}
}

// TestLeaseFenceGatesBootGrants: a lease.Fence that never saw its lease keeps boot grants
// fenced.
func TestLeaseFenceGatesBootGrants(t *testing.T) {
	f := newGrantFixture(t)
	f.fence.Store(true)
	g, err := f.c.BootGrant(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if w := f.get("GET", g.Path(f.img1.SHA256)); w.Code != 200 {
		t.Fatalf("active: GET = %d, want 200", w.Code)
	}
	f.fence.Store(false)
	if w := f.get("GET", g.Path(f.img1.SHA256)); w.Code != 503 {
		t.Fatalf("inactive: GET = %d, want 503", w.Code)
	}

	cfg := fastConfig(t)
	cfg.Fence = &lease.Fence{} // has never observed a lease: inactive
	c := open(t, cfg)
	if _, active := cfg.Fence.Active(); active {
		t.Fatal("a fresh lease.Fence is active")
	}
	if err := c.Pull(t.Context(), f.img1); err != nil {
		t.Fatal(err)
	}
	g, err = c.BootGrant(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenGranted(t.Context(), g.Token, f.img1.SHA256); err == nil || imagecache.ReasonOf(err) != "fenced" {
		t.Errorf("OpenGranted under a fresh lease.Fence = %v (reason %q), want fenced", err, imagecache.ReasonOf(err))
	}
}
