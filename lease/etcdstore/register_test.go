package etcdstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/bettercompute/siteboot/casreg"
	"github.com/bettercompute/siteboot/casreg/casregtest"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/internal/etcdpeer"
)

// These tests run against a real etcd: Debian's etcd-server (3.4), started on loopback.

func TestRegisterContract(t *testing.T) {
	p := etcdpeer.Start(t)
	casregtest.TestRegister(t, &etcdstore.Register{Client: p.Client, Prefix: "/contract/"}, "k/")
}

// TestRegisterVersionsAreModRevisions: a value's version is its key's mod revision, under
// Prefix; a missing key is version 0 though other keys exist.
func TestRegisterVersionsAreModRevisions(t *testing.T) {
	p := etcdpeer.Start(t)
	r := &etcdstore.Register{Client: p.Client, Prefix: "/p/"}
	ctx := context.Background()
	v, err := r.CompareAndSwap(ctx, "x", 0, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Client.Get(ctx, "/p/x")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v", err)
	}
	if got := resp.Kvs[0]; string(got.Value) != "one" || casreg.Version(got.ModRevision) != v {
		t.Errorf("etcd holds %q at mod revision %d; the register said version %d", got.Value, got.ModRevision, v)
	}
	// A write by anyone else to the key is a conflict for a writer holding v.
	if _, err := p.Client.Put(ctx, "/p/x", "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CompareAndSwap(ctx, "x", v, []byte("two")); !errors.Is(err, casreg.ErrConflict) {
		t.Errorf("CompareAndSwap after another write: %v, want ErrConflict", err)
	}
	if b, ver, err := r.Get(ctx, "y"); b != nil || ver != 0 || err != nil {
		t.Errorf("missing key: %q, %d, %v", b, ver, err)
	}
}

// TestRegisterWritersOnTwoClients: writers on two clients (two control-plane processes)
// race on one version: exactly one wins each round.
func TestRegisterWritersOnTwoClients(t *testing.T) {
	p := etcdpeer.Start(t)
	regs := []casreg.Register{&etcdstore.Register{Client: p.Client}, &etcdstore.Register{Client: p.NewClient(t)}}
	ctx := context.Background()
	var ver casreg.Version
	for round := range 10 {
		var mu sync.Mutex
		wins, from := 0, ver
		var wg sync.WaitGroup
		for i := range 6 {
			r := regs[i%2]
			wg.Go(func() {
				v, err := r.CompareAndSwap(ctx, "/race", from, []byte{byte(round), byte(i)})
				if err != nil && !errors.Is(err, casreg.ErrConflict) {
					t.Errorf("round %d: %v", round, err)
					return
				}
				if err == nil {
					mu.Lock()
					wins++
					ver = v
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d writers won; want exactly 1", round, wins)
		}
	}
}
