package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/lease"
)

func TestRecordCheck(t *testing.T) {
	rec := lease.Record{Site: "s1", Holder: "a", Epoch: 5, Expires: t0.Add(10 * time.Second), TTL: 15 * time.Second}
	tests := []struct {
		name  string
		rec   lease.Record
		node  string
		epoch uint64
		now   time.Time
		want  error
	}{
		{"holder at the current epoch", rec, "a", 5, t0, nil},
		{"old epoch after failover", rec, "a", 4, t0, lease.ErrStaleEpoch},
		{"future epoch", rec, "a", 6, t0, lease.ErrStaleEpoch},
		{"epoch zero", lease.Record{Site: "s1"}, "a", 0, t0, lease.ErrStaleEpoch},
		{"another agent at the current epoch", rec, "b", 5, t0, lease.ErrNotHolder},
		{"released lease at its epoch", lease.Record{Site: "s1", Epoch: 5, TTL: time.Second}, "a", 5, t0, lease.ErrNotHolder},
		{"lapsed", rec, "a", 5, t0.Add(10 * time.Second), lease.ErrLapsed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rec.Check(tt.node, tt.epoch, tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
			if err != nil {
				var ce *lease.CheckError
				if !errors.As(err, &ce) || ce.Current != tt.rec.Epoch || ce.Epoch != tt.epoch || ce.Node != tt.node || ce.Holder != tt.rec.Holder {
					t.Errorf("CheckError = %+v", ce)
				}
			}
		})
	}
}

func TestChecker(t *testing.T) {
	var s lease.MemoryStore
	ctx := context.Background()
	clock := newFakeClock()
	if _, err := s.CompareAndSwap(ctx, "s1", 0, lease.Record{Site: "s1", Holder: "a", Epoch: 3,
		Expires: clock.Now().Add(15 * time.Second), TTL: 15 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c := &lease.Checker{Store: &s, Clock: clock}
	if err := c.CheckEpoch(ctx, "s1", "a", 3); err != nil {
		t.Errorf("holder at the current epoch refused: %v", err)
	}
	if err := c.CheckEpoch(ctx, "s1", "a", 2); !errors.Is(err, lease.ErrStaleEpoch) {
		t.Errorf("old epoch: %v", err)
	}
	if err := c.CheckEpoch(ctx, "s2", "a", 3); !errors.Is(err, lease.ErrStaleEpoch) {
		t.Errorf("another site's lease: %v", err)
	}
	clock.Advance(15 * time.Second)
	if err := c.CheckEpoch(ctx, "s1", "a", 3); !errors.Is(err, lease.ErrLapsed) {
		t.Errorf("lapsed: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.CheckEpoch(cctx, "s1", "a", 3); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestPickAgent(t *testing.T) {
	ag := func(node, site string) lease.Agent { return lease.Agent{Node: node, Site: site} }
	rec := lease.Record{Site: "s1", Holder: "c", Epoch: 2}
	tests := []struct {
		name      string
		site      string
		rec       lease.Record
		connected []lease.Agent
		want      string
	}{
		{"holder connected", "s1", rec, []lease.Agent{ag("a", "s1"), ag("c", "s1")}, "c"},
		{"holder away: first by id", "s1", rec, []lease.Agent{ag("d", "s1"), ag("b", "s1")}, "b"},
		{"never another site's agent", "s1", rec, []lease.Agent{ag("a", "s2"), ag("c", "s2"), ag("z", "s1")}, "z"},
		{"a record of another site does not name the holder", "s1", lease.Record{Site: "s2", Holder: "c"}, []lease.Agent{ag("c", "s1"), ag("a", "s1")}, "a"},
		{"no record", "s1", lease.Record{}, []lease.Agent{ag("b", "s1")}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lease.PickAgent(tt.site, tt.rec, tt.connected)
			if err != nil || got != tt.want {
				t.Errorf("PickAgent = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	_, err := lease.PickAgent("s1", rec, []lease.Agent{ag("c", "s2")})
	var ne *lease.NoAgentError
	if !errors.Is(err, lease.ErrNoAgent) || !errors.As(err, &ne) || ne.Site != "s1" {
		t.Errorf("no agent of the site: %v, want a NoAgentError for s1", err)
	}
}

func TestErrorText(t *testing.T) {
	rec := lease.Record{Site: "s1", Holder: "a", Epoch: 5, Expires: t0, TTL: time.Second}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{rec.Check("b", 4, t0.Add(-time.Second)), `lease: epoch is not the current one: site:s1:boot: agent "b" at epoch 4; lease held by "a" at epoch 5`},
		{&lease.OpError{Op: "cas", Site: "s1", Err: lease.ErrConflict}, "lease: cas site:s1:boot: lease: version conflict"},
		{&lease.OpError{Op: "sites", Err: errors.New("down")}, "lease: sites: down"},
		{&lease.NoAgentError{Site: "s1"}, `lease: no site agent connected for site "s1"`},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error text %q, want %q", tc.err, tc.want)
		}
	}
	if got, want := rec.String(), "site:s1:boot holder=a epoch=5 expires=2026-03-01T12:00:00Z"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := (lease.Record{Site: "s1", Epoch: 6}).String(), "site:s1:boot free epoch=6"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
