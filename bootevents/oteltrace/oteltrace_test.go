package oteltrace_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/bootevents/oteltrace"
	"github.com/bettercompute/siteboot/hwid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

// A boot's events are spans of one trace carrying the boot id; the next boot is another
// trace; a refusal is an error span.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(t.Context())
	s := oteltrace.New(oteltrace.Config{Tracer: tp.Tracer(oteltrace.TracerName)})

	mac := hwid.MustParseMAC("52:54:00:00:00:91")
	addr := netip.MustParseAddr("192.0.2.91")
	id := bootevents.BootIDOf("nonce")
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, e := range []bootevents.Event{
		{Time: t0, MAC: mac, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK},
		{Time: t0.Add(time.Second), MAC: mac, Stage: bootevents.StageBoot4011, Outcome: bootevents.OutcomeOK, Addr: addr},
		{Time: t0.Add(3 * time.Second), Peer: netip.AddrPortFrom(addr, 2000), Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeOK, Duration: time.Second, Bytes: 70000},
		{Time: t0.Add(4 * time.Second), MAC: mac, IPXE: true, BootID: id, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK},
		{Time: t0.Add(5 * time.Second), MAC: mac, BootID: id, Stage: bootevents.StageBind, Outcome: bootevents.OutcomeRefused, Reason: "nonce-other-address"},
		// the firmware starts over: a new trace
		{Time: t0.Add(60 * time.Second), MAC: mac, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeOK},
		// nobody known at this address: no span
		{Time: t0, Peer: netip.MustParseAddrPort("198.51.100.1:69"), Stage: bootevents.StageTFTP},
	} {
		s.Emit(e)
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6", len(spans))
	}
	first := spans[0].SpanContext().TraceID()
	for i, sp := range spans[:5] {
		if sp.SpanContext().TraceID() != first {
			t.Errorf("span %d (%s) is in another trace", i, sp.Name())
		}
		if attr(sp, "siteboot.mac") != mac.String() {
			t.Errorf("span %d mac %q", i, attr(sp, "siteboot.mac"))
		}
	}
	if spans[5].SpanContext().TraceID() == first {
		t.Errorf("the next boot is in the same trace")
	}
	if tftp := spans[2]; tftp.Name() != "siteboot.tftp" || !tftp.StartTime().Equal(t0.Add(2*time.Second)) || !tftp.EndTime().Equal(t0.Add(3*time.Second)) || attr(tftp, "siteboot.bytes") != "70000" {
		t.Errorf("tftp span %s %v-%v bytes %s", tftp.Name(), tftp.StartTime(), tftp.EndTime(), attr(tftp, "siteboot.bytes"))
	}
	if b := spans[4]; b.Status().Code != codes.Error || attr(b, "siteboot.boot_id") != id.String() || attr(b, "siteboot.reason") != "nonce-other-address" {
		t.Errorf("bind span status %v boot_id %q", b.Status(), attr(b, "siteboot.boot_id"))
	}
}

// A flood of MACs leaves at most MaxMachines remembered.
func TestBounded(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(t.Context())
	s := oteltrace.New(oteltrace.Config{Tracer: tp.Tracer(oteltrace.TracerName), MaxMachines: 100})
	for i := range 10000 {
		s.Emit(bootevents.Event{MAC: hwid.MAC{2, 0, 0, 0, byte(i >> 8), byte(i)}, Stage: bootevents.StageDHCPv4,
			Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})})
	}
	if n := s.Len(); n != 100 {
		t.Errorf("Len = %d, want 100", n)
	}
	if oteltrace.New(oteltrace.Config{}) != nil {
		t.Errorf("New without a Tracer is not nil")
	}
}
