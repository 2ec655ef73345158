package proxydhcp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// MaxPacketSize is the largest datagram the server reads; a longer one is dropped as
// malformed. It is an Ethernet MTU: DHCP clients do not fragment.
const MaxPacketSize = 1500

// Kind is the kind of boot client, from the prefix of option 60.
type Kind uint8

// Client kinds.
const (
	KindPXE  Kind = iota + 1 // option 60 starts with "PXEClient"
	KindHTTP                 // option 60 starts with "HTTPClient" (UEFI HTTP boot)
)

// String returns "PXEClient" or "HTTPClient", the value a reply carries in option 60.
func (k Kind) String() string {
	switch k {
	case KindPXE:
		return "PXEClient"
	case KindHTTP:
		return "HTTPClient"
	}
	return "kind-" + strconv.Itoa(int(k))
}

// Port is the role of the socket a request came in on.
type Port uint8

// Ports.
const (
	PortDHCP   Port = iota // UDP 67: DHCPDISCOVER and DHCPREQUEST broadcasts
	PortBoot               // UDP 4011: the PXE boot-server REQUEST (DHCPv4, and EDK2's DHCPv6 one)
	PortDHCPv6             // UDP 547: DHCPv6 SOLICIT and INFORMATION-REQUEST, and RELAY-FORW
	numPorts
)

// String returns "67", "4011" or "547".
func (p Port) String() string {
	switch p {
	case PortDHCP:
		return "67"
	case PortBoot:
		return "4011"
	case PortDHCPv6:
		return "547"
	}
	return "port-" + strconv.Itoa(int(p))
}

// MessageType is the DHCP message type (option 53) of a request.
type MessageType uint8

// Message types a boot client sends. Others parse but are never answered.
const (
	MessageDiscover MessageType = 1
	MessageRequest  MessageType = 3
	MessageInform   MessageType = 8
)

// String returns the name of the message type ("DISCOVER", "SOLICIT", ...).
func (m MessageType) String() string {
	if m&0x80 != 0 {
		return dhcpv6.MessageType(m &^ 0x80).String()
	}
	return dhcpv4.MessageType(m).String()
}

// Request is a parsed PXE or HTTP boot request. Every field is typed and checked: a Request
// carries no free text from the packet, so a host may store its fields as they are.
type Request struct {
	Type    MessageType
	XID     uint32
	MAC     hwid.MAC  // chaddr (Ethernet only)
	Kind    Kind      // from option 60
	Arch    hwid.Arch // option 93 (first entry); from option 60 or hwid.ArchBIOS when absent
	HasArch bool      // option 93 was present
	IPXE    bool      // option 77 user class "iPXE", or option 175 present
	// NoHTTPS: option 175 lists iPXE's features and HTTPS (feature 0x14) is not among
	// them: an iPXE that cannot fetch an https URL (an older NIC ROM's, say).
	NoHTTPS   bool
	UUID      hwid.UUID  // option 97 (type 0), as sent; check HasUUID
	HasUUID   bool       // option 97 was present and well-formed
	UNDI      [2]uint8   // option 94 major, minor; zero when absent
	Relay     netip.Addr // giaddr; invalid when the request was not relayed
	ClientIP  netip.Addr // ciaddr; invalid when zero
	ServerID  netip.Addr // option 54; invalid when absent
	Broadcast bool       // the broadcast flag

	// DHCPv6 (Parse6): Type is a DHCPv6 message type, the MAC comes from MACSource, the UUID
	// from a DUID-UUID, the arch from option 61 (or the vendor class), UNDI from option 62,
	// Relay is the innermost relay's link address and ClientIP the client's address.
	IPv6      bool
	MACSource MACSource // where MAC was read; MACFromChaddr for DHCPv4

	// Set by the server, not read from the packet.
	Port   Port           // which socket the request came in on
	Source netip.AddrPort // the sender (a relay, or the client)
	Server netip.Addr     // the address the answer comes from (option 54, siaddr)
}

// Parse reads a DHCP request from b. It returns a *ParseError wrapping ErrMalformed for
// anything that is not a well-formed Ethernet BOOTREQUEST with a message type, and one
// wrapping ErrNotPXE for a request whose option 60 names neither PXEClient nor HTTPClient.
// Parse never keeps b.
func Parse(b []byte) (*Request, error) {
	if len(b) > MaxPacketSize {
		return nil, malformed("header", "%d bytes, more than %d", len(b), MaxPacketSize)
	}
	m, err := dhcpv4.FromBytes(b)
	if err != nil {
		return nil, &ParseError{Field: "header", Err: fmt.Errorf("%w: %w", ErrMalformed, err)}
	}
	return fromMessage(m)
}

