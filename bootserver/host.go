package bootserver

import (
	"context"
	"errors"
	"net/netip"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/sitelink"
)

// TokenLink fetches a machine's discovery token from the control plane (a
// *sitelink.Client is one).
type TokenLink interface {
	Token(ctx context.Context, q sitelink.TokenRequest) (string, error)
}

// Tokens is an ipxe.Tokens over the link, in node's name: the token an entry's workflow
// and token reference name (sitelink.ParsedEntry, as [Entries] hands them out), and
// ipxe.ErrNotReady for an entry without one or while the control plane has not made it.
// The handler asks once per entry and keeps the answer.
func Tokens(link TokenLink, node string) ipxe.TokensFunc {
	return func(ctx context.Context, e ipxe.Entry) (string, error) {
		r, ok := e.Ref.(sitelink.ParsedEntry)
		if !ok || r.TokenRef == "" {
			return "", ipxe.ErrNotReady
		}
		t, err := link.Token(ctx, sitelink.TokenRequest{Node: node, Workflow: r.Workflow, Ref: r.TokenRef})
		if errors.Is(err, sitelink.ErrNotReady) {
			return "", ipxe.ErrNotReady
		}
		return t, err
	}
}

// DiscoveredDHCP is a proxydhcp.Discoverer that lists, in list, a machine proxy DHCP did
// not answer for lack of an entry (P6), with the fields proxy DHCP parsed.
func DiscoveredDHCP(list *discovery.List) proxydhcp.DiscovererFunc {
	return func(_ context.Context, req *proxydhcp.Request) {
		s := discovery.Sighting{MAC: req.MAC, Arch: req.Arch, HasArch: req.HasArch, Relay: req.Relay, Via: discovery.ViaDHCP}
		if req.HasUUID {
			s.UUID = req.UUID
		}
		list.Seen(s)
	}
}

// DiscoveredHTTP is an ipxe.Config.OnDiscovered that lists, in list, a machine that asked
// for its script without an entry. Anyone can fetch a URL: with proxy DHCP running, the
// list counts such a fetch only for a MAC proxy DHCP already showed
// (discovery.Config.DHCPFirst, the one place that rule is kept).
func DiscoveredHTTP(list *discovery.List) func(ipxe.Discovery) {
	return func(d ipxe.Discovery) {
		list.Seen(discovery.Sighting{MAC: d.MAC, UUID: d.UUID, Arch: d.Arch, HasArch: d.HasArch, Via: discovery.ViaHTTP})
	}
}

// SyslogTarget is where a chain script points iPXE's syslog console (ipxe.Config.Syslog)
// for a receiver listening on listen: its address, or server when it listens on every
// address. iPXE's console speaks only to port 514 of one IPv4 address: a receiver
// elsewhere gets no console lines (the zero Addr). The console prints every URL iPXE
// fetches, cache grants included, in clear: a boot server over https sets none.
func SyslogTarget(listen netip.AddrPort, server netip.Addr) netip.Addr {
	if !listen.IsValid() || listen.Port() != 514 {
		return netip.Addr{}
	}
	switch ip := listen.Addr().Unmap(); {
	case ip.Is4() && !ip.IsUnspecified():
		return ip
	case ip.IsUnspecified() && server.Is4():
		return server
	}
	return netip.Addr{}
}
