package proxydhcp_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"testing"
)

// udpPayload is one UDP datagram of a capture.
type udpPayload struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Data             []byte
}

// readPcap returns the UDP datagrams (IPv4, and IPv6 without extension headers) of an
// Ethernet classic-pcap file (24-byte file header,
// 16-byte record headers; microsecond or nanosecond, either byte order).
func readPcap(t testing.TB, path string) []udpPayload {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := parsePcap(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

func parsePcap(b []byte) ([]udpPayload, error) {
	if len(b) < 24 {
		return nil, fmt.Errorf("short pcap header")
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("not a classic pcap file")
	}
	if lt := bo.Uint32(b[20:]); lt != 1 {
		return nil, fmt.Errorf("link type %d, want Ethernet", lt)
	}
	var out []udpPayload
	for p := b[24:]; len(p) > 0; {
		if len(p) < 16 {
			return nil, fmt.Errorf("short record header")
		}
		n := int(bo.Uint32(p[8:]))
		if len(p) < 16+n {
			return nil, fmt.Errorf("short record")
		}
		frame := p[16 : 16+n]
		p = p[16+n:]
		if len(frame) >= 14+40 && binary.BigEndian.Uint16(frame[12:]) == 0x86dd {
			// IPv6 without extension headers, as DHCPv6 and TFTP travel.
			ip := frame[14:]
			plen := int(binary.BigEndian.Uint16(ip[4:]))
			if ip[0]>>4 != 6 || ip[6] != 17 || 40+plen > len(ip) || plen < 8 {
				continue
			}
			udp := ip[40 : 40+plen]
			ulen := int(binary.BigEndian.Uint16(udp[4:]))
			if ulen < 8 || ulen > len(udp) {
				continue
			}
			out = append(out, udpPayload{
				Src: netip.AddrFrom16([16]byte(ip[8:24])), Dst: netip.AddrFrom16([16]byte(ip[24:40])),
				SrcPort: binary.BigEndian.Uint16(udp[0:]), DstPort: binary.BigEndian.Uint16(udp[2:]), Data: udp[8:ulen],
			})
			continue
		}
		if len(frame) < 14 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
			continue
		}
		ip := frame[14:]
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != 17 {
			continue
		}
		ihl := int(ip[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if total > len(ip) || ihl+8 > total {
			continue
		}
		udp := ip[ihl:total]
		ulen := int(binary.BigEndian.Uint16(udp[4:]))
		if ulen < 8 || ulen > len(udp) {
			continue
		}
		out = append(out, udpPayload{
			Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20])),
			SrcPort: binary.BigEndian.Uint16(udp[0:]),
			DstPort: binary.BigEndian.Uint16(udp[2:]),
			Data:    udp[8:ulen],
		})
	}
	return out, nil
}

// testLink is the subnets of the interface the tests' packets come in on (Packet.Link).
var testLink = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/64")}
