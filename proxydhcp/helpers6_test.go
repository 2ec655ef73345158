package proxydhcp_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
)

// DHCPv6 requests shaped byte for byte as EDK2 (NetworkPkg Dhcp6Dxe with UefiPxeBcDxe or
// HttpBootDxe) and iPXE (src/net/udp/dhcpv6.c) build them.

const (
	server6   = "2001:db8::2"
	edk2MAC   = "52:54:00:00:00:62"
	edk2LL    = "fe80::5054:ff:fe00:62" // EUI-64 of edk2MAC (Ip6Common.c Ip6CreateInterfaceID)
	edk2Addr  = "2001:db8::100"         // the address the site's DHCPv6 server gave it
	relayLink = "2001:db8:1::1"
)

// serverDUID is the test server's DUID-LL, fixed so golden files hold.
var serverDUID = []byte{0, 3, 0, 1, 0x02, 0x00, 0x5e, 0x00, 0x53, 0x01}

func opt6(code uint16, data ...[]byte) []byte {
	n := 0
	for _, d := range data {
		n += len(d)
	}
	b := binary.BigEndian.AppendUint16(nil, code)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for _, d := range data {
		b = append(b, d...)
	}
	return b
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func msg6(typ byte, xid uint32, opts ...[]byte) []byte {
	b := []byte{typ, byte(xid >> 16), byte(xid >> 8), byte(xid)}
	for _, o := range opts {
		b = append(b, o...)
	}
	return b
}

// duidLLT is EDK2's DUID when the machine has no SMBIOS UUID (Dhcp6Utility.c).
func duidLLT(t testing.TB, mac string) []byte {
	return append([]byte{0, 1, 0, 1, 0x30, 0x5a, 0x1e, 0x00}, mustMAC(t, mac)...)
}

// duidUUID is EDK2's DUID when it has one: the SMBIOS UUID's bytes as EFI_GUID holds them.
func duidUUID(t testing.TB, uuid string) []byte {
	u, err := hwid.ParseUUID(uuid)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{0, 4}, u[:]...)
}

func duidLL(t testing.TB, mac string) []byte { return append([]byte{0, 3, 0, 1}, mustMAC(t, mac)...) }

// edk2Options are the options PxeBcBuildDhcp6Options / HttpBootBuildDhcp6Options add:
// ORO (59, 60, 23, 16), UNDI 3.0, the arch and the vendor class.
func edk2Options(arch uint16, class string) [][]byte {
	return [][]byte{
		opt6(6, u16(59), u16(60), u16(23), u16(16)),
		opt6(62, []byte{1, 3, 0}),
		opt6(61, u16(arch)),
		opt6(16, u32(343), u16(uint16(len(class))), []byte(class)),
	}
}

// edk2Solicit is Dhcp6SendSolicitMsg's SOLICIT: client ID, elapsed time, the PXE or HTTP
// options, then IA_NA.
func edk2Solicit(duid []byte, arch uint16, class string) []byte {
	opts := [][]byte{opt6(1, duid), opt6(8, u16(0))}
	opts = append(opts, edk2Options(arch, class)...)
	opts = append(opts, opt6(3, u32(0x0a0b0c0d), u32(0), u32(0)))
	return msg6(1, 0x5e6f70, opts...)
}

func edk2PXESolicit(duid []byte) []byte {
	return edk2Solicit(duid, 7, "PXEClient:Arch:00007:UNDI:003000")
}

func edk2HTTPSolicit(duid []byte) []byte {
	return edk2Solicit(duid, 16, "HTTPClient:Arch:00016:UNDI:003000")
}

// edk2BootRequest is PxeBcRequestBootService's REQUEST to UDP 4011: the proxy ADVERTISE's
// xid, its server ID first, then the REQUEST's options but IA_NA, IA_TA and server ID.
// With sid nil it is the REQUEST after a DhcpBinl offer (the site's server named the URL):
// no server ID.
func edk2BootRequest(duid, sid []byte) []byte {
	var opts [][]byte
	if sid != nil {
		opts = append(opts, opt6(2, sid))
	}
	opts = append(opts, opt6(1, duid), opt6(8, u16(250)))
	opts = append(opts, edk2Options(7, "PXEClient:Arch:00007:UNDI:003000")...)
	return msg6(3, 0x5e6f70, opts...)
}

// ipxeInfoRequest is iPXE's stateless INFORMATION-REQUEST: DUID-LL, ORO, user class iPXE,
// elapsed time; no vendor class and no arch.
func ipxeInfoRequest(t testing.TB, mac string) []byte {
	return msg6(11, 0xa1b2c3,
		opt6(1, duidLL(t, mac)),
		opt6(6, u16(23), u16(24), u16(59), u16(60)),
		opt6(15, u16(4), []byte("iPXE")),
		opt6(8, u16(0)))
}

// relayForw wraps msg in a RELAY-FORW of hop count hops, with an Interface-ID and, when mac
// is set, the client's link-layer address (option 79).
func relayForw(t testing.TB, hops byte, link, peer string, mac string, msg []byte) []byte {
	b := []byte{12, hops}
	l, p := netip.MustParseAddr(link).As16(), netip.MustParseAddr(peer).As16()
	b = append(b, l[:]...)
	b = append(b, p[:]...)
	b = append(b, opt6(18, []byte("eth1"))...)
	if mac != "" {
		b = append(b, opt6(79, u16(1), mustMAC(t, mac))...)
	}
	return append(b, opt6(9, msg)...)
}
