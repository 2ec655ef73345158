package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/lease/etcdstore"
	"github.com/bettercompute/siteboot/lease/etcdstore/internal/etcdpeer"
)

// These tests run against a real etcd: Debian's etcd-server (3.4), started on loopback.

func TestClaimStoreCompareAndSwap(t *testing.T) {
	c := etcdpeer.Start(t).Client
	s := &bmc.RegisterClaimStore{Register: &etcdstore.Register{Client: c}}
	ctx := context.Background()
	if got, want := s.Key("cmd-1"), "/siteboot/bmc-claims/cmd-1"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	rec, ver, err := s.Get(ctx, "cmd-1")
	if err != nil || ver != 0 || rec.ID != "cmd-1" || rec.State != bmc.ClaimNone {
		t.Fatalf("Get of a missing record = %+v, %d, %v", rec, ver, err)
	}
	issued := bmc.ClaimRecord{ID: "cmd-1", Op: "power", State: bmc.ClaimIssued, Node: "agent-a"}
	v1, err := s.CompareAndSwap(ctx, "cmd-1", 0, issued)
	if err != nil || v1 == 0 {
		t.Fatalf("create: %d, %v", v1, err)
	}
	// A second create, and a write from a stale version, change nothing.
	if _, err := s.CompareAndSwap(ctx, "cmd-1", 0, issued); !errors.Is(err, bmc.ErrClaimConflict) {
		t.Errorf("second create: %v, want ErrClaimConflict", err)
	}
	granted := issued
	granted.State, granted.Journal = bmc.ClaimGranted, "j-1"
	v2, err := s.CompareAndSwap(ctx, "cmd-1", v1, granted)
	if err != nil || v2 <= v1 {
		t.Fatalf("update: %d, %v", v2, err)
	}
	if _, err := s.CompareAndSwap(ctx, "cmd-1", v1, issued); !errors.Is(err, bmc.ErrClaimConflict) {
		t.Errorf("stale update: %v, want ErrClaimConflict", err)
	}
	got, ver, err := s.Get(ctx, "cmd-1")
	if err != nil || ver != v2 {
		t.Fatalf("Get = %d, %v; want version %d", ver, err, v2)
	}
	if diff := cmp.Diff(granted, got); diff != "" {
		t.Errorf("stored record (-want +got):\n%s", diff)
	}
	// What is in etcd is EncodeClaim's form.
	resp, err := c.Get(ctx, s.Key("cmd-1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v", err)
	}
	if r, err := bmc.ParseClaim(resp.Kvs[0].Value); err != nil || r.Journal != "j-1" {
		t.Errorf("stored value %s parses to %+v, %v", resp.Kvs[0].Value, r, err)
	}

	for name, val := range map[string]string{
		"garbage":   "not a record",
		"other id":  `{"v":1,"id":"cmd-2","op":"power","state":"issued","node":"a"}`,
		"bad state": `{"v":1,"id":"bad","op":"power","state":"sent","node":"a"}`,
	} {
		if _, err := c.Put(ctx, s.Key("bad"), val); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Get(ctx, "bad"); !errors.Is(err, bmc.ErrBadClaim) {
			t.Errorf("%s: Get = %v, want ErrBadClaim", name, err)
		}
	}
	if _, err := s.CompareAndSwap(ctx, "cmd-3", 0, issued); !errors.Is(err, bmc.ErrBadClaim) {
		t.Errorf("CAS of another id's record: %v", err)
	}
	if _, err := s.CompareAndSwap(ctx, "cmd-3", 0, bmc.ClaimRecord{ID: "cmd-3", State: bmc.ClaimIssued}); !errors.Is(err, bmc.ErrBadClaim) {
		t.Errorf("CAS of an invalid record: %v", err)
	}
}

// TestClaimRegistryOnEtcd runs the claim protocol on etcd from two control-plane processes
// (two clients, two registries): every id is granted to exactly one of the agents that race
// for it, and after a failover a reported outcome is reused and a claimed-but-unreported
// one is "unknown".
func TestClaimRegistryOnEtcd(t *testing.T) {
	p := etcdpeer.Start(t)
	regs := []*bmc.ClaimRegistry{
		{Store: &bmc.RegisterClaimStore{Register: &etcdstore.Register{Client: p.Client}, Prefix: "/race/"}},
		{Store: &bmc.RegisterClaimStore{Register: &etcdstore.Register{Client: p.NewClient(t)}, Prefix: "/race/"}},
	}
	ctx := context.Background()
	const ids = 20
	var mu sync.Mutex
	grants := map[string][]string{}
	var wg sync.WaitGroup
	for i, node := range []string{"agent-a", "agent-b", "agent-c", "agent-d"} {
		reg := regs[i%2]
		wg.Go(func() {
			for n := range ids {
				id := fmt.Sprintf("cmd-%d", n)
				g, err := reg.Claim(ctx, node, bmc.ClaimRequest{ID: id, Op: "power", Journal: "j-" + node})
				if err != nil {
					t.Errorf("%s claims %s: %v", node, id, err)
					return
				}
				if g.Granted {
					mu.Lock()
					grants[id] = append(grants[id], node)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(grants) != ids {
		t.Errorf("%d of %d ids granted", len(grants), ids)
	}
	for id, nodes := range grants {
		if len(nodes) != 1 {
			t.Errorf("%s granted to %v", id, nodes)
		}
	}

	// A failover: agent-a ran cmd-r and reported; it claimed cmd-u and died; cmd-n it never
	// saw. The standby is routed all three.
	reg := regs[0]
	for _, id := range []string{"cmd-r", "cmd-u", "cmd-n"} {
		if d, err := reg.Route(ctx, id, "power", "agent-a"); err != nil || d.Action != bmc.RouteSend {
			t.Fatalf("route %s to agent-a: %+v, %v", id, d, err)
		}
	}
	for _, id := range []string{"cmd-r", "cmd-u"} {
		if g, err := reg.Claim(ctx, "agent-a", bmc.ClaimRequest{ID: id, Op: "power", Journal: "j-a"}); err != nil || !g.Granted {
			t.Fatalf("claim %s: %+v, %v", id, g, err)
		}
	}
	if err := reg.Report(ctx, "agent-a", bmc.ClaimRequest{ID: "cmd-r", Op: "power", Journal: "j-a"}, bmc.Outcome{Status: bmc.StatusOK}); err != nil {
		t.Fatal(err)
	}
	other := regs[1]
	got := map[string]bmc.RouteAction{}
	for _, id := range []string{"cmd-r", "cmd-u", "cmd-n"} {
		d, err := other.Route(ctx, id, "power", "agent-b")
		if err != nil {
			t.Fatal(err)
		}
		got[id] = d.Action
	}
	want := map[string]bmc.RouteAction{"cmd-r": bmc.RouteReuse, "cmd-u": bmc.RouteUnknown, "cmd-n": bmc.RouteSend}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes after the failover (-want +got):\n%s", diff)
	}
	if g, err := other.Claim(ctx, "agent-b", bmc.ClaimRequest{ID: "cmd-u", Op: "power", Journal: "j-b"}); err != nil || g.Granted {
		t.Errorf("agent-b claims the command agent-a claimed: %+v, %v", g, err)
	}
}
