package lease_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/lease"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestName(t *testing.T) {
	if got, want := lease.Name("site_01k5w"), "site:site_01k5w:boot"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
}

func TestTick(t *testing.T) {
	const ttl = 15 * time.Second
	held := func(holder string, epoch uint64, expires time.Time, beat uint64) lease.Record {
		return lease.Record{Site: "s1", Holder: holder, Epoch: epoch, Expires: expires, TTL: ttl, Beat: beat}
	}
	free := func(epoch uint64) lease.Record { return lease.Record{Site: "s1", Epoch: epoch, TTL: ttl} }
	ag := func(node string, beat uint64) lease.Agent { return lease.Agent{Node: node, Site: "s1", Beat: beat} }
	now := t0
	tests := []struct {
		name   string
		rec    lease.Record
		agents []lease.Agent
		now    time.Time
		want   lease.Decision
	}{{
		name: "never held, no agent: idle",
		rec:  lease.Record{Site: "s1"},
		now:  now,
		want: lease.Decision{Change: lease.Idle, Prev: lease.Record{Site: "s1"}, Next: lease.Record{Site: "s1"}},
	}, {
		name:   "never held: first agent by node id acquires at epoch 1",
		rec:    lease.Record{Site: "s1"},
		agents: []lease.Agent{ag("b", 7), ag("a", 3), ag("c", 9)},
		now:    now,
		want: lease.Decision{Change: lease.Acquired, Prev: lease.Record{Site: "s1"},
			Next: held("a", 1, now.Add(ttl), 3)},
	}, {
		name:   "released: acquired under the next epoch",
		rec:    free(4),
		agents: []lease.Agent{ag("b", 2)},
		now:    now,
		want:   lease.Decision{Change: lease.Acquired, Prev: free(4), Next: held("b", 5, now.Add(ttl), 2)},
	}, {
		name: "released, no agent: idle, epoch kept",
		rec:  free(4),
		now:  now,
		want: lease.Decision{Change: lease.Idle, Prev: free(4), Next: free(4)},
	}, {
		name:   "holder connected: renewed, same epoch, holder's latest beat",
		rec:    held("b", 3, now.Add(5*time.Second), 10),
		agents: []lease.Agent{ag("a", 1), ag("b", 11)},
		now:    now,
		want: lease.Decision{Change: lease.Renewed, Prev: held("b", 3, now.Add(5*time.Second), 10),
			Next: held("b", 3, now.Add(ttl), 11)},
	}, {
		name:   "holder connected after its lease lapsed: renewed, same epoch",
		rec:    held("b", 3, now.Add(-time.Minute), 10),
		agents: []lease.Agent{ag("a", 1), ag("b", 12)},
		now:    now,
		want: lease.Decision{Change: lease.Renewed, Prev: held("b", 3, now.Add(-time.Minute), 10),
			Next: held("b", 3, now.Add(ttl), 12)},
	}, {
		name:   "holder lost its session, lease live: kept although a standby waits",
		rec:    held("b", 3, now.Add(time.Nanosecond), 10),
		agents: []lease.Agent{ag("a", 1)},
		now:    now,
		want: lease.Decision{Change: lease.Kept, Prev: held("b", 3, now.Add(time.Nanosecond), 10),
			Next: held("b", 3, now.Add(time.Nanosecond), 10)},
	}, {
		name: "holder lost its session, lease live, no agent: kept",
		rec:  held("b", 3, now.Add(10*time.Second), 10),
		now:  now,
		want: lease.Decision{Change: lease.Kept, Prev: held("b", 3, now.Add(10*time.Second), 10),
			Next: held("b", 3, now.Add(10*time.Second), 10)},
	}, {
		name:   "holder gone, lapsed exactly now: first standby by id promoted under epoch+1",
		rec:    held("b", 3, now, 10),
		agents: []lease.Agent{ag("d", 4), ag("c", 5)},
		now:    now,
		want:   lease.Decision{Change: lease.Promoted, Prev: held("b", 3, now, 10), Next: held("c", 4, now.Add(ttl), 5)},
	}, {
		name: "holder gone, lapsed, no agent: released under epoch+1",
		rec:  held("b", 3, now.Add(-time.Second), 10),
		now:  now,
		want: lease.Decision{Change: lease.Released, Prev: held("b", 3, now.Add(-time.Second), 10), Next: free(4)},
	}, {
		name:   "agents of another site are never taken",
		rec:    held("b", 3, now.Add(-time.Second), 10),
		agents: []lease.Agent{{Node: "a", Site: "s2", Beat: 1}, {Node: "b", Site: "s2", Beat: 1}},
		now:    now,
		want:   lease.Decision{Change: lease.Released, Prev: held("b", 3, now.Add(-time.Second), 10), Next: free(4)},
	}, {
		name:   "an agent with no node id is ignored",
		rec:    lease.Record{Site: "s1"},
		agents: []lease.Agent{{Node: "", Site: "s1", Beat: 1}},
		now:    now,
		want:   lease.Decision{Change: lease.Idle, Prev: lease.Record{Site: "s1"}, Next: lease.Record{Site: "s1"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lease.Tick(tt.rec, tt.agents, tt.now, ttl)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tick (-want +got):\n%s", diff)
			}
			if got.Change.Writes() != (got.Next != got.Prev) {
				t.Errorf("Writes() = %v but Next != Prev is %v", got.Change.Writes(), got.Next != got.Prev)
			}
			// Order of the agents never matters.
			rev := slices.Clone(tt.agents)
			slices.Reverse(rev)
			if diff := cmp.Diff(got, lease.Tick(tt.rec, rev, tt.now, ttl)); diff != "" {
				t.Errorf("Tick depends on the order of agents (-fwd +rev):\n%s", diff)
			}
		})
	}
}

