package proxydhcp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// DHCPv6 message types a boot client sends (RFC 8415 section 7.3), as a Request's Type: the
// RFC's code plus 0x80, so that one MessageType names the messages of both protocols.
const (
	MessageSolicit            MessageType = 0x80 | 1  // SOLICIT, answered with ADVERTISE
	MessageRequest6           MessageType = 0x80 | 3  // REQUEST (on UDP 4011: EDK2's boot-server request)
	MessageInformationRequest MessageType = 0x80 | 11 // INFORMATION-REQUEST (stateless; iPXE)
	// CONFIRM, RENEW, REBIND, RELEASE and DECLINE parse (0x80 | 4, 5, 6, 8, 9) and are never
	// answered: they are for the site's server.
)

// MACSource says where a request's MAC was read.
type MACSource uint8

// Where a MAC comes from. DHCPv4 always has the chaddr; a DHCPv6 request has the first of
// option 79, a DUID of type LL or LLT, and the client's EUI-64 link-local address that
// carries one.
const (
	MACFromChaddr    MACSource = iota // DHCPv4 chaddr
	MACFromRelay                      // DHCPv6 option 79 (RFC 6939), added by the relay that heard the client
	MACFromDUIDLL                     // DHCPv6 client DUID of type LL (3), hardware type Ethernet (iPXE)
	MACFromDUIDLLT                    // DHCPv6 client DUID of type LLT (1), hardware type Ethernet (EDK2 without an SMBIOS UUID)
	MACFromLinkLocal                  // DHCPv6: the modified EUI-64 interface ID of the client's link-local address (EDK2 makes it so)
)

var macSourceNames = [...]string{"chaddr", "relay-option-79", "duid-ll", "duid-llt", "link-local-eui64"}

// String returns the source's name ("chaddr", "duid-llt", ...).
func (m MACSource) String() string {
	if int(m) < len(macSourceNames) {
		return macSourceNames[m]
	}
	return fmt.Sprintf("mac-source-%d", uint8(m))
}

// Bounds of what a DHCPv6 request may hold.
const (
	// maxRelayHops is how deep relay messages may nest (RFC 8415 HOP_COUNT_LIMIT).
	maxRelayHops = 8
	// maxDUIDLen is the longest DUID read or sent (RFC 8415 section 11.1: 128 bytes of
	// DUID after its type); EDK2 refuses a server DUID outside 3..130 bytes.
	maxDUIDLen = 130
	minDUIDLen = 3
)

// relayHop is one RELAY-FORW around a request, outermost first.
type relayHop struct {
	hops        uint8
	link, peer  net.IP
	interfaceID []byte // echoed in the RELAY-REPL (RFC 8415 section 19.3)
}

// msg6 is a parsed DHCPv6 request with what its reply needs.
type msg6 struct {
	req      *Request
	xid      [3]byte
	clientID []byte // the client's DUID as sent
	serverID []byte // the server DUID the client named; nil when absent
	relays   []relayHop
	noMAC    bool // no source gave a MAC: req.MAC is zero
}

// Parse6 reads a DHCPv6 request from b: SOLICIT, REQUEST or INFORMATION-REQUEST, bare or
// inside up to 8 RELAY-FORW messages. It returns a *ParseError wrapping ErrMalformed for
// anything that is not a well-formed client message with a client DUID, one wrapping
// ErrNotPXE for a client that is neither a PXE nor an HTTP boot client (option 16 vendor
// class PXEClient or HTTPClient) nor iPXE (option 15 user class iPXE), and one wrapping
// ErrNoMAC for a boot client whose MAC cannot be known (see [MACSource]). The Request has
// IPv6 set; when relayed, Relay is the link address of the relay nearest the client and
// ClientIP the client's own address (the peer address of that relay). Parse6 never keeps b.
func Parse6(b []byte) (*Request, error) {
	m, err := parse6(b, netip.Addr{})
	if err != nil {
		return nil, err
	}
	if m.noMAC {
		return nil, errNoMAC
	}
	return m.req, nil
}

