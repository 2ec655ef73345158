package ipxe

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

// Chain is the script iPXE runs first: it chains to the boot script URL with what iPXE itself
// knows about the NIC it booted from and the machine:
// URL?mac=${netX/mac:hexhyp}&uuid=${uuid}&ip=${netX/ip}&platform=${platform}&buildarch=${buildarch}.
// iPXE formats each by its type (hex bytes joined by '-', the canonical UUID, a dotted quad,
// short words), so the values need no escaping in a query; platform and buildarch tell the
// handler the firmware's architecture, as DHCP option 93 tells proxy DHCP. Two spellings that
// look right do not work with Debian's iPXE 1.0.0+git-20190125 (seen in QEMU): ":uristring"
// reformats the raw bytes as a string, so a MAC becomes its raw bytes and its first zero
// byte ends the URL; and a plain ${netX/mac} puts ':' in the query, which that iPXE reads as
// the end of a URI scheme when the URL is relative ("Operation not supported").
//
// When URL's host is an IPv6 literal (http://[2001:db8::2]/boot/ipxe), ip= carries
// ${netX/ip6} instead: the machine came over IPv6.
//
// With a Nonce the target ends in &n=NONCE: the boot nonce the host named in its proxy DHCP
// answer to this machine, carried on to the boot script.
type Chain struct {
	URL string // the boot script, e.g. "/boot/ipxe"; no query or fragment
	// Interface is the iPXE network device whose MAC and IP are sent: "" means
	// DefaultInterface ("netX", the NIC iPXE booted from); a site that needs another names
	// it, [a-z][a-z0-9]{0,15} ("net1").
	Interface string
	// VLAN, 0 for none or a tag 1..4094, makes the script create that VLAN on Interface and
	// configure it by DHCP. It needs a named Interface: the device vcreate makes is named
	// after its trunk's real name, which "netX" does not give.
	VLAN  int
	Retry Retry
	// Nonce is the boot nonce sent on as n= (1 to MaxNonceLen of [A-Za-z0-9_-]); "" none.
	Nonce string
	// Syslog, when valid, is an IPv4 address the script first sets iPXE's ${syslog} to: an
	// iPXE built with its syslog console (CONSOLE_SYSLOG) then sends every console line
	// after it to UDP port 514 there, as "<PRI>ipxe: LINE" (a receiver such as package
	// syslogd puts them in the machine's timeline). The zero Addr sets nothing. iPXE's
	// setting is IPv4 only, and its port fixed: anything else is refused.
	Syslog netip.Addr
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (c Chain) Render() ([]byte, error) {
	u, err := checkURL("url", c.URL, true)
	if err != nil {
		return nil, err
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(c.URL, "?#") {
		return nil, invalidErr("url", "chain URL may not have a query or fragment")
	}
	dev := c.Interface
	if dev == "" {
		dev = DefaultInterface
	}
	if dev != DefaultInterface && !validInterface(dev) {
		return nil, invalidErr("interface", "must be netX or [a-z][a-z0-9]{0,15}")
	}
	if c.VLAN < 0 || c.VLAN > 4094 {
		return nil, invalidErr("vlan", "must be 0 (none) or 1..4094")
	}
	if c.VLAN != 0 && dev == DefaultInterface {
		return nil, invalidErr("vlan", "a VLAN needs a named interface, not netX")
	}
	if c.Nonce != "" && !validNonce(c.Nonce) {
		return nil, unsafeErr("nonce", "a boot nonce is 1 to 64 of [A-Za-z0-9_-]")
	}
	if c.Syslog.IsValid() && (!c.Syslog.Is4() || c.Syslog.IsUnspecified()) {
		return nil, invalidErr("syslog", "iPXE's syslog setting takes one IPv4 address")
	}
	sleeps, err := lang.Sleeps(c.Retry)
	if err != nil {
		return nil, err
	}
	ipdev := dev
	if c.VLAN != 0 {
		ipdev = dev + "-" + strconv.Itoa(c.VLAN)
	}
	// Over IPv6 (the URL's host an IPv6 literal) the address reported is the NIC's IPv6 one,
	// iPXE's ${netX/ip6} (its NDP settings: the address SLAAC gives it from the router's
	// prefix), since the request comes from an IPv6 address; it is empty (iPXE 1) or "::"
	// (iPXE 2) when iPXE has no such address (a DHCPv6-only lease), and the handler then
	// takes the connection's.
	ipSetting := "/ip"
	if strings.HasPrefix(u.Host, "[") {
		ipSetting = "/ip6"
	}
	target := c.URL + "?mac=${" + dev + "/mac:hexhyp}&uuid=${uuid}&ip=${" + ipdev + ipSetting + "}" +
		"&platform=${platform}&buildarch=${buildarch}"
	if c.Nonce != "" {
		target += "&" + ParamNonce + "=" + c.Nonce
	}

	s := newScript("chain to this machine's boot script", (len(sleeps)+1)*(len(target)+140))
	if c.Syslog.IsValid() {
		s.line("set", "syslog", c.Syslog.String())
	}
	if c.VLAN != 0 {
		s.line("isset", "${"+ipdev+"/mac}", "||", "vcreate", "--tag", strconv.Itoa(c.VLAN), dev, "||", "goto", bootscript.LabelFailed)
	}
	bootscript.Attempts(s, sleeps, "", func(onFail string) {
		if c.VLAN != 0 {
			s.line("isset", "${"+ipdev+"/ip}", "||", "dhcp", ipdev, "||", "goto", onFail)
		}
		s.line("chain", "--replace", "--autofree", target, "||", "goto", onFail)
	})
	return s.bytes(), nil
}

func validInterface(s string) bool {
	if len(s) == 0 || len(s) > 16 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if (s[i] < 'a' || s[i] > 'z') && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}
