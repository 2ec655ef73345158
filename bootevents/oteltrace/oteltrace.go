// Package oteltrace turns siteboot's boot events into OpenTelemetry spans: one trace per
// boot of a machine, one span per decision, so a tracing backend shows a boot from DHCP
// through TFTP and HTTP to the assertion.
//
// It is a module of its own, so that importing siteboot links no OpenTelemetry: a host
// that wants traces imports this package, builds a TracerProvider with the exporter it
// chooses ([NewOTLP] sends to an OTLP/HTTP collector), and adds [New]'s Sink to the
// components' events (bootevents.Tee beside a Timeline). Traces stay off unless a host
// does so.
//
// # Traces and ids
//
// A machine's boot begins a trace at the firmware's DHCP request (as a bootevents
// Timeline begins a boot) or at the first event of a machine not seen within Gap; every
// later event of the same MAC, and every event whose boot id was seen in that boot, is a
// span of that trace. Each span carries the boot id (siteboot.boot_id, the id derived from
// the DHCP answer's nonce, never the nonce), the MAC, stage, outcome, reason, peer and
// bytes, the same ids bootevents.LogSink writes in slog records. A refusal or failure is a
// span with status Error. Events that name only an address (TFTP) join the trace of the
// machine last seen at that address.
//
// # Limits
//
// The sink remembers at most MaxMachines machines' current traces and AddrsPerMachine
// addresses each; the least recently heard of gives way. A span is started and ended at
// once (its start is the event's time less its duration), so no span is ever left open.
package oteltrace

import (
	"container/list"
	"context"
	crand "crypto/rand"
	"net/netip"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultMaxMachines = 4096
	DefaultGap         = bootevents.DefaultBootGap
	AddrsPerMachine    = 2
	// TracerName is the instrumentation scope of the spans.
	TracerName = "github.com/bettercompute/siteboot/bootevents/oteltrace"
)

// Config is what New is built with.
type Config struct {
	// Tracer starts the spans: a TracerProvider's Tracer(TracerName). Required.
	Tracer trace.Tracer
	// MaxMachines bounds the machines whose current trace is remembered. Default
	// DefaultMaxMachines.
	MaxMachines int
	// Gap is the silence after which a machine's next event begins a new trace. Default
	// DefaultGap.
	Gap time.Duration
}

// Sink is a bootevents.Sink that records spans. Safe for concurrent use.
type Sink struct {
	cfg Config

	mu     sync.Mutex
	byMAC  map[hwid.MAC]*list.Element
	byAddr map[netip.Addr]*list.Element
	lru    *list.List // of *boot, least recently heard first
}

type boot struct {
	mac        hwid.MAC
	trace      trace.TraceID
	last       time.Time
	progressed bool
	addrs      [AddrsPerMachine]netip.Addr
}

var _ bootevents.Sink = (*Sink)(nil)

// New returns a Sink for c; nil when c.Tracer is nil (so a component stays off).
func New(c Config) *Sink {
	if c.Tracer == nil {
		return nil
	}
	if c.MaxMachines <= 0 {
		c.MaxMachines = DefaultMaxMachines
	}
	if c.Gap <= 0 {
		c.Gap = DefaultGap
	}
	return &Sink{cfg: c, byMAC: make(map[hwid.MAC]*list.Element), byAddr: make(map[netip.Addr]*list.Element), lru: list.New()}
}

// Emit records e as a span of its boot's trace.
func (s *Sink) Emit(e bootevents.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	tid, mac, ok := s.traceOf(&e)
	if !ok {
		return
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	attrs := []attribute.KeyValue{
		attribute.String("siteboot.mac", mac.String()),
		attribute.String("siteboot.stage", e.Stage.String()),
		attribute.String("siteboot.outcome", e.Outcome.String()),
	}
	if !e.BootID.IsZero() {
		attrs = append(attrs, attribute.String("siteboot.boot_id", e.BootID.String()))
	}
	if e.Reason != "" {
		attrs = append(attrs, attribute.String("siteboot.reason", e.Reason))
	}
	if e.Peer.IsValid() {
		attrs = append(attrs, attribute.String("network.peer.address", e.Peer.Addr().String()))
		if e.Peer.Port() != 0 {
			attrs = append(attrs, attribute.Int("network.peer.port", int(e.Peer.Port())))
		}
	}
	if e.Bytes > 0 {
		attrs = append(attrs, attribute.Int64("siteboot.bytes", int64(min(e.Bytes, 1<<62))))
	}
	if e.Detail != "" {
		attrs = append(attrs, attribute.String("siteboot.detail", bootevents.Printable(e.Detail, bootevents.MaxLine)))
	}
	_, span := s.cfg.Tracer.Start(ctx, "siteboot."+e.Stage.String(),
		trace.WithTimestamp(e.Time.Add(-e.Duration)), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindServer))
	if e.Outcome == bootevents.OutcomeRefused || e.Outcome == bootevents.OutcomeFailed {
		span.SetStatus(codes.Error, e.Reason)
	}
	span.End(trace.WithTimestamp(e.Time))
}

// traceOf returns the trace of e's boot, beginning one where e begins a boot.
func (s *Sink) traceOf(e *bootevents.Event) (trace.TraceID, hwid.MAC, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var el *list.Element
	if !e.MAC.IsZero() {
		el = s.byMAC[e.MAC]
	} else {
		for _, a := range [2]netip.Addr{e.Addr, e.Peer.Addr()} {
			if el = s.byAddr[a.Unmap().WithZone("")]; el != nil {
				break
			}
		}
		if el == nil {
			return trace.TraceID{}, hwid.MAC{}, false
		}
	}
	dhcp := e.Stage == bootevents.StageDHCPv4 || e.Stage == bootevents.StageDHCPv6 || e.Stage == bootevents.StageBoot4011
	var b *boot
	if el == nil {
		if s.lru.Len() >= s.cfg.MaxMachines {
			s.drop(s.lru.Front())
		}
		b = &boot{mac: e.MAC, trace: newTraceID(), last: e.Time}
		el = s.lru.PushBack(b)
		s.byMAC[e.MAC] = el
	} else {
		b = el.Value.(*boot)
		if e.Time.Sub(b.last) > s.cfg.Gap || (dhcp && !e.IPXE && b.progressed) {
			b.trace, b.progressed = newTraceID(), false
		}
		s.lru.MoveToBack(el)
	}
	if e.Time.After(b.last) {
		b.last = e.Time
	}
	if !dhcp && e.Stage != bootevents.StageBMC && e.Stage != bootevents.StageFence {
		b.progressed = true
	}
	if a := e.Addr.Unmap().WithZone(""); a.IsValid() && s.byAddr[a] != el {
		if old := b.addrs[len(b.addrs)-1]; old.IsValid() && s.byAddr[old] == el {
			delete(s.byAddr, old)
		}
		copy(b.addrs[1:], b.addrs[:len(b.addrs)-1])
		b.addrs[0] = a
		s.byAddr[a] = el
	}
	return b.trace, b.mac, true
}

func (s *Sink) drop(el *list.Element) {
	b := s.lru.Remove(el).(*boot)
	delete(s.byMAC, b.mac)
	for _, a := range b.addrs {
		if a.IsValid() && s.byAddr[a] == el {
			delete(s.byAddr, a)
		}
	}
}

// Len returns the machines whose trace is remembered.
func (s *Sink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

func newTraceID() trace.TraceID {
	var t trace.TraceID
	crand.Read(t[:])
	return t
}