var errNoMAC = &ParseError{Field: "client MAC", Err: ErrNoMAC}

// parse6 parses b; src is the address it came from (the client, or the outermost relay).
func parse6(b []byte, src netip.Addr) (*msg6, error) {
	if len(b) > MaxPacketSize {
		return nil, malformed("header", "%d bytes, more than %d", len(b), MaxPacketSize)
	}
	if len(b) < 4 {
		return nil, malformed("header", "%d bytes", len(b))
	}
	d, err := dhcpv6.FromBytes(b)
	if err != nil {
		return nil, &ParseError{Field: "header", Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
	}
	m := &msg6{req: &Request{IPv6: true}}
	r := m.req
	client := src
	var lla []byte // option 79 of the relay nearest the client
	for d.IsRelay() {
		rm, ok := d.(*dhcpv6.RelayMessage)
		if !ok || rm.MessageType != dhcpv6.MessageTypeRelayForward {
			return nil, malformed("msg-type", "%v is not RELAY-FORW", d.Type())
		}
		if len(m.relays) == maxRelayHops {
			return nil, malformed("relay", "more than %d relays", maxRelayHops)
		}
		link, _ := netip.AddrFromSlice(rm.LinkAddr)
		peer, _ := netip.AddrFromSlice(rm.PeerAddr)
		if !peer.Is6() || peer.Is4In6() || peer.IsUnspecified() || peer.IsMulticast() {
			return nil, malformed("peer-address", "%v", rm.PeerAddr)
		}
		if !link.Is6() || link.Is4In6() || link.IsMulticast() {
			return nil, malformed("link-address", "%v", rm.LinkAddr)
		}
		hop := relayHop{hops: rm.HopCount, link: rm.LinkAddr, peer: rm.PeerAddr}
		if o := rm.Options.GetOne(dhcpv6.OptionInterfaceID); o != nil {
			hop.interfaceID = o.ToBytes()
		}
		m.relays = append(m.relays, hop)
		r.Relay = link // the innermost relay's, in the end
		client = peer
		lla = nil
		if o := rm.Options.GetOne(dhcpv6.OptionClientLinkLayerAddr); o != nil {
			lla = o.ToBytes()
		}
		if d = rm.Options.RelayMessage(); d == nil {
			return nil, malformed("option 9", "relay message missing")
		}
	}
	if r.Relay.IsValid() && r.Relay.IsUnspecified() {
		// A relay without an address on the client's link (it names the link by an
		// Interface-ID instead): name the relay the request came from.
		r.Relay = netip.Addr{}
		if len(m.relays) == 1 && src.IsValid() {
			r.Relay = src.WithZone("")
		}
	}
	msg, ok := d.(*dhcpv6.Message)
	if !ok {
		return nil, malformed("msg-type", "%v", d.Type())
	}
	switch msg.MessageType {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRenew,
		dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline, dhcpv6.MessageTypeInformationRequest:
		// A client's message; only some are answered (the rest are for the site's server).
		r.Type = MessageType(0x80 | byte(msg.MessageType))
	default:
		return nil, malformed("msg-type", "%v is not a client's message", msg.MessageType)
	}
	m.xid = msg.TransactionID
	r.XID = uint32(m.xid[0])<<16 | uint32(m.xid[1])<<8 | uint32(m.xid[2])
	if client.IsValid() {
		r.ClientIP = client.WithZone("")
	}

	opts := msg.Options
	cid := opts.GetOne(dhcpv6.OptionClientID)
	if cid == nil {
		return nil, malformed("option 1", "no client DUID")
	}
	m.clientID = cid.ToBytes()
	if len(m.clientID) < minDUIDLen || len(m.clientID) > maxDUIDLen {
		return nil, malformed("option 1", "DUID of %d bytes", len(m.clientID))
	}
	if sid := opts.GetOne(dhcpv6.OptionServerID); sid != nil {
		m.serverID = sid.ToBytes()
		if len(m.serverID) < minDUIDLen || len(m.serverID) > maxDUIDLen {
			return nil, malformed("option 2", "DUID of %d bytes", len(m.serverID))
		}
	}

	for _, vc := range opts.VendorClasses() {
		for _, data := range vc.Data {
			switch {
			case r.Kind == 0 && bytes.HasPrefix(data, []byte("PXEClient")):
				r.Kind = KindPXE
			case r.Kind == 0 && bytes.HasPrefix(data, []byte("HTTPClient")):
				r.Kind = KindHTTP
			default:
				continue
			}
			if a, ok := archFromVendorClass(data); ok {
				r.Arch = a
			}
		}
	}
	for _, uc := range opts.UserClasses() {
		if string(uc) == "iPXE" {
			r.IPXE = true
		}
	}
	if r.Kind == 0 {
		if !r.IPXE {
			return nil, &ParseError{Field: "option 16", Err: ErrNotPXE}
		}
		r.Kind = KindPXE // iPXE sends no vendor class over DHCPv6
	}

	if a := opts.GetOne(dhcpv6.OptionClientArchType); a != nil {
		ab := a.ToBytes()
		if len(ab) < 2 || len(ab)%2 != 0 {
			return nil, malformed("option 61", "length %d", len(ab))
		}
		r.Arch, r.HasArch = hwid.Arch(binary.BigEndian.Uint16(ab)), true
	}
	if n := opts.GetOne(dhcpv6.OptionNII); n != nil {
		if nb := n.ToBytes(); len(nb) == 3 && nb[0] == 1 {
			r.UNDI = [2]uint8{nb[1], nb[2]}
		}
	}

	// The client's DUID-UUID (RFC 6355) is its SMBIOS UUID, as EDK2 copies it: the same
	// bytes as DHCPv4 option 97.
	duidType := binary.BigEndian.Uint16(m.clientID)
	if duidType == uint16(dhcpv6.DUID_UUID) && len(m.clientID) == 18 {
		copy(r.UUID[:], m.clientID[2:])
		r.HasUUID = true
	}

	switch {
	case macFromLLA(lla, &r.MAC):
		r.MACSource = MACFromRelay
	case duidType == uint16(dhcpv6.DUID_LL) && len(m.clientID) == 10 && binary.BigEndian.Uint16(m.clientID[2:]) == 1 && unicastMAC(m.clientID[4:10], &r.MAC):
		r.MACSource = MACFromDUIDLL
	case duidType == uint16(dhcpv6.DUID_LLT) && len(m.clientID) == 14 && binary.BigEndian.Uint16(m.clientID[2:]) == 1 && unicastMAC(m.clientID[8:14], &r.MAC):
		r.MACSource = MACFromDUIDLLT
	case macFromEUI64(client, &r.MAC):
		r.MACSource = MACFromLinkLocal
	default:
		m.noMAC = true // the server may know it from its ADVERTISE (Server.macs)
	}
	return m, nil
}

// macFromLLA reads option 79: hardware type 1 (Ethernet) and six bytes.
func macFromLLA(o []byte, mac *hwid.MAC) bool {
	return len(o) == 8 && binary.BigEndian.Uint16(o) == 1 && unicastMAC(o[2:], mac)
}

// macFromEUI64 reads the MAC out of a link-local address whose interface ID is a modified
// EUI-64 (RFC 4291 appendix A: ff:fe in the middle, the universal/local bit inverted).
func macFromEUI64(a netip.Addr, mac *hwid.MAC) bool {
	if !a.Is6() || !a.IsLinkLocalUnicast() {
		return false
	}
	b := a.As16()
	if b[11] != 0xff || b[12] != 0xfe {
		return false
	}
	m := []byte{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}
	return unicastMAC(m, mac)
}

func unicastMAC(b []byte, mac *hwid.MAC) bool {
	var m hwid.MAC
	copy(m[:], b)
	if m == (hwid.MAC{}) || m[0]&1 != 0 {
		return false
	}
	*mac = m
	return true
}
