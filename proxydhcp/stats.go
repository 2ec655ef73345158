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
	Received   uint64            // datagrams read
	Answered   uint64            // replies sent
	SendErrors uint64            // replies the socket refused
	Silent     map[Reason]uint64 // requests not answered, by reason; every reason is present. Overload counts datagrams the kernel dropped before they were read (Linux).
}

type counters struct {
	received   [numPorts]atomic.Uint64
	answered   [numPorts]atomic.Uint64
	sendErrors [numPorts]atomic.Uint64
	silent     [numPorts][numReasons]atomic.Uint64
	resent     atomic.Uint64
}

func (c *counters) snapshot() Stats {
	port := func(p Port) PortStats {
		ps := PortStats{
			Received:   c.received[p].Load(),
			Answered:   c.answered[p].Load(),
			SendErrors: c.sendErrors[p].Load(),
			Silent:     make(map[Reason]uint64, numReasons-1),
		}
		for r := ReasonUnknown; r < numReasons; r++ {
			ps.Silent[r] = c.silent[p][r].Load()
		}
		return ps
	}
	return Stats{DHCP: port(PortDHCP), Boot: port(PortBoot), DHCPv6: port(PortDHCPv6), Resent: c.resent.Load()}
}
