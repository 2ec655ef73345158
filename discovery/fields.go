package discovery

import (
	"net/netip"

	"github.com/bettercompute/siteboot/hwid"
)

// MaxArchLen is the longest arch the list keeps.
const MaxArchLen = 32

// fieldState says what a raw field held.
type fieldState uint8

const (
	fieldAbsent fieldState = iota // empty: not sent
	fieldOK                       // well-formed
	fieldBad                      // malformed: ignored
)

// uuidField accepts only the canonical 36-character form, in either case.
func uuidField(s string) (hwid.UUID, fieldState) {
	if s == "" {
		return hwid.UUID{}, fieldAbsent
	}
	if len(s) != 36 {
		return hwid.UUID{}, fieldBad
	}
	u, err := hwid.ParseUUID(s)
	if err != nil {
		return hwid.UUID{}, fieldBad
	}
	return u, fieldOK
}

// archField accepts [a-z0-9_-]{1,32} after folding ASCII upper case. The result is s itself
// when s needed no folding (the caller clones it before keeping it).
func archField(s string) (string, fieldState) {
	if s == "" {
		return "", fieldAbsent
	}
	if len(s) > MaxArchLen {
		return "", fieldBad
	}
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '-':
		case 'A' <= c && c <= 'Z':
			upper = true
		default:
			return "", fieldBad
		}
	}
	if !upper {
		return s, fieldOK
	}
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b), fieldOK
}

// relayAddr keeps a unicast address without a zone; an IPv4-mapped IPv6 address is kept as
// IPv4. The unspecified addresses (a DHCP giaddr of 0.0.0.0, a DHCPv6 relay's link address
// of ::, which RFC 8415 section 9.1 has a relay send when it names the link by Interface-ID
// instead) and an IPv6 link-local link address (it names no link beyond its own) mean "no
// relay"; a zone or a multicast address is malformed.
func relayAddr(a netip.Addr) (netip.Addr, fieldState) {
	if !a.IsValid() {
		return netip.Addr{}, fieldAbsent
	}
	if a.Zone() != "" || a.IsMulticast() {
		return netip.Addr{}, fieldBad
	}
	a = a.Unmap()
	if a.IsUnspecified() || a.Is6() && a.IsLinkLocalUnicast() {
		return netip.Addr{}, fieldAbsent
	}
	return a, fieldOK
}

// ValidArch reports whether s is an arch the list would keep as it is: [a-z0-9_-]{1,32}.
func ValidArch(s string) bool {
	a, st := archField(s)
	return st == fieldOK && a == s
}

// ValidProductUUID reports whether s is a product UUID the list would keep as it is: the
// canonical lower-case 36-character form.
func ValidProductUUID(s string) bool {
	u, st := uuidField(s)
	return st == fieldOK && u.String() == s
}

// ValidRelay reports whether a is a relay the list would keep as it is: a valid unicast
// address without a zone, not IPv4-mapped, not unspecified, not IPv6 link-local.
func ValidRelay(a netip.Addr) bool {
	r, st := relayAddr(a)
	return st == fieldOK && r == a
}
