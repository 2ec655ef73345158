package casreg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/casreg"
	"github.com/bettercompute/siteboot/casreg/casregtest"
)

func TestMemory(t *testing.T) {
	var m casreg.Memory
	casregtest.TestRegister(t, &m, "/t/")
	if m.Len() != 4 { // a, b, own, race
		t.Errorf("Len = %d, want 4", m.Len())
	}
}

func TestMemoryCanceled(t *testing.T) {
	var m casreg.Memory
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.CompareAndSwap(ctx, "k", 0, []byte("v")); !errors.Is(err, context.Canceled) {
		t.Errorf("CompareAndSwap: %v", err)
	}
	if _, _, err := m.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if m.Len() != 0 {
		t.Error("a canceled write was stored")
	}
}
