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
//	stage and outcome (1 byte: stage | outcome<<4, when stage < 16 and outcome < 8; else
//	0x80, stage, outcome); flags (uvarint)
//	time since the boot's start (signed varint, ns); reason (uvarint: the Timeline's index)
//	then, as flags say: bytes, duration (varints), arch (uvarint), UUID (16 bytes, or none
//	when it is the machine's), boot id (8 bytes, or its index in the boot's ids), peer
//	(address, or none when it is the boot's; then port: 2 bytes), address (or none when it
//	is the boot's), detail (uvarint length, bytes; or its index in the Timeline's details)
//
// An address is a kind byte (IPv4, IPv6, IPv6 with a zone) and its 4 or 16 bytes (and the
// zone's uvarint length and bytes). The MAC is the machine's and is not kept. A record
// refers only to what does not change while its boot is held (the machine's first UUID,
// the boot's ids and first address), so dropping a record leaves the others readable.
const (
	// The flags most events have come first: a record of a step past DHCP (TFTP, HTTP,
	// the cache) has its flags in one byte. Of each pair the second is the first's short
	// form; a record has at most one of the two.
	packPeerHome    = 1 << iota // the peer's address is the boot's; its port follows
	packBytes                   // bytes follow
	packDuration                // a duration follows
	packDetailIndex             // the detail is the Timeline's details[k]; k follows
	packBootIDIndex             // the boot id is the boot's ids[k]; k follows
	packAddrHome                // the address is the boot's
	packUUIDMachine             // the UUID is the machine's
	packPeer                    // the peer's address and port follow
	packDetail                  // the detail follows
	packBootID                  // the boot id follows
	packAddr                    // an address follows
	packUUID                    // a UUID follows
	packArch                    // an arch follows
	packIPXE                    // the request came from iPXE
)

const (
	addrNone = iota
	addr4
	addr6
	addr6Zone
)

// maxZone is the longest IPv6 zone kept (an interface name); a longer one is dropped.
const maxZone = 16

// maxPacked is the most bytes one packed event takes (detail at MaxDetail).
const maxPacked = 3 + binary.MaxVarintLen16 + binary.MaxVarintLen64*4 + binary.MaxVarintLen16 + 16 + 8 +
	(1 + 16 + 1 + maxZone + 2) + (1 + 16 + 1 + maxZone) + binary.MaxVarintLen16 + MaxDetail

// packCtx is what a boot's records may refer to instead of holding it.
type packCtx struct {
	uuid    hwid.UUID // the machine's, when hasUUID
	hasUUID bool
	ids     *[IDsPerBoot]BootID
	home    netip.Addr // the boot's first address, zone-less; invalid when none yet
	details []string   // the Timeline's kept details (unpacking)
	detail  int        // e's detail's index in them, or -1 (packing)
}

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

