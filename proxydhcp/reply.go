package proxydhcp

import (
	"encoding/binary"

	"github.com/bettercompute/siteboot/hwid"
)

// DHCP option codes a reply carries.
const (
	optVendorSpecific = 43
	optMessageType    = 53
	optServerID       = 54
	optVendorClass    = 60
	optBootFile       = 67
	optClientUUID     = 97
	optEnd            = 255

	msgOffer = 2
	msgAck   = 5

	bootpMinLen = 300 // RFC 951: some relays and ROMs drop shorter messages
)

// pxeDiscoveryControl is option 43 with PXE_DISCOVERY_CONTROL (6) = 8: boot the file named
// in this offer, no boot-server discovery or menu (PXE 2.1, section 2.4). Legacy BIOS ROMs
// want it in a proxy offer; UEFI firmware goes to port 4011 instead.
var pxeDiscoveryControl = []byte{6, 1, 8, 255}

var magicCookie = [4]byte{99, 130, 83, 99}

// appendReply appends the reply to req to dst: a BOOTREPLY without an address (yiaddr
// 0.0.0.0), naming req.Server in siaddr and option 54, with the boot file, options in
// ascending order and padding to the BOOTP minimum, byte for byte what dhcpv4.ToBytes
// writes for the same message (the golden files hold both to it). file is at most 255
// bytes (checkFile).
func appendReply(dst []byte, req *Request, file string, ack bool) []byte {
	start := len(dst)
	var hdr [240]byte
	hdr[0], hdr[1], hdr[2] = 2, 1, 6 // BOOTREPLY, Ethernet, hlen 6
	binary.BigEndian.PutUint32(hdr[4:8], req.XID)
	if req.Broadcast || (req.Relay.IsValid() && !req.ClientIP.IsValid()) {
		// A relay can deliver a reply without yiaddr or ciaddr only by broadcasting it, and
		// it does so only when the flag is set (RFC 2131 section 4.1): set it, as dnsmasq's
		// proxy does for every reply to a client without an address.
		hdr[10] = 0x80
	}
	if req.ClientIP.IsValid() {
		a := req.ClientIP.As4()
		copy(hdr[12:16], a[:])
	}
	server := req.Server.As4()
	copy(hdr[20:24], server[:])
	if req.Relay.IsValid() {
		a := req.Relay.As4()
		copy(hdr[24:28], a[:])
	}
	copy(hdr[28:34], req.MAC[:])
	pxeTFTP := req.Kind == KindPXE && !req.IPXE
	if pxeTFTP {
		// The TFTP server by name too: some ROMs read sname rather than siaddr.
		copy(hdr[44:44+63], req.Server.String())
	}
	if len(file) <= MaxBootFileLen {
		copy(hdr[108:108+MaxBootFileLen], file)
	}
	copy(hdr[236:240], magicCookie[:])
	dst = append(dst, hdr[:]...)

	if pxeTFTP && req.Arch == hwid.ArchBIOS && !ack {
		dst = appendOpt(dst, optVendorSpecific, pxeDiscoveryControl...)
	}
	typ := byte(msgOffer)
	if ack {
		typ = msgAck
	}
	dst = appendOpt(dst, optMessageType, typ)
	dst = appendOpt(dst, optServerID, server[:]...)
	dst = append(dst, optVendorClass, byte(len(req.Kind.String())))
	dst = append(dst, req.Kind.String()...)
	if req.Kind == KindHTTP || len(file) > MaxBootFileLen {
		dst = append(dst, optBootFile, byte(len(file)))
		dst = append(dst, file...)
	}
	if req.HasUUID {
		dst = append(dst, optClientUUID, 17, 0)
		dst = append(dst, req.UUID[:]...)
	}
	dst = append(dst, optEnd)
	for len(dst)-start < bootpMinLen {
		dst = append(dst, 0)
	}
	return dst
}

func appendOpt(dst []byte, code byte, v ...byte) []byte {
	dst = append(dst, code, byte(len(v)))
	return append(dst, v...)
}
