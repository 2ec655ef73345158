package ipxe

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"

	"github.com/bettercompute/siteboot/hwid"
)

// MaxQueryLen is the longest /boot/ipxe query string accepted.
const MaxQueryLen = 512

// Query is what a machine says about itself when it asks for its script.
type Query struct {
	MAC  hwid.MAC   // required
	UUID hwid.UUID  // zero when not sent (iPXE sends an empty ${uuid} without SMBIOS)
	IP   netip.Addr // invalid when not sent (an unconfigured ${net0/ip} is empty)
}

// Encode returns the query in the form ParseQuery reads.
func (q Query) Encode() string {
	var b strings.Builder
	b.WriteString("mac=")
	b.WriteString(q.MAC.String())
	if q.UUID != (hwid.UUID{}) {
		b.WriteString("&uuid=")
		b.WriteString(q.UUID.String())
	}
	if q.IP.IsValid() {
		b.WriteString("&ip=")
		b.WriteString(url.QueryEscape(q.IP.String()))
	}
	return b.String()
}

// ParseQuery parses the query string of GET /boot/ipxe: mac (required), uuid and ip
// (optional; empty is absent). Each may appear once; other keys are ignored. A UUID is the
// canonical or 32-digit form; an IP is a unicast IPv4 or IPv6 address without a zone
// (IPv4-mapped IPv6 is unmapped). Anything else is a [*QueryError].
func ParseQuery(raw string) (Query, error) {
	var q Query
	if len(raw) > MaxQueryLen {
		return q, &QueryError{Field: "query", Err: errors.New("too long")}
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return q, &QueryError{Field: "query", Err: errors.New("malformed")}
	}
	one := func(k string) (string, error) {
		v := vals[k]
		switch len(v) {
		case 0:
			return "", nil
		case 1:
			return v[0], nil
		}
		return "", &QueryError{Field: k, Err: errors.New("given more than once")}
	}
	mac, err := one("mac")
	if err != nil {
		return q, err
	}
	if mac == "" {
		return q, &QueryError{Field: "mac", Err: errors.New("missing")}
	}
	if q.MAC, err = hwid.ParseMAC(mac); err != nil {
		return q, &QueryError{Field: "mac", Err: hwid.ErrBadMAC}
	}
	if q.MAC == (hwid.MAC{}) || q.MAC[0]&1 == 1 {
		return q, &QueryError{Field: "mac", Err: errors.New("not a unicast MAC")}
	}
	uuid, err := one("uuid")
	if err != nil {
		return q, err
	}
	if uuid != "" {
		if q.UUID, err = hwid.ParseUUID(uuid); err != nil {
			return q, &QueryError{Field: "uuid", Err: hwid.ErrBadUUID}
		}
	}
	ip, err := one("ip")
	if err != nil {
		return q, err
	}
	if ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return q, &QueryError{Field: "ip", Err: errors.New("not an IP address")}
		}
		a = a.Unmap()
		if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() ||
			a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return q, &QueryError{Field: "ip", Err: errors.New("not a unicast address")}
		}
		q.IP = a
	}
	return q, nil
}
