package proxydhcp

import "sync/atomic"

// Stats is a snapshot of a server's counters, by port.
type Stats struct {
	DHCP   PortStats // UDP 67
	Boot   PortStats // UDP 4011, DHCPv4 and DHCPv6
	DHCPv6 PortStats // UDP 547

	// Resent counts the second copies of DHCPv6 boot-server REPLYs (see Resend6Delay); they
	// are not in Boot.Answered.
	Resent uint64
}

// Port returns the counters of port p.
func (s Stats) Port(p Port) PortStats {
	switch p {
	case PortBoot:
		return s.Boot
	case PortDHCPv6:
		return s.DHCPv6
	}
	return s.DHCP
}

// PortStats counts the requests of one port.
type PortStats struct {
	Received   uint64 // datagrams read
	Answered   uint64 // replies sent
	SendErrors uint64 // replies the socket refused
	// AnsweredNoUUID counts the answers (of Answered) the Handler gave without the UUID
	// check its entry asks for (Decision.NoUUID: no option 97 in the request).
	AnsweredNoUUID uint64
	Silent         SilentCounts // requests not answered, by reason
}

// SilentCounts counts the requests of one port that got no answer, one field per [Reason]
// (the field's comment names it). Overload counts datagrams the kernel dropped before they
// were read (Linux).
type SilentCounts struct {
	Unknown         uint64 // ReasonUnknown
	Fenced          uint64 // ReasonFenced
	Declined        uint64 // ReasonDeclined
	NotPXE          uint64 // ReasonNotPXE
	Malformed       uint64 // ReasonMalformed
	Ignored         uint64 // ReasonIgnored
	NoBootFile      uint64 // ReasonNoBootFile
	NoServerAddress uint64 // ReasonNoServerAddress
	Overload        uint64 // ReasonOverload
	Error           uint64 // ReasonError
	RelayNotAllowed uint64 // ReasonRelayNotAllowed
	NoMAC           uint64 // ReasonNoMAC
	OffSegment      uint64 // ReasonOffSegment
}

// Of returns the count of reason r, 0 for ReasonNone or a value that is no Reason: a host
// that labels a metric with the reason's name ranges over [Reasons] and asks Of.
func (c SilentCounts) Of(r Reason) uint64 {
	if p := c.field(r); p != nil {
		return *p
	}
	return 0
}

// field is the counter of r, nil for none.
func (c *SilentCounts) field(r Reason) *uint64 {
	switch r {
	case ReasonUnknown:
		return &c.Unknown
	case ReasonFenced:
		return &c.Fenced
	case ReasonDeclined:
		return &c.Declined
	case ReasonNotPXE:
		return &c.NotPXE
	case ReasonMalformed:
		return &c.Malformed
	case ReasonIgnored:
		return &c.Ignored
	case ReasonNoBootFile:
		return &c.NoBootFile
	case ReasonNoServerAddress:
		return &c.NoServerAddress
	case ReasonOverload:
		return &c.Overload
	case ReasonError:
		return &c.Error
	case ReasonRelayNotAllowed:
		return &c.RelayNotAllowed
	case ReasonNoMAC:
		return &c.NoMAC
	case ReasonOffSegment:
		return &c.OffSegment
	}
	return nil
}

type counters struct {
	received   [numPorts]atomic.Uint64
	answered   [numPorts]atomic.Uint64
	sendErrors [numPorts]atomic.Uint64
	noUUID     [numPorts]atomic.Uint64
	silent     [numPorts][numReasons]atomic.Uint64
	resent     atomic.Uint64
}

func (c *counters) snapshot() Stats {
	port := func(p Port) PortStats {
		ps := PortStats{
			Received:       c.received[p].Load(),
			Answered:       c.answered[p].Load(),
			SendErrors:     c.sendErrors[p].Load(),
			AnsweredNoUUID: c.noUUID[p].Load(),
		}
		for r := ReasonUnknown; r < numReasons; r++ {
			*ps.Silent.field(r) = c.silent[p][r].Load()
		}
		return ps
	}
	return Stats{DHCP: port(PortDHCP), Boot: port(PortBoot), DHCPv6: port(PortDHCPv6), Resent: c.resent.Load()}
}
