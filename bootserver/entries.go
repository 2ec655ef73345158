package bootserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/sitelink"
)

// Entries are the host's machines, from the boot entries a control plane handed it
// (sitelink.EntryStore), as proxy DHCP's Handler and the /boot/ handler's ipxe.Entries: a
// live entry, and only for the machine it names (S3: sitelink.ParsedEntry.Match, on the
// arch and SMBIOS UUID the request carries). A machine that does not match its entry gets
// silence (proxy DHCP, reason declined) or the exit script (ipxe.ErrMismatch), never a
// secret; each such refusal is counted by where and why ([MismatchStats]), logged, and
// emitted as an event with the reason the component itself only knows as "declined". The
// firmware of a machine whose entry boots with Secure Boot
// (sitelink.ParsedEntry.SecureBootBy) gets the signed chain's answer instead of iPXE's.
type Entries struct {
	Store *sitelink.EntryStore // required
	// OnAnswer, when set, is told of each machine proxy DHCP answers (before the answer is
	// sent): it should now ask for its next step.
	OnAnswer func(req *proxydhcp.Request, e sitelink.ParsedEntry)
	// SecureBoot answers the firmware of a Secure Boot machine; nil (the host cannot serve
	// the chain) answers it with silence (ReasonDeclined), counted as
	// MismatchStats.SecureBootUnavailable and logged. SecureBootDefault is the site's word
	// for entries that say nothing.
	SecureBoot        *secureboot.Chain
	SecureBootDefault bool
	Events            bootevents.Sink // nil: no events
	Clock             clock.Clock     // nil: clock.Real
	Logger            *slog.Logger    // nil discards

	dhcp, http  [sitelink.NumMismatches]atomic.Uint64
	unavailable atomic.Uint64
}

// ServeDHCP is a proxydhcp.Handler: silence (ReasonUnknown) without a live entry,
// silence (ReasonDeclined) for a machine that is not the entry's, else Answer.
func (e *Entries) ServeDHCP(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
	r, ok := e.Store.LookupParsed(req.MAC)
	if !ok {
		return proxydhcp.Silence(proxydhcp.ReasonUnknown)
	}
	var uuid hwid.UUID
	if req.HasUUID {
		uuid = req.UUID
	}
	if m := r.Match(req.Arch, req.HasArch, uuid); m != sitelink.NoMismatch {
		e.dhcp[m].Add(1)
		ev := bootevents.Event{MAC: req.MAC, Stage: bootevents.StageDHCPv4, Peer: req.Source, Arch: req.Arch, HasArch: req.HasArch,
			UUID: req.UUID, HasUUID: req.HasUUID, IPXE: req.IPXE, Addr: req.ClientIP}
		switch {
		case req.Port == proxydhcp.PortBoot:
			ev.Stage = bootevents.StageBoot4011
		case req.IPv6:
			ev.Stage = bootevents.StageDHCPv6
		}
		e.refused(ev, m)
		e.log().Warn("proxy dhcp: machine does not match its boot entry; silence", "mac", req.MAC.String(),
			"reason", m.String(), "arch", req.Arch.String(), "entry_arch", r.Arch)
		return proxydhcp.Silence(proxydhcp.ReasonDeclined)
	}
	if e.OnAnswer != nil {
		e.OnAnswer(req, r)
	}
	// A machine that sent no UUID (no option 97) is answered on its MAC and arch alone; the
	// answer says so when the entry names a UUID, so the timeline and counters show it.
	noUUID := r.UUIDUnchecked(uuid)
	if req.IPXE || !r.SecureBootBy(e.SecureBootDefault) {
		return proxydhcp.Decision{Answer: true, NoUUID: noUUID}
	}
	if e.SecureBoot == nil {
		e.unavailable.Add(1)
		e.log().Warn("proxy dhcp: no signed chain for this Secure Boot machine; silence", "mac", req.MAC.String(),
			"reason", secureboot.RefusedUnavailable, "arch", req.Arch.String())
		return proxydhcp.Silence(proxydhcp.ReasonDeclined)
	}
	d := e.SecureBoot.AnswerDHCP(req)
	d.NoUUID = d.Answer && noUUID
	return d
}