func fromMessage(m *dhcpv4.DHCPv4) (*Request, error) {
	if m.OpCode != dhcpv4.OpcodeBootRequest {
		return nil, malformed("op", "%d is not BOOTREQUEST", m.OpCode)
	}
	if m.HWType != iana.HWTypeEthernet || len(m.ClientHWAddr) != 6 {
		return nil, malformed("chaddr", "not an Ethernet address (htype %d, hlen %d)", m.HWType, len(m.ClientHWAddr))
	}
	r := &Request{XID: binary.BigEndian.Uint32(m.TransactionID[:])}
	copy(r.MAC[:], m.ClientHWAddr)
	if r.MAC == (hwid.MAC{}) || r.MAC[0]&1 != 0 {
		return nil, malformed("chaddr", "%s is not a unicast MAC", r.MAC)
	}

	mt := m.Options.Get(dhcpv4.OptionDHCPMessageType)
	if len(mt) != 1 {
		return nil, malformed("option 53", "length %d", len(mt))
	}
	r.Type = MessageType(mt[0])

	vc := m.Options.Get(dhcpv4.OptionClassIdentifier)
	switch {
	case bytes.HasPrefix(vc, []byte("PXEClient")):
		r.Kind = KindPXE
	case bytes.HasPrefix(vc, []byte("HTTPClient")):
		r.Kind = KindHTTP
	default:
		return nil, &ParseError{Field: "option 60", Err: ErrNotPXE}
	}

	if a := m.Options.Get(dhcpv4.OptionClientSystemArchitectureType); a != nil {
		if len(a) < 2 || len(a)%2 != 0 {
			return nil, malformed("option 93", "length %d", len(a))
		}
		r.Arch, r.HasArch = hwid.Arch(binary.BigEndian.Uint16(a)), true
	} else if a, ok := archFromVendorClass(vc); ok {
		r.Arch = a
	}

	if n := m.Options.Get(dhcpv4.OptionClientNetworkInterfaceIdentifier); len(n) == 3 && n[0] == 1 {
		r.UNDI = [2]uint8{n[1], n[2]}
	}

	if g := m.Options.Get(dhcpv4.OptionClientMachineIdentifier); g != nil {
		// Option 97 other than type 0 and 16 bytes is ignored, not refused: it only
		// identifies, and the firmware still deserves its boot file.
		if len(g) == 17 && g[0] == 0 {
			copy(r.UUID[:], g[1:])
			r.HasUUID = true
		}
	}

	r.IPXE = m.Options.Has(dhcpv4.GenericOptionCode(175)) || isIPXEUserClass(m.Options.Get(dhcpv4.OptionUserClassInformation))
	if m.Options.Has(dhcpv4.GenericOptionCode(175)) {
		r.NoHTTPS = !ipxeFeature(m.Options.Get(dhcpv4.GenericOptionCode(175)), ipxeFeatureHTTPS)
	}

	r.Relay = addr4(m.GatewayIPAddr)
	r.ClientIP = addr4(m.ClientIPAddr)
	if sid := m.Options.Get(dhcpv4.OptionServerIdentifier); sid != nil {
		if len(sid) != 4 {
			return nil, malformed("option 54", "length %d", len(sid))
		}
		r.ServerID = netip.AddrFrom4([4]byte(sid))
	}
	r.Broadcast = m.IsBroadcast()
	return r, nil
}

// ipxeFeatureHTTPS is iPXE's feature code for HTTPS in option 175 (DHCP_EB_FEATURE_HTTPS).
const ipxeFeatureHTTPS = 0x14

// ipxeFeature reports whether option 175's encapsulated options (code, length, value; 0 pads,
// 255 ends) hold feature code with a non-zero version. A block that does not parse holds no
// feature.
func ipxeFeature(opt []byte, code byte) bool {
	for len(opt) > 0 {
		switch opt[0] {
		case 0:
			opt = opt[1:]
			continue
		case 255:
			return false
		}
		if len(opt) < 2 || int(opt[1])+2 > len(opt) {
			return false
		}
		v := opt[2 : 2+int(opt[1])]
		if opt[0] == code && len(v) > 0 && v[0] != 0 {
			return true
		}
		opt = opt[2+len(v):]
	}
	return false
}

// isIPXEUserClass reports whether option 77 names iPXE: iPXE sends the bare string "iPXE";
// RFC 3004 clients send length-prefixed strings.
func isIPXEUserClass(uc []byte) bool {
	if len(uc) == 0 {
		return false
	}
	if string(uc) == "iPXE" {
		return true
	}
	for len(uc) > 0 {
		n := int(uc[0])
		if n == 0 || n+1 > len(uc) {
			return false
		}
		if string(uc[1:1+n]) == "iPXE" {
			return true
		}
		uc = uc[1+n:]
	}
	return false
}

// archFromVendorClass reads "PXEClient:Arch:00007:..." for clients without option 93.
func archFromVendorClass(vc []byte) (hwid.Arch, bool) {
	i := bytes.Index(vc, []byte(":Arch:"))
	if i < 0 || len(vc) < i+11 {
		return 0, false
	}
	d := vc[i+6 : i+11]
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 0xffff {
		return 0, false
	}
	return hwid.Arch(n), true
}

func addr4(ip []byte) netip.Addr {
	if len(ip) != 4 {
		if len(ip) == 16 {
			ip = ip[12:]
		} else {
			return netip.Addr{}
		}
	}
	a := netip.AddrFrom4([4]byte(ip))
	if a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}
