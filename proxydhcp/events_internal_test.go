package proxydhcp

import (
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
)

// With no Events, emitting costs nothing: no event is built.
func TestEmitAllocatesNothingWithoutEvents(t *testing.T) {
	s := &Server{}
	resp := &Response{Reply: make([]byte, 300), Request: &Request{MAC: hwid.MustParseMAC("52:54:00:00:00:01"), Source: netip.MustParseAddrPort("192.0.2.5:68")}, token: "tok"}
	if n := testing.AllocsPerRun(1000, func() { s.emit(PortBoot, resp) }); n != 0 {
		t.Errorf("emit with no Events allocates %v times", n)
	}
	var got bootevents.Event
	s.Events = bootevents.SinkFunc(func(e bootevents.Event) { got = e })
	s.emit(PortBoot, resp)
	if got.Stage != bootevents.StageBoot4011 || got.BootID != bootevents.BootIDOf("tok") || got.Outcome != bootevents.OutcomeOK {
		t.Errorf("event = %+v", got)
	}
}
