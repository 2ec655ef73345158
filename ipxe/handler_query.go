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

// MaxNonceLen is the longest boot nonce ([Query.Nonce], [Chain.Nonce]) accepted.
const MaxNonceLen = 64

// ParamNonce is the query key that carries the boot nonce from the proxy DHCP answer's
// chain URL (/boot/chain.ipxe?n=NONCE) into /boot/ipxe.
const ParamNonce = "n"

// Query is what a machine says about itself when it asks for its script.
type Query struct {
	MAC  hwid.MAC   // required: the NIC iPXE booted from
	UUID hwid.UUID  // zero when not sent (iPXE sends an empty ${uuid} without SMBIOS)
	IP   netip.Addr // invalid when not sent (an unconfigured ${netX/ip} is empty)
	// Arch is the firmware's architecture as DHCP option 93 numbers it, from iPXE's
	// ${platform} and ${buildarch}; HasArch is false when they were not sent or name a
	// pair without a number.
	Arch    hwid.Arch
	HasArch bool
	// Nonce is the boot nonce the chain URL carried (n=), which the host named in its proxy
	// DHCP answer to this machine's iPXE; empty when none was sent. It is 1 to MaxNonceLen
	// of [A-Za-z0-9_-].
	Nonce string
	// Remote is the address of the connection the request came on. The handler sets it;
	// ParseQuery never reads it from the query string, and Encode leaves it out.
	Remote netip.Addr
	// Loader is the name of the [Loader] whose path the request came on; "" for
	// /boot/ipxe. The handler sets it, like Remote.
	Loader string
}

// validNonce reports whether s may be a boot nonce: 1 to MaxNonceLen of [A-Za-z0-9_-], so it
// needs no escaping in a URL and holds nothing iPXE or a shell would read as syntax.
func validNonce(s string) bool {
	if len(s) == 0 || len(s) > MaxNonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseChainQuery reads the boot nonce from the query of /boot/chain.ipxe: "" when the query
// names none; other keys are ignored.
func parseChainQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if len(raw) > MaxQueryLen {
		return "", &QueryError{Field: "query", Err: errors.New("too long")}
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "", &QueryError{Field: "query", Err: errors.New("malformed")}
	}
	return nonceOf(vals)
}

func nonceOf(vals url.Values) (string, error) {
	v := vals[ParamNonce]
	switch {
	case len(v) == 0 || len(v) == 1 && v[0] == "":
		return "", nil
	case len(v) > 1:
		return "", &QueryError{Field: ParamNonce, Err: errors.New("given more than once")}
	case !validNonce(v[0]):
		return "", &QueryError{Field: ParamNonce, Err: errors.New("not 1 to 64 of [A-Za-z0-9_-]")}
	}
	return v[0], nil
}

// archOf maps iPXE's ${platform} and ${buildarch} to the option 93 number of that
// firmware. An iPXE built for BIOS runs on x86 BIOS whether it is the i386 or x86_64 build.
func archOf(platform, buildarch string) (hwid.Arch, bool) {
	switch platform {
	case "pcbios":
		return hwid.ArchBIOS, true
	case "efi":
		switch buildarch {
		case "x86_64":
			return hwid.ArchX86_64EFI, true
		case "i386":
			return hwid.ArchIA32EFI, true
		case "arm64":
			return hwid.ArchARM64EFI, true
		case "arm32":
			return hwid.ArchARM32EFI, true
		case "riscv64":
			return hwid.ArchRISCV64EFI, true
		case "riscv32":
			return hwid.ArchRISCV32EFI, true
		case "loong64":
			return hwid.ArchLoongArch64EFI, true
		}
	}
	return 0, false
}

// isWord reports whether s may be a platform or buildarch value: [a-z0-9_]{0,16}.
func isWord(s string) bool {
	if len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
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
	if q.HasArch {
		for _, pb := range archWords {
			if pb.arch == q.Arch {
				b.WriteString("&platform=" + pb.platform + "&buildarch=" + pb.buildarch)
				break
			}
		}
	}
	if q.Nonce != "" {
		b.WriteString("&" + ParamNonce + "=")
		b.WriteString(url.QueryEscape(q.Nonce))
	}
	return b.String()
}

// archWords is how iPXE spells each arch archOf knows, for Encode.
var archWords = []struct {
	arch                hwid.Arch
	platform, buildarch string
}{
	{hwid.ArchBIOS, "pcbios", "i386"},
	{hwid.ArchX86_64EFI, "efi", "x86_64"},
	{hwid.ArchIA32EFI, "efi", "i386"},
	{hwid.ArchARM64EFI, "efi", "arm64"},
	{hwid.ArchARM32EFI, "efi", "arm32"},
	{hwid.ArchRISCV64EFI, "efi", "riscv64"},
	{hwid.ArchRISCV32EFI, "efi", "riscv32"},
	{hwid.ArchLoongArch64EFI, "efi", "loong64"},
}

// ParseQuery parses the query string of GET /boot/ipxe: mac (required), uuid, ip, platform,
// buildarch and n, the boot nonce (optional; empty is absent). Each may appear once; other
// keys are ignored. A UUID is the
// canonical or 32-digit form; an IP is a unicast IPv4 or IPv6 address without a zone
// (IPv4-mapped IPv6 is unmapped), and "::" is no IP (iPXE 2's ${netX/ip6} without an IPv6
// address of its own); platform and buildarch are [a-z0-9_]{0,16}, mapped to
// [Query.Arch] when iPXE names a firmware it has a number for; a nonce is 1 to MaxNonceLen
// of [A-Za-z0-9_-]. Anything else is a [*QueryError]. Remote is left zero: it is the
// connection's, never the query's.
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
		switch {
		case a == netip.IPv6Unspecified():
			// iPXE 2 reports ${netX/ip6} as "::" when it has no IPv6 address of its own
			// (a DHCPv6 lease only, on a prefix without SLAAC): no address, as empty is.
		case a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() ||
			a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return q, &QueryError{Field: "ip", Err: errors.New("not a unicast address")}
		default:
			q.IP = a
		}
	}
	platform, err := one("platform")
	if err != nil {
		return q, err
	}
	buildarch, err := one("buildarch")
	if err != nil {
		return q, err
	}
	if !isWord(platform) {
		return q, &QueryError{Field: "platform", Err: errors.New("not [a-z0-9_]{0,16}")}
	}
	if !isWord(buildarch) {
		return q, &QueryError{Field: "buildarch", Err: errors.New("not [a-z0-9_]{0,16}")}
	}
	q.Arch, q.HasArch = archOf(platform, buildarch)
	if q.Nonce, err = nonceOf(vals); err != nil {
		return q, err
	}
	return q, nil
}
