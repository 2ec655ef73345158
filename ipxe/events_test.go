package ipxe_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/ipxe"
)

// Each decision is a boot event with the boot id of the request's nonce; a boot answer
// is preceded by the assertion it carries.
func TestEvents(t *testing.T) {
	host := newFakeHost()
	cfg := host.config()
	var mu sync.Mutex
	var got []bootevents.Event
	cfg.Events = bootevents.SinkFunc(func(e bootevents.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	})
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParseAddr("192.0.2.50")
	h.Decide(context.Background(), ipxe.Query{MAC: mac1, UUID: uuid1, Nonce: "n0nce", Remote: remote})
	h.Decide(context.Background(), ipxe.Query{MAC: mac2, Remote: remote})
	host.mu.Lock()
	host.active = false
	host.mu.Unlock()
	h.Decide(context.Background(), ipxe.Query{MAC: mac1, Remote: remote})

	want := []struct {
		stage   bootevents.Stage
		outcome bootevents.Outcome
		reason  string
		boot    bool
	}{
		{bootevents.StageAssertion, bootevents.OutcomeOK, "", true},
		{bootevents.StageScript, bootevents.OutcomeOK, "", true},
		{bootevents.StageScript, bootevents.OutcomeRefused, ipxe.ReasonUnknown, false},
		{bootevents.StageScript, bootevents.OutcomeRefused, ipxe.ReasonFenced, false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events: %+v", len(got), got)
	}
	for i, w := range want {
		e := got[i]
		if e.Stage != w.stage || e.Outcome != w.outcome || e.Reason != w.reason || (e.BootID == bootevents.BootIDOf("n0nce")) != w.boot || e.Peer.Addr() != remote {
			t.Errorf("event %d = %+v, want %+v", i, e, w)
		}
	}
}
