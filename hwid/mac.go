package hwid

import (
	"errors"
	"fmt"
)

// ErrBadMAC is returned for text that is not a 6-byte MAC address.
var ErrBadMAC = errors.New("hwid: malformed MAC address")

// MAC is an IEEE 802 MAC-48 address. Its zero value is 00:00:00:00:00:00.
type MAC [6]byte

// ParseMAC parses six hexadecimal byte pairs separated by ':' or '-' (one separator
// throughout), in either case. Anything else, including 8- and 20-byte hardware addresses
// that net.ParseMAC accepts, is ErrBadMAC.
func ParseMAC(s string) (MAC, error) {
	var m MAC
	if len(s) != 17 {
		return m, fmt.Errorf("%w: %q", ErrBadMAC, clip(s))
	}
	sep := s[2]
	if sep != ':' && sep != '-' {
		return m, fmt.Errorf("%w: %q", ErrBadMAC, s)
	}
	for i := range 6 {
		if i > 0 && s[3*i-1] != sep {
			return m, fmt.Errorf("%w: %q", ErrBadMAC, s)
		}
		hi, ok1 := unhex(s[3*i])
		lo, ok2 := unhex(s[3*i+1])
		if !ok1 || !ok2 {
			return m, fmt.Errorf("%w: %q", ErrBadMAC, s)
		}
		m[i] = hi<<4 | lo
	}
	return m, nil
}

// MACFromBytes returns the MAC in b, which must be exactly 6 bytes long.
func MACFromBytes(b []byte) (MAC, error) {
	var m MAC
	if len(b) != len(m) {
		return m, fmt.Errorf("%w: %d bytes", ErrBadMAC, len(b))
	}
	copy(m[:], b)
	return m, nil
}

// String returns the address as lower-case "aa:bb:cc:dd:ee:ff".
func (m MAC) String() string {
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, c := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hexdigits[c>>4], hexdigits[c&0xf])
	}
	return string(b)
}

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// MarshalText implements encoding.TextMarshaler with the canonical form.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseMAC.
func (m *MAC) UnmarshalText(b []byte) error {
	v, err := ParseMAC(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// clip keeps error messages about hostile input short.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// MustParseMAC is ParseMAC for addresses known to be valid, such as constants in tests and
// examples; it panics on an error.
func MustParseMAC(s string) MAC {
	m, err := ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}