// Entry is an ipxe.Entries lookup: the live entry of the machine asking when it is the
// one the entry names, with the sitelink.ParsedEntry as the ipxe.Entry's Ref; an error
// wrapping ipxe.ErrMismatch for another machine. Wrap it with [Bind] (the Server does)
// so that only a request bound to its DHCP answer gets it.
func (e *Entries) Entry(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	r, ok := e.Store.LookupParsed(q.MAC)
	if !ok {
		return ipxe.Entry{}, false, nil
	}
	if m := r.Match(q.Arch, q.HasArch, q.UUID); m != sitelink.NoMismatch {
		e.http[m].Add(1)
		e.refused(bootevents.Event{MAC: q.MAC, Stage: bootevents.StageScript, Arch: q.Arch, HasArch: q.HasArch,
			UUID: q.UUID, HasUUID: q.UUID != hwid.UUID{}, Addr: q.Remote}, m)
		return ipxe.Entry{}, false, fmt.Errorf("%w: %s (entry arch %s)", ipxe.ErrMismatch, m, r.Arch)
	}
	return ipxe.Entry{
		MAC: r.MAC, UUID: r.MachineUUID(), Workflow: r.Workflow, NotAfter: r.NotAfter,
		SanbootSHA256: r.SanbootSHA256, LocalBoot: r.LocalBoot, Ref: r,
	}, true, nil
}

// Facts are what the store says of mac for an explanation of its boot
// (bootevents.Explain, bootevents.MachineHandler): whether it holds a live entry, and the
// arch and UUID the entry names. The fence's facts are the host's to add.
func (e *Entries) Facts(mac hwid.MAC) bootevents.Facts {
	var f bootevents.Facts
	if r, ok := e.Store.LookupParsed(mac); ok {
		f.Entry = true
		f.EntryArch, f.HasEntryArch = sitelink.EntryArch(r.Arch)
		f.EntryUUID, f.HasEntryUUID = r.MachineUUID(), r.UUID != ""
	}
	return f
}

func (e *Entries) refused(ev bootevents.Event, m sitelink.Mismatch) {
	if e.Events != nil {
		ev.Time, ev.Outcome, ev.Reason = clock.Or(e.Clock).Now(), bootevents.OutcomeRefused, m.String()
		e.Events.Emit(ev)
	}
}

func (e *Entries) log() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// MismatchStats count the machines refused for not matching their entry, by where and
// by sitelink.Mismatch.
type MismatchStats struct {
	DHCPArch, DHCPUUID uint64 // proxy DHCP: arch-mismatch, uuid-mismatch
	HTTPArch, HTTPUUID uint64 // the /boot/ handler: arch-mismatch, uuid-mismatch
	// SecureBootUnavailable counts Secure Boot machines answered with silence for want of
	// the chain (secureboot.Stats.Unavailable, for a host that exports the chain's counters).
	SecureBootUnavailable uint64
}

// Stats returns the counters.
func (e *Entries) Stats() MismatchStats {
	return MismatchStats{
		DHCPArch: e.dhcp[sitelink.MismatchArch].Load(), DHCPUUID: e.dhcp[sitelink.MismatchUUID].Load(),
		HTTPArch: e.http[sitelink.MismatchArch].Load(), HTTPUUID: e.http[sitelink.MismatchUUID].Load(),
		SecureBootUnavailable: e.unavailable.Load(),
	}
}

var famMismatch = metric.Family{Name: "boot_mismatch_total", Labels: []string{"where", "reason"},
	Help: "Requests from a machine that does not match its boot entry (arch or UUID), not answered, by where and why."}

// Samples lists the counters under the names of package metric's convention:
// boot_mismatch_total{where,reason}, where dhcp or http.
func (s MismatchStats) Samples() []metric.Sample {
	arch, uuid := sitelink.MismatchArch.String(), sitelink.MismatchUUID.String()
	return []metric.Sample{
		famMismatch.Sample(s.DHCPArch, "dhcp", arch), famMismatch.Sample(s.HTTPArch, "http", arch),
		famMismatch.Sample(s.DHCPUUID, "dhcp", uuid), famMismatch.Sample(s.HTTPUUID, "http", uuid),
	}
}
