package bootevents

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// A boot's events are kept packed, one record after another in one byte slice, so that a
// machine's timeline costs a few hundred bytes rather than a full Event per step:
//
//	stage, outcome, flags (3 bytes)
//	time since the boot's start (signed varint, ns); reason (uvarint: the Timeline's index)
//	then, as flags say: bytes, duration (varints), arch (uvarint), UUID (16), boot id (8),
//	peer (address, then port: 2 bytes), address, detail (uvarint length, bytes)
//
// An address is a kind byte (none, IPv4, IPv6, IPv6 with a zone) and its 4 or 16 bytes (and
// the zone's uvarint length and bytes). The MAC is the machine's and is not kept.
const (
	packArch = 1 << iota
	packUUID
	packIPXE
	packBootID
	packDetail
	packBytes
	packDuration
	packPeer
)

const (
	addrNone = iota
	addr4
	addr6
	addr6Zone
)

// packSlack is the room a boot's bytes get beyond the event that made them grow.
const packSlack = 48

// maxZone is the longest IPv6 zone kept (an interface name); a longer one is dropped.
const maxZone = 16

// maxPacked is the most bytes one packed event takes (detail at MaxDetail).
const maxPacked = 3 + binary.MaxVarintLen64*4 + binary.MaxVarintLen16 + 16 + 8 +
	(1 + 16 + 1 + maxZone + 2) + (1 + 16 + 1 + maxZone) + binary.MaxVarintLen16 + MaxDetail

func appendAddr(b []byte, a netip.Addr) []byte {
	switch {
	case !a.IsValid():
		return append(b, addrNone)
	case a.Is4():
		v := a.As4()
		return append(append(b, addr4), v[:]...)
	}
	v := a.As16()
	z := a.Zone()
	if z == "" || len(z) > maxZone {
		return append(append(b, addr6), v[:]...)
	}
	b = append(append(b, addr6Zone), v[:]...)
	b = binary.AppendUvarint(b, uint64(len(z)))
	return append(b, z...)
}

// pack appends e's record to b; start is its boot's start, reason the reason's index.
func pack(b []byte, e *Event, start time.Time, reason uint16) []byte {
	var flags byte
	if e.HasArch {
		flags |= packArch
	}
	if e.HasUUID {
		flags |= packUUID
	}
	if e.IPXE {
		flags |= packIPXE
	}
	if !e.BootID.IsZero() {
		flags |= packBootID
	}
	if e.Detail != "" {
		flags |= packDetail
	}
	if e.Bytes != 0 {
		flags |= packBytes
	}
	if e.Duration != 0 {
		flags |= packDuration
	}
	if e.Peer.IsValid() {
		flags |= packPeer
	}
	b = append(b, byte(e.Stage), byte(e.Outcome), flags)
	b = binary.AppendVarint(b, int64(e.Time.Sub(start)))
	b = binary.AppendUvarint(b, uint64(reason))
	if flags&packBytes != 0 {
		b = binary.AppendUvarint(b, e.Bytes)
	}
	if flags&packDuration != 0 {
		b = binary.AppendVarint(b, int64(e.Duration))
	}
	if flags&packArch != 0 {
		b = binary.AppendUvarint(b, uint64(e.Arch))
	}
	if flags&packUUID != 0 {
		b = append(b, e.UUID[:]...)
	}
	if flags&packBootID != 0 {
		b = append(b, e.BootID[:]...)
	}
	if flags&packPeer != 0 {
		b = appendAddr(b, e.Peer.Addr())
		b = binary.BigEndian.AppendUint16(b, e.Peer.Port())
	}
	b = appendAddr(b, e.Addr)
	if flags&packDetail != 0 {
		b = binary.AppendUvarint(b, uint64(len(e.Detail)))
		b = append(b, e.Detail...)
	}
	return b
}

// unpacker reads the records pack wrote. The records are the Timeline's own: a short or
// malformed one (which pack never writes) ends the reading.
type unpacker struct {
	b   []byte
	bad bool
}

func (u *unpacker) bytes(n uint64) []byte {
	if u.bad || uint64(len(u.b)) < n {
		u.bad = true
		return nil
	}
	v := u.b[:n]
	u.b = u.b[n:]
	return v
}

func (u *unpacker) uvarint() uint64 {
	if u.bad {
		return 0
	}
	v, n := binary.Uvarint(u.b)
	if n <= 0 {
		u.bad = true
		return 0
	}
	u.b = u.b[n:]
	return v
}

func (u *unpacker) varint() int64 {
	if u.bad {
		return 0
	}
	v, n := binary.Varint(u.b)
	if n <= 0 {
		u.bad = true
		return 0
	}
	u.b = u.b[n:]
	return v
}

func (u *unpacker) addr() netip.Addr {
	k := u.bytes(1)
	if k == nil {
		return netip.Addr{}
	}
	switch k[0] {
	case addr4:
		if v := u.bytes(4); v != nil {
			return netip.AddrFrom4([4]byte(v))
		}
	case addr6, addr6Zone:
		v := u.bytes(16)
		if v == nil {
			return netip.Addr{}
		}
		a := netip.AddrFrom16([16]byte(v))
		if k[0] == addr6Zone {
			z := u.bytes(u.uvarint())
			a = a.WithZone(string(z))
		}
		return a
	}
	return netip.Addr{}
}

// next decodes the next record into e; false at the end.
func (u *unpacker) next(e *Event, mac hwid.MAC, start time.Time, reasons []string) bool {
	if u.bad || len(u.b) == 0 {
		return false
	}
	h := u.bytes(3)
	if h == nil {
		return false
	}
	flags := h[2]
	*e = Event{MAC: mac, Stage: Stage(h[0]), Outcome: Outcome(h[1]), IPXE: flags&packIPXE != 0}
	e.Time = start.Add(time.Duration(u.varint()))
	if r := u.uvarint(); r < uint64(len(reasons)) {
		e.Reason = reasons[r]
	}
	if flags&packBytes != 0 {
		e.Bytes = u.uvarint()
	}
	if flags&packDuration != 0 {
		e.Duration = time.Duration(u.varint())
	}
	if flags&packArch != 0 {
		e.Arch, e.HasArch = hwid.Arch(u.uvarint()), true
	}
	if flags&packUUID != 0 {
		if v := u.bytes(16); v != nil {
			e.UUID, e.HasUUID = hwid.UUID(v), true
		}
	}
	if flags&packBootID != 0 {
		if v := u.bytes(8); v != nil {
			e.BootID = BootID(v)
		}
	}
	if flags&packPeer != 0 {
		a := u.addr()
		if p := u.bytes(2); p != nil {
			e.Peer = netip.AddrPortFrom(a, binary.BigEndian.Uint16(p))
		}
	}
	e.Addr = u.addr()
	if flags&packDetail != 0 {
		e.Detail = string(u.bytes(u.uvarint()))
	}
	return !u.bad
}

// skip returns the offsets of record i of data: where it begins and ends.
func skip(data []byte, i int) (from, to int) {
	u := unpacker{b: data}
	var e Event
	for k := 0; k <= i; k++ {
		from = len(data) - len(u.b)
		if !u.next(&e, hwid.MAC{}, time.Time{}, nil) {
			return from, from
		}
	}
	return from, len(data) - len(u.b)
}

// unpackAll decodes every record of data.
func unpackAll(data []byte, n int, mac hwid.MAC, start time.Time, reasons []string) []Event {
	out := make([]Event, 0, n)
	u := unpacker{b: data}
	var e Event
	for u.next(&e, mac, start, reasons) {
		out = append(out, e)
	}
	return slices.Clip(out)
}