// pack appends e's record to b; start is its boot's start (ns since the epoch), reason the
// reason's index.
func pack(b []byte, e *Event, start int64, reason uint16, c *packCtx) []byte {
	var flags uint64
	if e.HasArch {
		flags |= packArch
	}
	if e.HasUUID {
		if c.hasUUID && e.UUID == c.uuid {
			flags |= packUUIDMachine
		} else {
			flags |= packUUID
		}
	}
	if e.IPXE {
		flags |= packIPXE
	}
	idIndex := -1
	if !e.BootID.IsZero() {
		flags |= packBootID
		if c.ids != nil {
			if k := slices.Index(c.ids[:], e.BootID); k >= 0 {
				flags ^= packBootID | packBootIDIndex
				idIndex = k
			}
		}
	}
	if e.Detail != "" {
		if c.detail >= 0 {
			flags |= packDetailIndex
		} else {
			flags |= packDetail
		}
	}
	if e.Bytes != 0 {
		flags |= packBytes
	}
	if e.Duration != 0 {
		flags |= packDuration
	}
	if e.Peer.IsValid() {
		if c.home.IsValid() && e.Peer.Addr() == c.home {
			flags |= packPeerHome
		} else {
			flags |= packPeer
		}
	}
	if e.Addr.IsValid() {
		if c.home.IsValid() && e.Addr == c.home {
			flags |= packAddrHome
		} else {
			flags |= packAddr
		}
	}
	if e.Stage < 16 && e.Outcome < 8 {
		b = append(b, byte(e.Stage)|byte(e.Outcome)<<4)
	} else {
		b = append(b, 0x80, byte(e.Stage), byte(e.Outcome))
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendVarint(b, e.Time.UnixNano()-start)
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
	switch {
	case flags&packBootIDIndex != 0:
		b = append(b, byte(idIndex))
	case flags&packBootID != 0:
		b = append(b, e.BootID[:]...)
	}
	if flags&(packPeer|packPeerHome) != 0 {
		if flags&packPeer != 0 {
			b = appendAddr(b, e.Peer.Addr())
		}
		b = binary.BigEndian.AppendUint16(b, e.Peer.Port())
	}
	if flags&packAddr != 0 {
		b = appendAddr(b, e.Addr)
	}
	switch {
	case flags&packDetailIndex != 0:
		b = binary.AppendUvarint(b, uint64(c.detail))
	case flags&packDetail != 0:
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

// varint reads what binary.AppendVarint wrote: a uvarint of the zig-zag encoding.
func (u *unpacker) varint() int64 {
	x := u.uvarint()
	return int64(x>>1) ^ -int64(x&1)
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

// next decodes the next record into e; false at the end. c is the context the records
// were packed with (nil: only their lengths are wanted).
func (u *unpacker) next(e *Event, mac hwid.MAC, start int64, reasons []string, c *packCtx) bool {
	if u.bad || len(u.b) == 0 {
		return false
	}
	h := u.bytes(1)
	if h == nil {
		return false
	}
	stage, outcome := Stage(h[0]&0x0f), Outcome(h[0]>>4)
	if h[0]&0x80 != 0 {
		so := u.bytes(2)
		if so == nil {
			return false
		}
		stage, outcome = Stage(so[0]), Outcome(so[1])
	}
	flags := u.uvarint()
	*e = Event{MAC: mac, Stage: stage, Outcome: outcome, IPXE: flags&packIPXE != 0}
	if c == nil {
		c = &packCtx{}
	}
	e.Time = time.Unix(0, start+u.varint())
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
	switch {
	case flags&packUUIDMachine != 0:
		e.UUID, e.HasUUID = c.uuid, true
	case flags&packUUID != 0:
		if v := u.bytes(16); v != nil {
			e.UUID, e.HasUUID = hwid.UUID(v), true
		}
	}
	switch {
	case flags&packBootIDIndex != 0:
		if k := u.bytes(1); k != nil && c.ids != nil && int(k[0]) < len(c.ids) {
			e.BootID = c.ids[k[0]]
		}
	case flags&packBootID != 0:
		if v := u.bytes(8); v != nil {
			e.BootID = BootID(v)
		}
	}
	if flags&(packPeer|packPeerHome) != 0 {
		a := c.home
		if flags&packPeer != 0 {
			a = u.addr()
		}
		if p := u.bytes(2); p != nil {
			e.Peer = netip.AddrPortFrom(a, binary.BigEndian.Uint16(p))
		}
	}
	switch {
	case flags&packAddrHome != 0:
		e.Addr = c.home
	case flags&packAddr != 0:
		e.Addr = u.addr()
	}
	switch {
	case flags&packDetailIndex != 0:
		if k := u.uvarint(); k < uint64(len(c.details)) {
			e.Detail = c.details[k]
		}
	case flags&packDetail != 0:
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
		if !u.next(&e, hwid.MAC{}, 0, nil, nil) {
			return from, from
		}
	}
	return from, len(data) - len(u.b)
}

// unpackAll decodes every record of data.
func unpackAll(data []byte, n int, mac hwid.MAC, start int64, reasons []string, c *packCtx) []Event {
	out := make([]Event, 0, n)
	u := unpacker{b: data}
	var e Event
	for u.next(&e, mac, start, reasons, c) {
		out = append(out, e)
	}
	return slices.Clip(out)
}
