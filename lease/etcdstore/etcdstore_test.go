package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/internal/etcdpeer"
	"github.com/bettercompute/siteboot/lease/leasetest"
)

// These tests run against a real etcd: Debian's etcd-server (3.4), started on loopback.

func TestStoreContract(t *testing.T) {
	c := etcdpeer.Start(t).Client
	leasetest.TestStore(t, &lease.RegisterStore{Register: &etcdstore.Register{Client: c}, Prefix: "/contract/"})
}

func TestStoreKeyAndBadRecords(t *testing.T) {
	c := etcdpeer.Start(t).Client
	s := &lease.RegisterStore{Register: &etcdstore.Register{Client: c}}
	ctx := context.Background()
	if got, want := s.Key("s1"), "/siteboot/lease/site:s1:boot"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	rec := lease.Record{Site: "s1", Holder: "a", Epoch: 1, Expires: time.Now().Add(time.Minute), TTL: 15 * time.Second, Beat: 7}
	if _, err := s.CompareAndSwap(ctx, "s1", 0, rec); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, s.Key("s1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v", err)
	}
	if got, err := lease.ParseRecord(resp.Kvs[0].Value); err != nil || got.Holder != "a" || got.Beat != 7 {
		t.Errorf("stored value %s parses to %+v, %v", resp.Kvs[0].Value, got, err)
	}
	for name, val := range map[string]string{
		"garbage":      "not a record",
		"another site": `{"v":1,"site":"s2","epoch":1,"ttl_ms":15000}`,
	} {
		if _, err := c.Put(ctx, s.Key("bad"), val); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Get(ctx, "bad"); !errors.Is(err, lease.ErrBadRecord) {
			t.Errorf("%s: Get = %v, want ErrBadRecord", name, err)
		}
	}
	if _, err := s.CompareAndSwap(ctx, "s1", 0, lease.Record{Site: "s2", TTL: time.Second}); !errors.Is(err, lease.ErrBadRecord) {
		t.Errorf("CAS of another site's record: %v", err)
	}
	if _, err := s.CompareAndSwap(ctx, "s3", 0, lease.Record{Site: "s3"}); !errors.Is(err, lease.ErrBadRecord) {
		t.Errorf("CAS of an invalid record: %v", err)
	}
}

// staticFleet: every site has the agents listed for it.
type staticFleet struct {
	sites  []string
	agents map[string][]lease.Agent
}

func (f staticFleet) Sites(context.Context) ([]string, error) { return f.sites, nil }

func (f staticFleet) Connected(_ context.Context, site string) ([]lease.Agent, error) {
	return f.agents[site], nil
}

// barrier holds each Get until both controllers have read, so they race on one version.
type barrier struct {
	mu   sync.Mutex
	wait []chan struct{}
}

type barrierStore struct {
	lease.Store
	b *barrier
}

func (bs barrierStore) Get(ctx context.Context, site string) (lease.Record, lease.Version, error) {
	rec, ver, err := bs.Store.Get(ctx, site)
	b := bs.b
	ch := make(chan struct{})
	b.mu.Lock()
	b.wait = append(b.wait, ch)
	if len(b.wait) == 2 {
		for _, c := range b.wait {
			close(c)
		}
		b.wait = nil
	}
	b.mu.Unlock()
	<-ch
	return rec, ver, err
}

// TestControllersRacingOnEtcd: two controllers, each with its own etcd client, read the same
// version of one lease every round and both write: exactly one wins each round. Along the
// way the holder disconnects, and the standby is promoted under a new epoch exactly once.
func TestControllersRacingOnEtcd(t *testing.T) {
	peer := etcdpeer.Start(t)
	s1 := &lease.RegisterStore{Register: &etcdstore.Register{Client: peer.Client}}
	s2 := &lease.RegisterStore{Register: &etcdstore.Register{Client: peer.NewClient(t)}}
	clock := leasetest.NewClock()
	fl := staticFleet{sites: []string{"s1"}, agents: map[string][]lease.Agent{
		"s1": {{Node: "a", Site: "s1", Beat: 1}, {Node: "b", Site: "s1", Beat: 1}}}}
	b := &barrier{}
	ctls := []*lease.Controller{
		{Store: barrierStore{s1, b}, Fleet: fl, Clock: clock},
		{Store: barrierStore{s2, b}, Fleet: fl, Clock: clock},
	}
	ctx := context.Background()
	var epochs []uint64
	for round := range 30 {
		if round == 10 { // a loses its session; b is promoted once the lease lapses
			fl.agents["s1"] = []lease.Agent{{Node: "b", Site: "s1", Beat: 2}}
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		decs := make([]lease.Decision, 2)
		for i, c := range ctls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				decs[i], errs[i] = c.TickSite(ctx, "s1")
			}()
		}
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil && decs[i].Change.Writes():
				wins++
			case err == nil: // kept: neither writes
			case errors.Is(err, lease.ErrConflict):
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		writes := decs[0].Change.Writes() || decs[1].Change.Writes()
		if writes && wins != 1 {
			t.Fatalf("round %d: %d writes won (%v / %v, errors %v / %v); want exactly 1",
				round, wins, decs[0].Change, decs[1].Change, errs[0], errs[1])
		}
		rec, _, err := s1.Get(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(epochs) == 0 || epochs[len(epochs)-1] != rec.Epoch {
			epochs = append(epochs, rec.Epoch)
		}
		clock.Advance(5 * time.Second)
	}
	rec, _, _ := s1.Get(ctx, "s1")
	if rec.Holder != "b" || rec.Epoch != 2 || fmt.Sprint(epochs) != "[1 2]" {
		t.Errorf("final %v, epochs %v; want b at epoch 2 after [1 2]", rec, epochs)
	}
	st0, st1 := ctls[0].Stats(), ctls[1].Stats()
	if st0.Conflicts+st1.Conflicts == 0 {
		t.Error("no conflicts counted")
	}
	t.Logf("writes %d/%d, conflicts %d/%d", st0.Writes, st1.Writes, st0.Conflicts, st1.Conflicts)
}