func TestTickDefaultTTL(t *testing.T) {
	d := lease.Tick(lease.Record{Site: "s"}, []lease.Agent{{Node: "a", Site: "s", Beat: 1}}, t0, 0)
	if d.Next.TTL != lease.DefaultTTL || !d.Next.Expires.Equal(t0.Add(lease.DefaultTTL)) {
		t.Errorf("zero ttl: got TTL %v expires %v, want %v", d.Next.TTL, d.Next.Expires, lease.DefaultTTL)
	}
}

// TestTickProperties checks, over random inputs, what holds of every tick: a live lease
// never changes hands, the epoch moves on exactly when the holder changes or the lease is
// released, and the epoch never goes back.
func TestTickProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	nodes := []string{"a", "b", "c", "d"}
	for i := range 20000 {
		rec := lease.Record{Site: "s", Epoch: uint64(r.IntN(5)), TTL: 15 * time.Second}
		if r.IntN(3) > 0 && rec.Epoch > 0 {
			rec.Holder = nodes[r.IntN(len(nodes))]
			rec.Expires = t0.Add(time.Duration(r.IntN(40)-20) * time.Second)
			rec.Beat = r.Uint64()
		}
		var agents []lease.Agent
		for _, n := range nodes {
			if r.IntN(2) == 0 {
				site := "s"
				if r.IntN(5) == 0 {
					site = "other"
				}
				agents = append(agents, lease.Agent{Node: n, Site: site, Beat: r.Uint64()})
			}
		}
		d := lease.Tick(rec, agents, t0, 15*time.Second)
		fail := func(msg string) {
			t.Fatalf("seed %d step %d: %s\nrecord %+v\nagents %+v\ndecision %+v", seed, i, msg, rec, agents, d)
		}
		if rec.Held(t0) && d.Next.Holder != rec.Holder {
			fail("a live lease changed hands")
		}
		if d.Next.Epoch < rec.Epoch {
			fail("epoch went back")
		}
		changed := d.Next.Holder != rec.Holder || (rec.Holder != "" && d.Change == lease.Released)
		if changed != (d.Next.Epoch == rec.Epoch+1) || (!changed && d.Next.Epoch != rec.Epoch) {
			fail("epoch moved without a change of holder, or the holder changed under the same epoch")
		}
		if d.Next.Holder != "" {
			found := false
			for _, a := range agents {
				found = found || (a.Node == d.Next.Holder && a.Site == "s")
			}
			if !found && d.Next.Holder != rec.Holder {
				fail("lease given to an agent not connected to this site")
			}
		}
	}
}

func TestChangeString(t *testing.T) {
	var got []string
	for c := lease.Idle; c <= lease.Released+1; c++ {
		got = append(got, fmt.Sprint(c))
	}
	want := []string{"idle", "acquired", "renewed", "kept", "promoted", "released", "change(6)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
