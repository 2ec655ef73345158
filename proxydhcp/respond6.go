package proxydhcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// DHCPv6 ports.
const (
	ServerPort6 = 547 // DHCPv6 servers and relays
	ClientPort6 = 546 // DHCPv6 clients
)

// PXEEnterprise is the enterprise number of the vendor class (option 16) in DHCPv6 replies:
// EDK2 takes an offer for PXE only when option 16 carries 343 and "PXEClient"
// (UefiPxeBcDxe PxeBcDhcp6.c PxeBcParseDhcp6Packet; PXEBC_DHCP6_ENTERPRISE_NUM).
const PXEEnterprise = 343

// respond6 is respond for a DHCPv6 datagram (UDP 547, or 4011 from an IPv6 source).
func (s *Server) respond6(ctx context.Context, p Packet, port Port, buf []byte) (resp Response) {
	m, err := parse6(p.Data, p.Source.Addr())
	if err != nil {
		resp.Err = err
		switch {
		case errors.Is(err, ErrNotPXE):
			resp.Reason = ReasonNotPXE
		default:
			resp.Reason = ReasonMalformed
		}
		return resp
	}
	req := m.req
	req.Port, req.Source = port, p.Source
	relayed := len(m.relays) > 0
	sid := s.duid()
	if m.noMAC {
		// EDK2's boot-server REQUEST comes from its new address, whose interface ID is not its
		// MAC: a client with a DUID-UUID is known only by the ADVERTISE this server sent it.
		if port != PortBoot || !bytes.Equal(m.serverID, sid) || !s.macs.lookup(m) {
			resp.Reason, resp.Err = ReasonNoMAC, errNoMAC
			return resp
		}
	}
	resp.Request = req
	if relayed && !s.relayAllowed(p.Source.Addr().WithZone("")) {
		resp.Reason = ReasonRelayNotAllowed
		return resp
	}
	if relayed && req.Relay.IsValid() && !req.Relay.IsUnspecified() {
		// The innermost relay's link address is on the client's link: EDK2's 4011 REQUEST
		// comes from there, straight to this server.
		s.relays.learn(req.MAC, req.Relay.WithZone(""), s.now())
	}

	req.Server = s.ServerIP6
	if !req.Server.IsValid() {
		req.Server = p.Local
	}
	req.Server = req.Server.WithZone("")
	if !usableServer6(req.Server) {
		resp.Reason = ReasonNoServerAddress
		return resp
	}

	// What each port answers: on 547 a SOLICIT (ADVERTISE, never an address) and an
	// INFORMATION-REQUEST (REPLY); on 4011 EDK2's REQUEST (PxeBcRequestBootService), which
	// names this server's DUID after its ADVERTISE, and no server at all when the site's
	// DHCPv6 server itself named this server's URL. A REQUEST on 547 asks for the address of
	// an ADVERTISE; this server offers none, so it is not for us.
	typ := byte(dhcpv6.MessageTypeReply)
	switch {
	case port == PortDHCPv6 && req.Type == MessageSolicit && m.serverID == nil:
		typ = byte(dhcpv6.MessageTypeAdvertise)
	case port == PortDHCPv6 && req.Type == MessageInformationRequest && (m.serverID == nil || bytes.Equal(m.serverID, sid)):
	case port == PortBoot && !relayed && req.Type == MessageRequest6 && (m.serverID == nil || bytes.Equal(m.serverID, sid)):
	default:
		resp.Reason = ReasonIgnored
		return resp
	}

	to, unicast := unicastTo(req, relayed)
	if unicast && !s.onSegment(p.Link, to, req.MAC) {
		resp.Reason = ReasonOffSegment
		return resp
	}

	d := s.decide(ctx, req)
	if !d.Answer {
		switch resp.Reason = d.Reason; resp.Reason {
		case ReasonUnknown, ReasonFenced, ReasonDeclined:
		default:
			resp.Reason = ReasonDeclined
		}
		if resp.Reason == ReasonUnknown && s.Discoverer != nil {
			s.Discoverer.Discovered(ctx, req)
		}
		return resp
	}

	url, ok := s.bootURL6(req, d.BootFile)
	if !ok {
		resp.Reason = ReasonNoBootFile
		return resp
	}
	if req.IPXE && d.BootFile == "" && s.Binder != nil {
		// A DHCPv6 answer is never broadcast: bound to the requester (through a relay, to
		// whoever presents it first: the relay's segment is the machine's).
		if !unicast {
			to = netip.Addr{}
		}
		if url, resp.token, err = s.bind(ctx, req, url, to, true); err != nil {
			resp.Reason, resp.Err = ReasonError, err
			return resp
		}
	}
	if err := checkFile(url); err != nil {
		resp.Reason, resp.Err = ReasonError, fmt.Errorf("proxydhcp: boot file URL: %w", err)
		return resp
	}
	resp.Reply = append(buf[:0], reply6(m, typ, sid, url).ToBytes()...)
	resp.Dest = dest6(req, relayed)
	resp.NoUUID = d.NoUUID
	if typ == byte(dhcpv6.MessageTypeAdvertise) {
		s.macs.remember(m)
	}
	return resp
}

// macCacheSize is how many ADVERTISEs the server remembers the client's MAC of.
const macCacheSize = 1024

