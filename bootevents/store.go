package bootevents

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/bettercompute/siteboot/hwid"
)

// A machine is held in one slot of the Timeline's slabs (machine: its MAC and its place in
// the least-recently-heard lists) and one byte slice, its data, holding everything else
// packed:
//
//	flags (1 byte: 1 the UUID follows); UUID (16 bytes); addresses (AddrsPerMachine,
//	each as pack.go writes one, addrNone when none)
//	then each boot, oldest first: start (8 bytes, ns since the epoch); last (uvarint, ns
//	after start); flags (1 byte: the count of ids in bits 0-2, 8 when the boot went past
//	DHCP); ids (8 bytes each); home (an address); events held, events dropped, records'
//	length (uvarints); the records (pack.go)
//
// A machine's data is read into a view, changed, and written back whole: a few hundred
// bytes a machine, one allocation that grows only when its size class is full.

// view is a machine's data read out.
type view struct {
	hasUUID bool
	uuid    hwid.UUID
	addrs   [AddrsPerMachine]netip.Addr
	boots   []bootView // oldest first
}

type bootView struct {
	start, last int64 // ns since the epoch
	ids         [IDsPerBoot]BootID
	home        netip.Addr // the boot's first address (an event's Addr, else its peer's)
	n           int
	dropped     uint32
	progressed  bool   // an event past DHCP (TFTP, HTTP, ...) was seen
	recs        []byte // the records (into the machine's data, or the Timeline's scratch)
}

func (b *bootView) nids() int {
	for i, id := range b.ids {
		if id.IsZero() {
			return i
		}
	}
	return len(b.ids)
}

const (
	dataUUID       = 1
	bootProgressed = 8
)

// maxBootHeader is the most bytes a boot's header takes.
const maxBootHeader = 8 + binary.MaxVarintLen64 + 1 + IDsPerBoot*8 + 1 + 16 + binary.MaxVarintLen16 + binary.MaxVarintLen32 + binary.MaxVarintLen32

// maxPrefix is the most bytes a machine's data takes before its boots.
const maxPrefix = 1 + 16 + AddrsPerMachine*(1+16)

// encode appends v to b.
func (v *view) encode(b []byte) []byte {
	var f byte
	if v.hasUUID {
		f |= dataUUID
	}
	b = append(b, f)
	if v.hasUUID {
		b = append(b, v.uuid[:]...)
	}
	for _, a := range v.addrs {
		b = appendAddr(b, a)
	}
	for i := range v.boots {
		bv := &v.boots[i]
		b = binary.LittleEndian.AppendUint64(b, uint64(bv.start))
		b = binary.AppendUvarint(b, uint64(max(bv.last-bv.start, 0)))
		k := bv.nids()
		f := byte(k)
		if bv.progressed {
			f |= bootProgressed
		}
		b = append(b, f)
		for _, id := range bv.ids[:k] {
			b = append(b, id[:]...)
		}
		b = appendAddr(b, bv.home)
		b = binary.AppendUvarint(b, uint64(bv.n))
		b = binary.AppendUvarint(b, uint64(bv.dropped))
		b = binary.AppendUvarint(b, uint64(len(bv.recs)))
		b = append(b, bv.recs...)
	}
	return b
}

// decodePrefix reads data's UUID and addresses into v and returns what follows.
func (v *view) decodePrefix(data []byte) []byte {
	v.hasUUID, v.uuid, v.addrs = false, hwid.UUID{}, [AddrsPerMachine]netip.Addr{}
	if len(data) == 0 { // a machine with no event yet
		return nil
	}
	u := unpacker{b: data}
	f := u.bytes(1)
	if f != nil && f[0]&dataUUID != 0 {
		if id := u.bytes(16); id != nil {
			v.uuid, v.hasUUID = hwid.UUID(id), true
		}
	}
	for i := range v.addrs {
		v.addrs[i] = u.addr()
	}
	return u.b
}

// decode reads data into v; v.boots' records are data's.
func (v *view) decode(data []byte) {
	u := unpacker{b: v.decodePrefix(data)}
	v.boots = v.boots[:0]
	for len(u.b) > 0 && !u.bad {
		var bv bootView
		if !u.boot(&bv) {
			break
		}
		v.boots = append(v.boots, bv)
	}
}

