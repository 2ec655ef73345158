package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

func TestMemoryStore(t *testing.T) {
	leasetest.TestStore(t, &lease.MemoryStore{})
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
