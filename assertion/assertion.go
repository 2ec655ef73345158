package assertion

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Purpose is the purpose string bound into every signature this package makes or accepts.
const Purpose = "discovery-assertion"

// Version is the encoding version this package writes and reads (the first byte).
const Version = 1

// Limits of the encoding.
const (
	// MaxIDLen bounds the site, agent and workflow ids, in bytes. With it, every assertion
	// signed by an Ed25519 key fits in MaxEd25519TextLen characters.
	MaxIDLen = 56
	// MaxLifetime is the longest span from issued-at to not-after, and the oldest an
	// assertion may be when verified (plus the skew allowance).
	MaxLifetime = 15 * time.Minute
	// MaxSignatureLen bounds the signature: an ASN.1 ECDSA P-384 signature is at most 104
	// bytes; Ed25519's is 64.
	MaxSignatureLen = 104
	// MaxPayloadLen is the longest encoded assertion (three ids of MaxIDLen, an IPv6
	// address, a UUID).
	MaxPayloadLen = 1 + 3*(1+MaxIDLen) + 8 + 6 + 1 + 16 + 1 + 16 + 8 + 8
	// MaxEd25519TextLen is the longest text with an Ed25519 signature: 400 characters.
	MaxEd25519TextLen = (4*(MaxPayloadLen+ed25519SigLen) + 2) / 3
	// MaxTextLen is the longest text Decode considers, with the largest signature.
	MaxTextLen = (4*(MaxPayloadLen+MaxSignatureLen) + 2) / 3
)

const (
	ed25519SigLen = 64
	minPayloadLen = 1 + 2 + 2 + 8 + 6 + 1 + 1 + 1 + 8 + 8
)

// Assertion is what a site agent vouches for: "I, agent Agent of site Site, holding the boot
// lease at epoch Epoch, served MAC at IP (UUID) for Workflow at IssuedAt; trust this until
// NotAfter." Times are whole seconds; the encoding drops anything finer.
type Assertion struct {
	// Site is the site id: 1 to MaxIDLen bytes of [A-Za-z0-9._:-].
	Site string
	// Agent is the node id of the site agent that issued it, like Site.
	Agent string
	// Epoch is the boot lease's fencing epoch the agent held.
	Epoch uint64
	// MAC is the MAC address the agent served.
	MAC hwid.MAC
	// IP is the machine's address as the agent saw it; the zero Addr when unknown.
	// IPv4 is encoded in 4 bytes, anything else (IPv4-mapped IPv6 included) in 16; zones
	// are not allowed.
	IP netip.Addr
	// UUID is the machine's SMBIOS product UUID; the zero UUID means none is asserted.
	UUID hwid.UUID
	// Workflow is the workflow id the boot entry named, or "" (like Site, 0 to MaxIDLen bytes).
	Workflow string
	// IssuedAt is when the agent signed, by its clock.
	IssuedAt time.Time
	// NotAfter is the last moment the assertion may be used.
	NotAfter time.Time
}

// AppendBinary appends the version-1 encoding of a to b (see "Encoding" in the package
// documentation). It implements encoding.BinaryAppender.
func (a Assertion) AppendBinary(b []byte) ([]byte, error) {
	if err := checkID("site", a.Site, false); err != nil {
		return b, err
	}
	if err := checkID("agent", a.Agent, false); err != nil {
		return b, err
	}
	if err := checkID("workflow", a.Workflow, true); err != nil {
		return b, err
	}
	if a.IP.Zone() != "" {
		return b, fmt.Errorf("%w: IP %s has a zone", ErrInvalid, a.IP)
	}
	b = append(b, Version)
	b = appendString(b, a.Site)
	b = appendString(b, a.Agent)
	b = binary.BigEndian.AppendUint64(b, a.Epoch)
	b = append(b, a.MAC[:]...)
	switch {
	case !a.IP.IsValid():
		b = append(b, 0)
	case a.IP.Is4():
		ip := a.IP.As4()
		b = append(b, 4)
		b = append(b, ip[:]...)
	default:
		ip := a.IP.As16()
		b = append(b, 16)
		b = append(b, ip[:]...)
	}
	if a.UUID == (hwid.UUID{}) {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = append(b, a.UUID[:]...)
	}
	b = appendString(b, a.Workflow)
	b = binary.BigEndian.AppendUint64(b, uint64(a.IssuedAt.Unix()))
	b = binary.BigEndian.AppendUint64(b, uint64(a.NotAfter.Unix()))
	return b, nil
}

// MarshalBinary returns the version-1 encoding of a.
func (a Assertion) MarshalBinary() ([]byte, error) {
	return a.AppendBinary(make([]byte, 0, MaxPayloadLen))
}

// UnmarshalBinary decodes exactly one encoded assertion, with nothing after it. Times are
// in UTC.
func (a *Assertion) UnmarshalBinary(data []byte) error {
	v, n, err := decodePayload(data)
	if err != nil {
		return err
	}
	if n != len(data) {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(data)-n)
	}
	*a = v
	return nil
}

