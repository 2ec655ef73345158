package discovery

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Digest identifies the content of a list of entries: the SHA-256 of a canonical encoding of
// the entries in MAC order. Equal content gives an equal digest, whatever the order of the
// entries and on whichever machine it is computed.
type Digest [32]byte

// String returns the digest in lower-case hexadecimal.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText implements encoding.TextMarshaler with the hexadecimal form.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// digestVersion starts the encoding so that a future change of it cannot collide.
const digestVersion = "siteboot-discovery-v1\x00"

// DigestOf returns the digest of entries: what [List.Snapshot] reports for the same content,
// so a control plane can recompute an agent's digest from the entries it received.
func DigestOf(entries []Entry) Digest {
	// Sort keys without pointers, so sorting moves no Entry and costs no write barriers.
	type key struct {
		mac hwid.MAC
		i   int32
	}
	keys := make([]key, len(entries))
	for i := range entries {
		keys[i] = key{entries[i].MAC, int32(i)}
	}
	slices.SortStableFunc(keys, func(a, b key) int { return bytes.Compare(a.mac[:], b.mac[:]) })
	h := sha256.New()
	buf := make([]byte, 0, 128)
	buf = append(buf, digestVersion...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(entries)))
	h.Write(buf)
	for _, k := range keys {
		buf = appendEntry(buf[:0], &entries[k.i])
		h.Write(buf)
	}
	var d Digest
	h.Sum(d[:0])
	return d
}

func appendEntry(b []byte, e *Entry) []byte {
	b = append(b, e.MAC[:]...)
	b = appendString(b, e.ProductUUID)
	b = appendString(b, e.Arch)
	switch {
	case !e.Relay.IsValid():
		b = append(b, 0)
	case e.Relay.Is4():
		a := e.Relay.As4()
		b = append(b, 4)
		b = append(b, a[:]...)
	default:
		a := e.Relay.As16()
		b = append(b, 6)
		b = append(b, a[:]...)
		b = appendString(b, e.Relay.Zone())
	}
	b = appendTime(b, e.FirstSeen)
	b = appendTime(b, e.LastSeen)
	b = binary.BigEndian.AppendUint64(b, e.Count)
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendTime encodes the instant, not the location or the monotonic reading.
func appendTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}