// macCache remembers, for the last macCacheSize ADVERTISEs, the MAC of the client by its
// DUID and the transaction: EDK2's boot-server REQUEST repeats both (PxeBcRequestBootService
// takes the ADVERTISE's xid). It holds no more than that and forgets the oldest first.
type macCache struct {
	mu   sync.Mutex
	m    map[string]macEntry
	ring []string
	next int
}

type macEntry struct {
	mac hwid.MAC
	src MACSource
}

func macKey(m *msg6) string { return string(m.xid[:]) + string(m.clientID) }

func (c *macCache) remember(m *msg6) {
	k := macKey(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.ring = make(map[string]macEntry, macCacheSize), make([]string, macCacheSize)
	}
	if _, ok := c.m[k]; !ok {
		delete(c.m, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % macCacheSize
	}
	c.m[k] = macEntry{m.req.MAC, m.req.MACSource}
}

// lookup sets m's MAC from an earlier ADVERTISE to the same client and transaction.
func (c *macCache) lookup(m *msg6) bool {
	c.mu.Lock()
	e, ok := c.m[macKey(m)]
	c.mu.Unlock()
	if ok {
		m.req.MAC, m.req.MACSource, m.noMAC = e.mac, e.src, false
	}
	return ok
}

// usableServer6 accepts an address a client can reach without knowing our link: a unicast
// IPv6 address other than link-local (a URL names no zone).
func usableServer6(a netip.Addr) bool {
	return a.Is6() && !a.Is4In6() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLinkLocalUnicast() && !a.IsLoopback()
}

// bootURL6 is the option 59 URL for req: the Decision's file when set (a bare file name
// becomes a TFTP URL on this server), else the table's entry as a URL: tftp:// for PXE,
// http:// under FilesPath for HTTP boot, the chain URL for iPXE.
func (s *Server) bootURL6(req *Request, override string) (string, bool) {
	host := "[" + req.Server.String() + "]"
	tftp := func(f string) string {
		h := host
		if s.TFTPPort != 0 && s.TFTPPort != 69 {
			h += ":" + strconv.Itoa(s.TFTPPort)
		}
		return "tftp://" + h + "/" + strings.TrimPrefix(f, "/")
	}
	if override != "" {
		if strings.Contains(override, "://") {
			return override, true
		}
		return tftp(override), true
	}
	t := s.table()
	if req.IPXE {
		return s.chainURL(host, t.chainPath()), true
	}
	f, ok := t.ByArch[req.Arch]
	if !ok || f == "" {
		return "", false
	}
	if req.Kind == KindHTTP {
		return s.filesURL(host, t.filesPath()+f), true
	}
	return tftp(f), true
}

// reply6 builds the ADVERTISE or REPLY for m, inside RELAY-REPLs when m was relayed. It
// carries the client's and this server's DUIDs, the vendor class and the boot file URL, and
// never an IA_NA, IA_TA, IA_PD or status code: EDK2 drops an ADVERTISE with a status other
// than success (Dhcp6Io.c Dhcp6HandleAdvertiseMsg, Dhcp6SeekStsOption), and counts one with
// an IA_NA without a status as the address server's (PxeBcParseDhcp6Packet).
func reply6(m *msg6, typ byte, sid []byte, url string) dhcpv6.DHCPv6 {
	msg := &dhcpv6.Message{MessageType: dhcpv6.MessageType(typ), TransactionID: m.xid}
	msg.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionClientID, OptionData: m.clientID})
	msg.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionServerID, OptionData: sid})
	msg.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: PXEEnterprise, Data: [][]byte{[]byte(m.req.Kind.String())}})
	msg.AddOption(dhcpv6.OptBootFileURL(url))
	var out dhcpv6.DHCPv6 = msg
	for i := len(m.relays) - 1; i >= 0; i-- {
		h := m.relays[i]
		rr := &dhcpv6.RelayMessage{MessageType: dhcpv6.MessageTypeRelayReply, HopCount: h.hops, LinkAddr: h.link, PeerAddr: h.peer}
		if h.interfaceID != nil {
			rr.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionInterfaceID, OptionData: h.interfaceID})
		}
		rr.AddOption(dhcpv6.OptRelayMessage(out))
		out = rr
	}
	return out
}

// dest6 is where the reply to req goes: the relay that sent it (port 547), else the client's
// address and port (546, or 4011 for EDK2's boot-server request). The zone is dropped: the
// reply leaves by the interface the request came in on.
func dest6(req *Request, relayed bool) netip.AddrPort {
	a := req.Source.Addr().WithZone("")
	if relayed {
		return netip.AddrPortFrom(a, ServerPort6)
	}
	port := req.Source.Port()
	if port == 0 {
		port = ClientPort6
	}
	return netip.AddrPortFrom(a, port)
}

// duid returns the server's DUID: ServerDUID, or one drawn at the first use.
func (s *Server) duid() []byte {
	if len(s.ServerDUID) > 0 {
		return s.ServerDUID
	}
	s.duidOnce.Do(func() {
		var u [16]byte
		if _, err := rand.Read(u[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		s.randDUID = append([]byte{0, 4}, u[:]...)
	})
	return s.randDUID
}

// validDUID checks a configured server DUID against what EDK2 accepts (3 to 130 bytes,
// PxeBcRequestBootService) and RFC 8415 (a 2-byte type, then at most 128 bytes).
func validDUID(d []byte) error {
	if len(d) < minDUIDLen || len(d) > maxDUIDLen {
		return fmt.Errorf("%d bytes, want %d to %d", len(d), minDUIDLen, maxDUIDLen)
	}
	return nil
}
