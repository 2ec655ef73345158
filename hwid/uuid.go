package hwid

import (
	"errors"
	"fmt"
)

// ErrBadUUID is returned for text or bytes that are not a 16-byte UUID.
var ErrBadUUID = errors.New("hwid: malformed UUID")

// UUID is a 16-byte SMBIOS system UUID, held in the byte order of its canonical text form.
// Its zero value is the all-zeros placeholder.
type UUID [16]byte

// Firmware placeholders: what boards without a programmed UUID report.
var (
	placeholderZero = UUID{}
	placeholderOnes = UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	// 03000200-0400-0500-0006-000700080009 and its SMBIOS spelling.
	placeholderSeqSMBIOS = UUID{0x03, 0x00, 0x02, 0x00, 0x04, 0x00, 0x05, 0x00, 0x00, 0x06, 0x00, 0x07, 0x00, 0x08, 0x00, 0x09}
	placeholderSeq       = UUID{0x00, 0x02, 0x00, 0x03, 0x00, 0x04, 0x00, 0x05, 0x00, 0x06, 0x00, 0x07, 0x00, 0x08, 0x00, 0x09}
)

// ParseUUID parses the canonical 36-character form (8-4-4-4-12 hexadecimal digits, either
// case) or the same 32 digits without hyphens. Braces, "urn:uuid:" prefixes and other
// spellings are ErrBadUUID: a UUID that reaches siteboot comes from firmware or a BMC, not a
// person.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	switch len(s) {
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, fmt.Errorf("%w: %q", ErrBadUUID, s)
		}
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	case 32:
	default:
		return u, fmt.Errorf("%w: %q", ErrBadUUID, clip(s))
	}
	for i := range 16 {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return UUID{}, fmt.Errorf("%w: %q", ErrBadUUID, s)
		}
		u[i] = hi<<4 | lo
	}
	return u, nil
}

// UUIDFromBytes returns the UUID in b, which must be exactly 16 bytes, taken in the order
// given (no byte swapping).
func UUIDFromBytes(b []byte) (UUID, error) {
	var u UUID
	if len(b) != len(u) {
		return u, fmt.Errorf("%w: %d bytes", ErrBadUUID, len(b))
	}
	copy(u[:], b)
	return u, nil
}

// String returns the canonical lower-case 36-character form.
func (u UUID) String() string {
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexdigits[c>>4], hexdigits[c&0xf])
	}
	return string(b)
}

// MarshalText implements encoding.TextMarshaler with the canonical form.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseUUID.
func (u *UUID) UnmarshalText(b []byte) error {
	v, err := ParseUUID(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// IsPlaceholder reports whether u is a firmware placeholder (all zeros, all ones,
// 03000200-0400-0500-0006-000700080009 or 00020003-0004-0005-0006-000700080009) in any of
// the byte orders [SameMachine] counts as one machine: whatever is the same machine as a
// placeholder is one too.
func (u UUID) IsPlaceholder() bool {
	for _, s := range u.orders() {
		switch s {
		case placeholderZero, placeholderOnes, placeholderSeq, placeholderSeqSMBIOS:
			return true
		}
	}
	return false
}

// SMBIOS returns u with its first three fields byte-swapped, the way SMBIOS stores a UUID
// (and the way tools that read the raw table without swapping print it). The swap is its own
// inverse.
func (u UUID) SMBIOS() UUID {
	s := u
	s[0], s[1], s[2], s[3] = u[3], u[2], u[1], u[0]
	s[4], s[5] = u[5], u[4]
	s[6], s[7] = u[7], u[6]
	return s
}

// Reversed returns u with all 16 bytes in reverse order, the way IPMI's Get System GUID
// returns it. The reversal is its own inverse.
func (u UUID) Reversed() UUID {
	var r UUID
	for i := range u {
		r[i] = u[15-i]
	}
	return r
}

// Spellings returns u as given, in SMBIOS order and reversed.
func (u UUID) Spellings() [3]UUID { return [3]UUID{u, u.SMBIOS(), u.Reversed()} }

// SameMachine reports whether a and b name the same machine. It is siteboot's one rule for
// that, wherever a UUID is held against another: proxy DHCP's option 97 and the script's
// query against a boot entry, an assertion against the joining machine, discovery's
// sightings and enrolled machines.
//
// Any spelling of a UUID ([UUID.Spellings]) is the same machine as any other spelling of it,
// whichever of them the firmware reported and whichever an entry holds. On UUIDs that are
// not placeholders the rule is an equivalence (reflexive, symmetric, transitive): the UUIDs
// that are the same machine as a are the eight byte orders of a that the two swaps reach
// (see the package documentation). A placeholder ([UUID.IsPlaceholder]) names no machine:
// SameMachine is false whenever either is one, itself against itself included.
func SameMachine(a, b UUID) bool {
	if a.IsPlaceholder() {
		return false
	}
	// a's orders are b's when b is among them, so b is no placeholder either.
	for _, s := range a.orders() {
		if s == b {
			return true
		}
	}
	return false
}

// DifferentMachines reports whether a and b name two machines that are not the same one:
// neither is a placeholder (the zero UUID, which stands for "none", is one) and
// [SameMachine] is false. It is the check of a UUID held against another only when both
// sides have one, such as option 97 against a boot entry's: a side without a UUID, or with a
// placeholder, contradicts nothing.
func DifferentMachines(a, b UUID) bool {
	return !a.IsPlaceholder() && !b.IsPlaceholder() && !SameMachine(a, b)
}

// orders returns the byte orders of u that the swaps of its spellings reach, one swap after
// the other: u and its spellings, the other spelling of each spelling (the SMBIOS spelling
// reversed, the reversal in SMBIOS order), and the three those reach. The two swaps generate
// a group of eight permutations of the bytes (their product has order four), so there are no
// more.
func (u UUID) orders() [8]UUID {
	s, r := u.SMBIOS(), u.Reversed()
	rs, sr := s.Reversed(), r.SMBIOS()
	srs, rsr := rs.SMBIOS(), sr.Reversed()
	return [8]UUID{u, s, r, rs, sr, srs, rsr, srs.Reversed()}
}

// MustParseUUID is ParseUUID for UUIDs known to be valid, such as constants in tests and
// examples; it panics on an error.
func MustParseUUID(s string) UUID {
	u, err := ParseUUID(s)
	if err != nil {
		panic(err)
	}
	return u
}