// decodePayload decodes the assertion at the start of data and returns how many bytes it
// took. It accepts only the canonical encoding: decoding then encoding gives data[:n] back.
func decodePayload(data []byte) (Assertion, int, error) {
	var a Assertion
	d := decoder{buf: data}
	if v := d.byte(); d.err == nil && v != Version {
		return a, 0, fmt.Errorf("%w: version %d", ErrMalformed, v)
	}
	a.Site = d.id("site", false)
	a.Agent = d.id("agent", false)
	a.Epoch = d.uint64()
	copy(a.MAC[:], d.bytes(6))
	switch n := d.byte(); {
	case d.err != nil:
	case n == 0:
	case n == 4:
		a.IP = netip.AddrFrom4([4]byte(d.bytes(4)))
	case n == 16:
		a.IP = netip.AddrFrom16([16]byte(d.bytes(16)))
	default:
		d.fail("IP length %d", n)
	}
	switch p := d.byte(); {
	case d.err != nil:
	case p == 0:
	case p == 1:
		copy(a.UUID[:], d.bytes(16))
		if d.err == nil && a.UUID == (hwid.UUID{}) {
			d.fail("UUID present but zero")
		}
	default:
		d.fail("UUID presence %d", p)
	}
	a.Workflow = d.id("workflow", true)
	a.IssuedAt = time.Unix(int64(d.uint64()), 0).UTC()
	a.NotAfter = time.Unix(int64(d.uint64()), 0).UTC()
	if d.err != nil {
		return Assertion{}, 0, d.err
	}
	return a, d.off, nil
}

// Signed is a decoded text: the assertion, the exact bytes that were signed (after the
// purpose prefix) and the signature. Decoding does not verify the signature.
type Signed struct {
	Assertion Assertion
	Payload   []byte
	Signature []byte
}

// Text returns the compact text form: base64url without padding of payload || signature.
func (s Signed) Text() string {
	b := make([]byte, 0, len(s.Payload)+len(s.Signature))
	b = append(b, s.Payload...)
	b = append(b, s.Signature...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode parses the text form of a signed assertion without verifying it. Only the
// canonical text decodes: no padding, no line breaks, unused bits zero, at most MaxTextLen
// characters, a signature of 1 to MaxSignatureLen bytes after the payload.
func Decode(text string) (Signed, error) {
	s, _, err := decode(text, "")
	return s, err
}

// decode is Decode; when purpose is not "", the bytes are decoded after room for the purpose
// prefix, which is filled in, and msg is the signed message (prefix and payload) in the same
// buffer as s.Payload.
func decode(text, purpose string) (s Signed, msg []byte, err error) {
	if len(text) > MaxTextLen {
		return Signed{}, nil, fmt.Errorf("%w: %d characters, more than %d", ErrMalformed, len(text), MaxTextLen)
	}
	var pre int
	if purpose != "" {
		pre = len("siteboot/") + len(purpose) + 1
	}
	buf := make([]byte, pre+base64.RawURLEncoding.DecodedLen(len(text)))
	n, err := base64.RawURLEncoding.Strict().Decode(buf[pre:], []byte(text))
	if err != nil {
		return Signed{}, nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	raw := buf[pre : pre+n]
	// The decoder skips CR and LF; only the canonical spelling is accepted.
	if base64.RawURLEncoding.EncodedLen(len(raw)) != len(text) {
		return Signed{}, nil, fmt.Errorf("%w: line breaks in text", ErrMalformed)
	}
	a, n, err := decodePayload(raw)
	if err != nil {
		return Signed{}, nil, err
	}
	sig := raw[n:]
	if len(sig) == 0 || len(sig) > MaxSignatureLen {
		return Signed{}, nil, fmt.Errorf("%w: signature of %d bytes", ErrMalformed, len(sig))
	}
	if purpose != "" {
		appendPrefix(buf[:0], purpose)
		msg = buf[: pre+n : pre+n]
	}
	return Signed{Assertion: a, Payload: raw[:n:n], Signature: sig}, msg, nil
}

// prefixLen is the length of the purpose prefix for Purpose.
const prefixLen = len("siteboot/") + len(Purpose) + 1

// appendPrefix appends what a signature covers before the payload: "siteboot/" + purpose +
// 0x00.
func appendPrefix(b []byte, purpose string) []byte {
	b = append(b, "siteboot/"...)
	b = append(b, purpose...)
	return append(b, 0)
}

func appendString(b []byte, s string) []byte {
	b = append(b, byte(len(s)))
	return append(b, s...)
}

// checkID reports whether s is a valid id: 1 (0 when optional) to MaxIDLen bytes of
// [A-Za-z0-9._:-].
func checkID(field, s string, optional bool) error {
	if (s == "" && !optional) || len(s) > MaxIDLen {
		return fmt.Errorf("%w: %s of %d bytes", ErrInvalid, field, len(s))
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return fmt.Errorf("%w: %s has byte 0x%02x", ErrInvalid, field, s[i])
		}
	}
	return nil
}

func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

// decoder reads big-endian fields; after the first failure every read returns zeros.
type decoder struct {
	buf []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format+" at byte %d", append([]any{ErrMalformed}, append(args, d.off)...)...)
	}
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return make([]byte, n)
	}
	if len(d.buf)-d.off < n {
		d.fail("truncated: want %d bytes", n)
		return make([]byte, n)
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) byte() byte { return d.bytes(1)[0] }

func (d *decoder) uint64() uint64 { return binary.BigEndian.Uint64(d.bytes(8)) }

func (d *decoder) id(field string, optional bool) string {
	n := int(d.byte())
	if d.err != nil {
		return ""
	}
	s := string(d.bytes(n))
	if d.err != nil {
		return ""
	}
	if err := checkID(field, s, optional); err != nil {
		d.fail("%s not an id", field)
		return ""
	}
	return s
}
