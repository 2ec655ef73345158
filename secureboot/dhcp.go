package secureboot

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// Reasons [Chain.AnswerDHCP] stays silent to a Secure Boot machine, as [Stats] counts them.
const (
	RefusedArch  = "arch"  // no signed chain for the machine's architecture (x86-64 UEFI only)
	RefusedIPv6  = "ipv6"  // a DHCPv6 request, or an answer from an IPv6 address: the signed GRUB's network is IPv4
	RefusedError = "error" // no random bits for a nonce
)

// AnswerDHCP is proxy DHCP's answer to the firmware (not iPXE) of a machine that boots
// through the chain; the host calls it from its proxydhcp.Handler for the machines it
// decided boot with Secure Boot (an entry's word, a site's default), after its own rules
// (a live entry, the fence):
//
//   - PXE on port 67: sb/shimx64.efi. EDK2 loads the file its 4011 answer names; shim reads
//     this answer (the proxy offer) for the directory it loads grubx64.efi from (netboot.c
//     parseDhcp4: the proxy offer when the acknowledgement names no boot file), so GRUB
//     comes from sb/.
//   - PXE on port 4011: sb/NONCE/shimx64.efi, the nonce in a unicast answer, bound to the
//     address the answer goes to.
//   - UEFI HTTP boot: http://SERVER[:PORT]/sb/NONCE/boot.img, the RAM disk with shim, GRUB
//     and a configuration carrying the machine's boot key, bound to the first connection
//     that fetches it (the offer is broadcast: see bootbind's "Who can still do what").
//
// Any other request is answered with silence, counted by reason (RefusedArch, RefusedIPv6,
// RefusedError).
func (s *Chain) AnswerDHCP(req *proxydhcp.Request) proxydhcp.Decision {
	refuse := func(reason string) proxydhcp.Decision {
		s.n.refused(reason)
		s.log.Warn("secureboot: no signed chain for this machine; silence", "mac", req.MAC.String(),
			"reason", reason, "arch", req.Arch.String())
		return proxydhcp.Silence(proxydhcp.ReasonDeclined)
	}
	if req.IPv6 || !req.Server.Unmap().Is4() {
		return refuse(RefusedIPv6)
	}
	if shim, _, ok := req.Arch.ShimFile(); !ok || shim != s.shimName {
		return refuse(RefusedArch)
	}
	if req.Kind == proxydhcp.KindPXE && req.Port != proxydhcp.PortBoot {
		s.n.answersPXE.Add(1)
		return proxydhcp.AnswerFile(strings.TrimPrefix(PathSB, "/") + s.shimName)
	}
	kind := bootbind.KindShim
	if req.Kind == proxydhcp.KindHTTP {
		kind = bootbind.KindImage
	}
	// An answer on 4011 goes unicast to its requester, whose address the nonce belongs to;
	// one on 67 is broadcast, and the first address that fetches under it owns it.
	var to netip.Addr
	if req.Port == proxydhcp.PortBoot {
		to = req.Source.Addr()
	}
	n, err := s.cfg.Nonces.Issue(req.MAC, kind, to)
	if err != nil {
		return refuse(RefusedError)
	}
	if s.cfg.OnIssue != nil {
		s.cfg.OnIssue()
	}
	if kind == bootbind.KindShim {
		s.n.answersPXE.Add(1)
		return proxydhcp.AnswerFile(strings.TrimPrefix(PathSB, "/") + n + "/" + s.shimName)
	}
	s.n.answersHTTP.Add(1)
	return proxydhcp.AnswerFile(s.ImageURL(req.Server, n))
}

// ImageURL is the URL of the RAM disk under nonce, on server's HTTP port (Config.HTTPPort):
// http://SERVER[:PORT]/sb/NONCE/boot.img.
func (s *Chain) ImageURL(server netip.Addr, nonce string) string {
	host := server.Unmap().String()
	if p := s.cfg.HTTPPort; p != 0 && p != 80 {
		host += ":" + strconv.Itoa(p)
	}
	return "http://" + host + PathSB + nonce + "/" + ImageName
}