// boot reads one boot; false when data ends early (never, for data encode wrote).
func (u *unpacker) boot(bv *bootView) bool {
	s := u.bytes(8)
	if s == nil {
		return false
	}
	bv.start = int64(binary.LittleEndian.Uint64(s))
	bv.last = bv.start + int64(u.uvarint())
	f := u.bytes(1)
	if f == nil {
		return false
	}
	bv.progressed = f[0]&bootProgressed != 0
	for i := range min(int(f[0]&7), IDsPerBoot) {
		if id := u.bytes(8); id != nil {
			bv.ids[i] = BootID(id)
		}
	}
	bv.home = u.addr()
	bv.n = int(u.uvarint())
	bv.dropped = uint32(u.uvarint())
	bv.recs = u.bytes(u.uvarint())
	return !u.bad
}

// hasAddr reports whether data holds a as one of its machine's addresses.
func hasAddr(data []byte, a netip.Addr) bool {
	var v view
	v.decodePrefix(data)
	return slices.Contains(v.addrs[:], a)
}

// hasID reports whether one of data's boots has the boot id id.
func hasID(data []byte, id BootID) bool {
	var v view
	u := unpacker{b: v.decodePrefix(data)}
	for len(u.b) > 0 {
		var bv bootView
		if !u.boot(&bv) {
			return false
		}
		if slices.Contains(bv.ids[:], id) {
			return true
		}
	}
	return false
}

// index finds machines' slots by a key (a MAC, an address, a boot id) that the slot's
// machine holds: open addressing, linear probing, entries of 8 bytes and no pointer; the
// caller says whether a slot's machine holds the key it looks for.
type index struct {
	tab []entry // a power of two long, or nil
	n   int
}

type entry struct {
	slot int32 // the slot + 1; 0 is an empty entry
	h    uint32
}

// lookup returns the slot of the entry whose hash is h and whose machine holds the key
// (holds), and where the entry is.
func (x *index) lookup(h uint32, holds func(slot int32) bool) (slot int32, at int, ok bool) {
	if len(x.tab) == 0 {
		return 0, 0, false
	}
	mask := len(x.tab) - 1
	for i, k := int(h)&mask, 0; k < len(x.tab); i, k = (i+1)&mask, k+1 {
		e := x.tab[i]
		if e.slot == 0 {
			return 0, 0, false
		}
		if e.h == h && holds(e.slot-1) {
			return e.slot - 1, i, true
		}
	}
	return 0, 0, false
}

// set makes the key of hash h lead to slot: the entry found by holds is changed, else one
// is added.
func (x *index) set(h uint32, slot int32, holds func(slot int32) bool) {
	if _, at, ok := x.lookup(h, holds); ok {
		x.tab[at].slot = slot + 1
		return
	}
	if (x.n+1)*4 > len(x.tab)*3 {
		x.grow()
	}
	x.put(entry{slot: slot + 1, h: h})
	x.n++
}

func (x *index) put(e entry) {
	mask := len(x.tab) - 1
	i := int(e.h) & mask
	for x.tab[i].slot != 0 {
		i = (i + 1) & mask
	}
	x.tab[i] = e
}

func (x *index) grow() {
	old := x.tab
	x.tab = make([]entry, max(2*len(old), 16))
	for _, e := range old {
		if e.slot != 0 {
			x.put(e)
		}
	}
}

// del removes the entry at i, moving back the entries after it that would not be found
// past the hole.
func (x *index) del(i int) {
	mask := len(x.tab) - 1
	for j := (i + 1) & mask; x.tab[j].slot != 0; j = (j + 1) & mask {
		home := int(x.tab[j].h) & mask
		// the entry at j stays unless the hole at i lies between its home and j
		if (j-home)&mask >= (j-i)&mask {
			x.tab[i] = x.tab[j]
			i = j
		}
	}
	x.tab[i] = entry{}
	x.n--
}

// remove removes the entry of hash h leading to slot, if there is one.
func (x *index) remove(h uint32, slot int32) {
	if _, at, ok := x.lookup(h, func(s int32) bool { return s == slot }); ok {
		x.del(at)
	}
}

// hashes of the keys, seeded per Timeline so that no one can choose keys that collide.
type hasher struct{ seed maphash.Seed }

func (h hasher) mac(m hwid.MAC) uint32 { return uint32(maphash.Comparable(h.seed, m)) }

func (h hasher) addr(a netip.Addr) uint32 {
	if a.Is4() {
		return uint32(maphash.Comparable(h.seed, a.As4()))
	}
	return uint32(maphash.Comparable(h.seed, a.As16()))
}

func (h hasher) id(id BootID) uint32 { return uint32(maphash.Comparable(h.seed, id)) }
