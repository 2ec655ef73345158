package bootserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/ipxe"
)

// A nonce presented from another address is a bind event with bootbind's reason, and the
// timeline's diagnosis names the address it came from.
func TestBindEventsExplain(t *testing.T) {
	tl, err := bootevents.NewTimeline(bootevents.Config{})
	if err != nil {
		t.Fatal(err)
	}
	nonces := bootbind.NewNonces(bootbind.Config{Clock: clocktest.New(t0)})
	b := bootserver.Bind{
		Entries: ipxe.EntriesFunc(func(context.Context, ipxe.Query) (ipxe.Entry, bool, error) { return ipxe.Entry{MAC: mac1}, true, nil }),
		Nonces:  nonces, Events: tl,
	}
	n, err := nonces.Issue(mac1, bootbind.KindChain, machine)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Entry(t.Context(), ipxe.Query{MAC: mac1, Nonce: n, Remote: other}); ok {
		t.Fatal("bound from another address")
	}
	m, _, ok := tl.ByBootID(bootevents.BootIDOf(n))
	if !ok {
		t.Fatal("no boot under the nonce's boot id")
	}
	_ = m
	d := tl.Explain(mac1, bootevents.Facts{Entry: true})
	if d.Code != bootevents.DiagNonceOtherAddress || !strings.Contains(d.Line, "presented from "+other.String()+", another address") {
		t.Errorf("Explain = %+v", d)
	}
	if _, ok, err := b.Entry(t.Context(), ipxe.Query{MAC: mac1, Nonce: n, Remote: machine}); !ok {
		t.Fatalf("the machine's own request refused: %v", err)
	}
	mm, _ := tl.Machine(mac1)
	last, _ := mm.Last()
	if e := last.Events[len(last.Events)-1]; e.Outcome != bootevents.OutcomeOK || e.Reason != "bound" {
		t.Errorf("bound event = %+v", e)
	}
}

// New gives Config.Events to every part that has none of its own.
func TestNewWiresEvents(t *testing.T) {
	l := listen(t)
	defer l.DHCP.Close()
	defer l.PXE.Close()
	defer l.TFTP.Close()
	defer l.HTTP.Close()
	tl, _ := bootevents.NewTimeline(bootevents.Config{})
	cfg := config(t, l, nil)
	cfg.Events = tl
	if _, err := bootserver.New(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.DHCP.Events != bootevents.Sink(tl) || cfg.TFTP.Events != bootevents.Sink(tl) {
		t.Errorf("DHCP.Events = %v, TFTP.Events = %v", cfg.DHCP.Events, cfg.TFTP.Events)
	}
}
