package agent

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
)

// Defaults of [DefaultConfig] for IPv6 boot.
var (
	DefaultDHCPv6Listen = netip.MustParseAddrPort("[::]:547")
	DefaultPXEListen6   = netip.MustParseAddrPort("[::]:4011")
)

// ipv6Part is the agent's IPv6 boot: proxy DHCP's DHCPv6 sockets, the boot handler that
// names IPv6 URLs, and the passes that bind an iPXE script request over IPv6 to this
// agent's DHCPv6 answer to the machine's firmware.
type ipv6Part struct {
	httpBase string           // HTTPBase6, or derived from ServerIP6; "" without IPv6
	passes   *bootbind.Passes // nil without proxy DHCP over IPv6
}

// validateIPv6 checks the IPv6 boot fields (Config.Validate).
func (c *Config) validateIPv6() error {
	b := &c.Boot
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if ip := b.ServerIP6; ip.IsValid() {
		if !ip.Is6() || ip.Is4In6() || !ip.IsGlobalUnicast() || ip.Zone() != "" {
			return bad("Boot.ServerIP6", "want the global IPv6 address machines reach this agent at, got %v", ip)
		}
	}
	if b.HTTPBase6 != "" {
		if !b.ServerIP6.IsValid() {
			return bad("Boot.HTTPBase6", "needs Boot.ServerIP6")
		}
		if err := bootserver.CheckBaseURL(b.HTTPBase6); err != nil {
			return &FieldError{Field: "Boot.HTTPBase6", Err: err}
		}
	}
	if b.DHCPv6 {
		switch {
		case !b.ProxyDHCP:
			return bad("Boot.DHCPv6", "needs Boot.ProxyDHCP")
		case !b.ServerIP6.IsValid():
			return bad("Boot.DHCPv6", "needs Boot.ServerIP6, the address the boot file URLs name")
		}
	}
	// One dual-stack socket serves both families (the listener is a wildcard); DHCPv6's
	// are IPv6 sockets.
	if ae := (*bootserver.AddrError)(nil); errors.As(b.addrs().Validate(), &ae) {
		return &FieldError{Field: map[string]string{"tftp": "Boot.TFTPListen", "http": "Boot.HTTPListen",
			"dhcpv6": "Boot.DHCPv6Listen", "pxe6": "Boot.PXEListen6"}[ae.Part], Err: ae.Err}
	}
	return nil
}

// addrs are the addresses of the boot server's sockets the config names
// (bootserver.Listeners.Listen binds those the host did not hand in).
func (b *BootConfig) addrs() bootserver.Addrs {
	a := bootserver.Addrs{HTTP: b.HTTPListen, HTTPS: b.httpsListen(), Interface: b.Interface, DualStack: b.ServerIP6.IsValid()}
	if b.ProxyDHCP {
		a.DHCP, a.PXE = b.DHCPListen, b.PXEListen
		if b.DHCPv6 {
			a.DHCPv6, a.PXE6 = b.DHCPv6Listen, b.PXEListen6
		}
	}
	if b.TFTP {
		a.TFTP = b.TFTPListen
	}
	return a
}

// HTTPBase6 is the base URL machines that come over IPv6 use for /boot/ and /cache/; "" when
// Boot.ServerIP6 is unset.
func (a *Agent) HTTPBase6() string { return a.v6.httpBase }

// The boot passes of IPv6 (S1 over DHCPv6, where a chain URL cannot carry a nonce): see
// bootbind's package doc, "IPv6 passes".

// newPasses is the IPv6 boot passes' store, tied to the boot interface's on-link prefixes;
// bootserver issues a MAC's pass with each answer proxy DHCP gives its firmware.
func (a *Agent) newPasses() *bootbind.Passes {
	p := bootbind.NewPasses(a.bindingConfig())
	p.Segment = bootbind.OnLink(a.cfg.Boot.Interface, a.cfg.Boot.Segments)
	p.Neighbor = bootbind.NeighborMAC
	return p
}
