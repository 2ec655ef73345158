package ipxe_test

import (
	"testing"

	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/lease"
)

// The lease's fence is an ipxe.Fence as it is.
var _ ipxe.Fence = (*lease.Fence)(nil)

func TestFenceFunc(t *testing.T) {
	for _, want := range []struct {
		epoch  uint64
		active bool
	}{{0, false}, {7, true}, {8, false}} {
		epoch, active := ipxe.FenceFunc(func() (uint64, bool) { return want.epoch, want.active }).Active()
		if epoch != want.epoch || active != want.active {
			t.Errorf("FenceFunc.Active() = (%d, %v), want (%d, %v)", epoch, active, want.epoch, want.active)
		}
	}
	var f lease.Fence
	if epoch, active := ipxe.Fence(&f).Active(); epoch != 0 || active {
		t.Errorf("a lease.Fence that saw no lease: (%d, %v), want (0, false)", epoch, active)
	}
}
