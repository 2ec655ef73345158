package bootevents

import (
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
)

// Defaults used when the corresponding Config field is zero, and fixed bounds.
const (
	// DefaultMaxMachines bounds the machines a Timeline holds.
	DefaultMaxMachines = 4096
	// DefaultBootsPerMachine is how many of a machine's boots are kept, the newest.
	DefaultBootsPerMachine = 3
	// DefaultEventsPerBoot bounds a boot's events (console lines apart). When a boot has
	// more, its first quarter is kept and the rest is the latest.
	DefaultEventsPerBoot = 16
	// MaxEventsPerBoot is the largest EventsPerBoot.
	MaxEventsPerBoot = 1<<16 - 1
	// DefaultLinesPerBoot bounds a boot's console lines; the latest are kept.
	DefaultLinesPerBoot = 8
	// DefaultBootGap is the silence after which a machine's next event begins a new boot.
	DefaultBootGap = 3 * time.Minute
	// MaxDetail is the longest Detail kept, in bytes; MaxLine the longest console line.
	MaxDetail = 96
	MaxLine   = 160
	// MaxReason is the longest Reason kept; MaxReasons how many distinct reasons a
	// Timeline keeps a copy of (each component has a few dozen at most); a reason beyond
	// is kept as "other".
	MaxReason  = 40
	MaxReasons = 256
	// MaxDetails is how many distinct details (a file's name, an image's digest) a
	// Timeline keeps one copy of, for every event naming them to refer to; a detail beyond
	// is kept in its event.
	MaxDetails = 1024
	// IDsPerBoot is how many boot ids (nonces of one boot's DHCP answers) a boot is found
	// by; AddrsPerMachine how many of a machine's addresses lead to it.
	IDsPerBoot      = 4
	AddrsPerMachine = 2
)

// Config is what a Timeline is built with.
type Config struct {
	// MaxMachines bounds the machines held. When a new machine needs room, the machine
	// least recently heard of among those never answered gives way first (a flood of
	// spoofed MACs pushes out only its own kind), then the least recently heard of.
	// Default DefaultMaxMachines; at most math.MaxInt32.
	MaxMachines int
	// BootsPerMachine is how many boots of each machine are kept. Default
	// DefaultBootsPerMachine.
	BootsPerMachine int
	// EventsPerBoot bounds each boot's events. Default DefaultEventsPerBoot; at least 4,
	// at most MaxEventsPerBoot.
	EventsPerBoot int
	// LinesPerBoot bounds each boot's console lines. Default DefaultLinesPerBoot.
	LinesPerBoot int
	// BootGap is the silence after which a machine's next event begins a new boot.
	// Default DefaultBootGap.
	BootGap time.Duration
	// Clock stamps events that come without a Time. Default clock.Real.
	Clock clock.Clock
	// Resolve, if set, names the machine behind an address no event taught the Timeline
	// (a host's neighbour table); consulted for events that carry no MAC.
	Resolve func(netip.Addr) (hwid.MAC, bool)
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.MaxMachines < 0 || c.BootsPerMachine < 0 || c.EventsPerBoot < 0 || c.LinesPerBoot < 0 || c.BootGap < 0 {
		return fmt.Errorf("%w: negative bound", ErrInvalid)
	}
	if c.EventsPerBoot > 0 && c.EventsPerBoot < 4 {
		return fmt.Errorf("%w: EventsPerBoot %d is below 4", ErrInvalid, c.EventsPerBoot)
	}
	if c.EventsPerBoot > MaxEventsPerBoot {
		return fmt.Errorf("%w: EventsPerBoot %d is above %d", ErrInvalid, c.EventsPerBoot, MaxEventsPerBoot)
	}
	if c.MaxMachines > math.MaxInt32 {
		return fmt.Errorf("%w: MaxMachines %d is above %d", ErrInvalid, c.MaxMachines, math.MaxInt32)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxMachines == 0 {
		c.MaxMachines = DefaultMaxMachines
	}
	if c.BootsPerMachine == 0 {
		c.BootsPerMachine = DefaultBootsPerMachine
	}
	if c.EventsPerBoot == 0 {
		c.EventsPerBoot = DefaultEventsPerBoot
	}
	if c.LinesPerBoot == 0 {
		c.LinesPerBoot = DefaultLinesPerBoot
	}
	if c.BootGap == 0 {
		c.BootGap = DefaultBootGap
	}
	c.Clock = clock.Or(c.Clock)
	return c
}

// MaxBytes is the most memory a Timeline with these settings holds once full, counting
// every event and line at its longest, the indexes and the kept reasons; the figure the
// flood test holds a Timeline to.
func (c Config) MaxBytes() int {
	c = c.withDefaults()
	const mapEntry = 48 // a Go map's cost per entry, keys and values this size, with its slack
	ev := int(unsafe.Sizeof(Event{}))
	// a machine's data at its longest, with the slack of the allocator's size classes (at
	// most 1/8)
	data := (maxPrefix + c.BootsPerMachine*(maxBootHeader+c.EventsPerBoot*maxPacked)) * 9 / 8
	// the index entries leading to a machine (its MAC, its addresses, its boots' ids), at
	// the lowest load an index has (3/8)
	keys := 1 + AddrsPerMachine + c.BootsPerMachine*IDsPerBoot
	index := keys * int(unsafe.Sizeof(entry{})) * 8 / 3
	// console lines, in a map of their own for the machines that sent any
	lines := mapEntry + int(unsafe.Sizeof(consoles{})) +
		c.BootsPerMachine*(int(unsafe.Sizeof(console{}))+c.LinesPerBoot*(ev+MaxLine))
	perMachine := int(unsafe.Sizeof(machine{})) + data + index + lines
	// the scratch a machine is read into and written from
	scratch := c.BootsPerMachine*int(unsafe.Sizeof(bootView{})) + 2*data + maxPacked
	return c.MaxMachines*perMachine + slabSize*int(unsafe.Sizeof(machine{})) + scratch +
		(MaxReasons+1)*(MaxReason+16+2*mapEntry) + MaxDetails*(MaxDetail+16+mapEntry)
}

// Timeline keeps the last boots of each machine, bounded (Config), and finds them by MAC
// and by boot id. It is a Sink. Safe for concurrent use.
type Timeline struct {
	cfg Config

	mu sync.Mutex
	// slabs hold the machines, slabSize a slab; slots are their indexes, those below
	// nslots in use.
	slabs  [][]machine
	nslots int32
	hash   hasher
	// keys finds a machine's slot by its MAC, by its addresses and by its boots' ids (one
	// index for the three: one table's slack, not three)
	keys  index
	count int // machines held
	// cons holds the console lines of the machines that sent any, by slot.
	cons    map[int32]*consoles
	reasons map[string]uint16 // a reason's index in reasonList, under both spellings
	// reasonList holds the kept reasons; index 0 is "" (none).
	reasonList []string
	details    map[string]uint16 // a detail's index in detailList
	detailList []string
	scratch    []byte // one event packed, before it is appended to its boot
	recs       []byte // a boot's records, changed
	enc        []byte // a machine's data, written
	view       view   // a machine's data, read
	// two least-recently-heard lists: machines never answered, and the others.
	quiet, heard list
	stats        Stats
}

// Stats counts a Timeline's work.
type Stats struct {
	Events          uint64 // events kept
	Unattributed    uint64 // events with no MAC whose address led to no machine
	MachinesEvicted uint64 // machines pushed out to make room
	BootsEvicted    uint64 // boots pushed out by a newer boot of the same machine
	EventsDropped   uint64 // events pushed out of a full boot
	LinesDropped    uint64 // console lines pushed out of a full boot
	Machines        uint64 // gauge: machines held
}

// slabSize is how many machines a slab holds.
const slabSize = 128

// machine is what a machine holds besides its data (store.go): 40 bytes in a slab, no
// pointer but data's, found by slot.
type machine struct {
	mac        hwid.MAC
	answered   bool
	prev, next int32 // slots in the machine's list; -1 none
	data       []byte
}

// consoles are a machine's console lines: a console for each of its boots.
type consoles struct{ boots []console }

// console is a boot's console lines, the latest.
type console struct {
	lines   []Event
	dropped uint64
}

func (t *Timeline) at(slot int32) *machine { return &t.slabs[slot/slabSize][slot%slabSize] }

func ctxOf(v *view, b *bootView) packCtx {
	return packCtx{uuid: v.uuid, hasUUID: v.hasUUID, ids: &b.ids, home: b.home}
}

// list is an intrusive doubly linked list of machines, least recently heard first.
type list struct{ head, tail int32 }

func (t *Timeline) remove(l *list, s int32) {
	m := t.at(s)
	if m.prev >= 0 {
		t.at(m.prev).next = m.next
	} else {
		l.head = m.next
	}
	if m.next >= 0 {
		t.at(m.next).prev = m.prev
	} else {
		l.tail = m.prev
	}
	m.prev, m.next = -1, -1
}

func (t *Timeline) pushBack(l *list, s int32) {
	m := t.at(s)
	m.prev, m.next = l.tail, -1
	if l.tail >= 0 {
		t.at(l.tail).next = s
	} else {
		l.head = s
	}
	l.tail = s
}

// NewTimeline returns an empty Timeline; the error is Validate's.
func NewTimeline(c Config) (*Timeline, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Timeline{
		cfg:        c.withDefaults(),
		hash:       hasher{seed: maphash.MakeSeed()},
		cons:       make(map[int32]*consoles),
		reasons:    make(map[string]uint16),
		reasonList: []string{""},
		details:    make(map[string]uint16),
		scratch:    make([]byte, 0, maxPacked),
		quiet:      list{-1, -1},
		heard:      list{-1, -1},
	}, nil
}

// Config returns the Timeline's settings with their defaults filled in.
func (t *Timeline) Config() Config { return t.cfg }

// Stats returns a snapshot of the counters.
func (t *Timeline) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Machines = uint64(t.count)
	return s
}

// slotOf returns mac's slot.
func (t *Timeline) slotOf(mac hwid.MAC) (int32, bool) {
	s, _, ok := t.keys.lookup(t.hash.mac(mac), func(s int32) bool { return t.at(s).mac == mac })
	return s, ok
}

// slotByAddr returns the slot of the machine whose address a is.
func (t *Timeline) slotByAddr(a netip.Addr) (int32, bool) {
	s, _, ok := t.keys.lookup(t.hash.addr(a), func(s int32) bool { return hasAddr(t.at(s).data, a) })
	return s, ok
}

// slotByID returns the slot of the machine whose boot id is id.
func (t *Timeline) slotByID(id BootID) (int32, bool) {
	s, _, ok := t.keys.lookup(t.hash.id(id), func(s int32) bool { return hasID(t.at(s).data, id) })
	return s, ok
}

// Learn records that addr is mac's (the address a DHCP answer went to), so that events
// and console lines naming only the address land in mac's timeline. It does nothing for
// a machine the Timeline does not hold.
func (t *Timeline) Learn(addr netip.Addr, mac hwid.MAC) {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() || mac.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.slotOf(mac); ok {
		v := &t.view
		v.decode(t.at(s).data)
		if t.learn(s, v, addr) {
			t.store(s, v)
		}
	}
}

// MACOf returns the machine the Timeline knows addr to be, from the events it kept or
// Learn.
func (t *Timeline) MACOf(addr netip.Addr) (hwid.MAC, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := usable(addr.Unmap().WithZone("")); a.IsValid() {
		if s, ok := t.slotByAddr(a); ok {
			return t.at(s).mac, true
		}
	}
	return hwid.MAC{}, false
}

// usable returns a, or the invalid Addr for an address no machine is found by.
func usable(a netip.Addr) netip.Addr {
	if !a.IsValid() || a.Zone() != "" || a == netip.IPv6Unspecified() {
		return netip.Addr{}
	}
	return a
}

// learn makes ip the newest of the address of the machine in slot s, read into v; false
// when nothing changed.
func (t *Timeline) learn(s int32, v *view, ip netip.Addr) bool {
	addr := usable(ip)
	if !addr.IsValid() {
		return false
	}
	owner, ok := t.slotByAddr(addr)
	if ok && owner == s {
		return false
	}
	if ok { // another machine's until now: it is no longer
		var ov view
		ov.decode(t.at(owner).data)
		for i, a := range ov.addrs {
			if a == addr {
				ov.addrs[i] = netip.Addr{}
			}
		}
		t.store(owner, &ov)
	}
	// the newest address first; the oldest gives way
	if last := v.addrs[len(v.addrs)-1]; last.IsValid() {
		if o, ok := t.slotByAddr(last); ok && o == s {
			t.keys.remove(t.hash.addr(last), s)
		}
	}
	copy(v.addrs[1:], v.addrs[:len(v.addrs)-1])
	v.addrs[0] = addr
	// the index's entry for addr, if any, was found by its owner's address, which is gone
	h := t.hash.addr(addr)
	if ok {
		t.keys.remove(h, owner)
	}
	t.keys.set(h, s, func(int32) bool { return false })
	return true
}

// store writes v as the data of the machine in slot s.
func (t *Timeline) store(s int32, v *view) {
	t.enc = v.encode(t.enc[:0])
	m := t.at(s)
	if cap(m.data) >= len(t.enc) {
		m.data = m.data[:len(t.enc)]
		copy(m.data, t.enc)
		return
	}
	// the room for this data (and the allocator's rounding): a machine's bytes stay its
	// own, whatever append's growth would give
	m.data = append([]byte(nil), t.enc...)
}

// Emit records e. An event with no MAC is put in the timeline of the machine its Addr or
// Peer's address is known to be (Learn, earlier events, Config.Resolve); one that leads
// nowhere is counted (Stats.Unattributed) and dropped.
func (t *Timeline) Emit(e Event) {
	if e.Time.IsZero() {
		e.Time = t.cfg.Clock.Now()
	}
	e.Addr = e.Addr.Unmap().WithZone("")
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.find(&e)
	if !ok {
		t.stats.Unattributed++
		return
	}
	m := t.at(s)
	e.MAC = m.mac
	if e.Stage == StageConsole {
		e.Reason = t.reasonList[t.reason(e.Reason)]
		e.Detail = strings.Clone(Printable(e.Detail, MaxLine))
	} else {
		e.Detail = Printable(e.Detail, MaxDetail) // copied as it is packed
	}
	v := &t.view
	v.decode(m.data)
	b := t.bootFor(s, v, &e)
	t.appendTo(s, v, b, e)
	if e.Addr.IsValid() {
		t.learn(s, v, e.Addr)
	}
	t.store(s, v)
	// the machine was heard of: to the back of its list
	if e.Outcome == OutcomeOK && !m.answered {
		t.remove(&t.quiet, s)
		m.answered = true
	} else {
		t.remove(t.listOf(m), s)
	}
	t.pushBack(t.listOf(m), s)
	t.stats.Events++
}

func (t *Timeline) listOf(m *machine) *list {
	if m.answered {
		return &t.heard
	}
	return &t.quiet
}

// find returns the slot of e's machine, making room for it when it is new and has a MAC.
func (t *Timeline) find(e *Event) (int32, bool) {
	if !e.MAC.IsZero() {
		if s, ok := t.slotOf(e.MAC); ok {
			return s, true
		}
		var s int32
		if t.count >= t.cfg.MaxMachines {
			s = t.evict()
		} else {
			s = t.nslots
			if int(s)%slabSize == 0 {
				t.slabs = append(t.slabs, make([]machine, slabSize))
			}
			t.nslots++
		}
		*t.at(s) = machine{mac: e.MAC, prev: -1, next: -1}
		t.keys.set(t.hash.mac(e.MAC), s, func(int32) bool { return false })
		t.count++
		t.pushBack(&t.quiet, s)
		return s, true
	}
	if !e.BootID.IsZero() {
		if s, ok := t.slotByID(e.BootID); ok {
			return s, true
		}
	}
	for _, a := range [2]netip.Addr{e.Addr, e.Peer.Addr().Unmap().WithZone("")} {
		if a = usable(a); !a.IsValid() {
			continue
		}
		if s, ok := t.slotByAddr(a); ok {
			return s, true
		}
		if t.cfg.Resolve != nil {
			if mac, ok := t.cfg.Resolve(a); ok && !mac.IsZero() {
				if s, ok := t.slotOf(mac); ok {
					return s, true
				}
			}
		}
	}
	return 0, false
}

// evict pushes out the machine least recently heard of among those never answered, else
// the least recently heard of, and returns its slot, now free.
func (t *Timeline) evict() int32 {
	l := &t.quiet
	if l.head < 0 {
		l = &t.heard
	}
	s := l.head
	t.remove(l, s)
	m := t.at(s)
	var v view
	v.decode(m.data)
	for i := range v.boots {
		t.dropIDs(s, &v.boots[i])
	}
	for _, a := range v.addrs {
		if a.IsValid() {
			if o, ok := t.slotByAddr(a); ok && o == s {
				t.keys.remove(t.hash.addr(a), s)
			}
		}
	}
	t.keys.remove(t.hash.mac(m.mac), s)
	t.count--
	delete(t.cons, s)
	*m = machine{prev: -1, next: -1}
	t.stats.MachinesEvicted++
	return s
}

// dropIDs removes from the index the ids of b, a boot of the machine in slot s, that lead
// to it.
func (t *Timeline) dropIDs(s int32, b *bootView) {
	for _, id := range b.ids {
		if !id.IsZero() {
			if o, ok := t.slotByID(id); ok && o == s {
				t.keys.remove(t.hash.id(id), s)
			}
		}
	}
}

// reason returns the index of r's kept copy in reasonList; past MaxReasons, "other"'s.
func (t *Timeline) reason(r string) uint16 {
	if r == "" {
		return 0
	}
	if k, ok := t.reasons[r]; ok {
		return k
	}
	if len(t.reasonList) > MaxReasons {
		r = "other"
		if k, ok := t.reasons[r]; ok {
			return k
		}
	}
	k := strings.Clone(Printable(r, MaxReason))
	if i, ok := t.reasons[k]; ok {
		t.reasons[r] = i
		return i
	}
	i := uint16(len(t.reasonList))
	t.reasonList = append(t.reasonList, k)
	t.reasons[k] = i
	t.reasons[r] = i // both spellings lead to the copy; at most twice MaxReasons + 1 keys
	return i
}

// detail returns the index of d's kept copy in detailList, keeping one while there is
// room; -1 when d is kept in its event.
func (t *Timeline) detail(d string) int {
	if d == "" {
		return -1
	}
	if k, ok := t.details[d]; ok {
		return int(k)
	}
	if len(t.detailList) >= MaxDetails {
		return -1
	}
	k := len(t.detailList)
	d = strings.Clone(d)
	t.detailList = append(t.detailList, d)
	t.details[d] = uint16(k)
	return k
}

// bootFor returns the index in v.boots of the boot e belongs to, beginning a new one where
// e starts one.
func (t *Timeline) bootFor(s int32, v *view, e *Event) int {
	if !e.BootID.IsZero() {
		if o, ok := t.slotByID(e.BootID); ok && o == s {
			for i := len(v.boots) - 1; i >= 0; i-- {
				if slices.Contains(v.boots[i].ids[:], e.BootID) {
					return i
				}
			}
		}
	}
	now := e.Time.UnixNano()
	cur := len(v.boots) - 1
	if cur < 0 || time.Duration(now-v.boots[cur].last) > t.cfg.BootGap || (e.Stage.dhcp() && !e.IPXE && v.boots[cur].progressed) {
		c := t.cons[s]
		if len(v.boots) >= t.cfg.BootsPerMachine {
			t.dropIDs(s, &v.boots[0])
			v.boots = slices.Delete(v.boots, 0, 1)
			if c != nil {
				c.boots = slices.Delete(c.boots, 0, 1)
			}
			t.stats.BootsEvicted++
		}
		v.boots = append(v.boots, bootView{start: now, last: now})
		if c != nil {
			c.boots = append(c.boots, console{})
		}
		cur = len(v.boots) - 1
	}
	b := &v.boots[cur]
	if !e.BootID.IsZero() && !slices.Contains(b.ids[:], e.BootID) {
		for i, id := range b.ids {
			if id.IsZero() {
				b.ids[i] = e.BootID
				// the machine holding e's id until now (if another) holds it no longer in the index
				t.keys.set(t.hash.id(e.BootID), s, func(o int32) bool { return o != s && hasID(t.at(o).data, e.BootID) })
				break
			}
		}
	}
	return cur
}

func (t *Timeline) appendTo(s int32, v *view, bi int, e Event) {
	b := &v.boots[bi]
	if now := e.Time.UnixNano(); now > b.last {
		b.last = now
	}
	if e.Stage == StageConsole {
		cs := t.cons[s]
		if cs == nil {
			cs = &consoles{}
			t.cons[s] = cs
		}
		for len(cs.boots) < len(v.boots) { // a console for each boot (bootFor keeps them in step)
			cs.boots = append(cs.boots, console{})
		}
		c := &cs.boots[bi]
		if len(c.lines) >= t.cfg.LinesPerBoot {
			c.lines = slices.Delete(c.lines, 0, 1)
			c.dropped++
			t.stats.LinesDropped++
		}
		c.lines = append(c.lines, e)
		return
	}
	if !e.Stage.dhcp() && e.Stage != StageBMC && e.Stage != StageFence {
		b.progressed = true
	}
	if !b.home.IsValid() {
		if b.home = usable(e.Addr); !b.home.IsValid() {
			b.home = usable(e.Peer.Addr())
		}
	}
	if e.HasUUID && !v.hasUUID {
		v.uuid, v.hasUUID = e.UUID, true
	}
	from, to := len(b.recs), len(b.recs)
	if b.n >= t.cfg.EventsPerBoot {
		from, to = skip(b.recs, t.cfg.EventsPerBoot/4)
		b.n--
		if b.dropped < math.MaxUint32 {
			b.dropped++
		}
		t.stats.EventsDropped++
	}
	c := ctxOf(v, b)
	c.detail = t.detail(e.Detail)
	t.scratch = pack(t.scratch[:0], &e, b.start, t.reason(e.Reason), &c)
	t.recs = append(append(append(t.recs[:0], b.recs[:from]...), b.recs[to:]...), t.scratch...)
	b.recs = t.recs
	b.n++
}

// Machine is one machine's timeline, as a Timeline serves it (and as JSON).
type Machine struct {
	MAC   hwid.MAC     `json:"mac"`
	Addrs []netip.Addr `json:"addrs,omitempty"`
	// Answered is set once any component answered the machine.
	Answered bool `json:"answered"`
	// Boots are the last boots, oldest first.
	Boots []Boot `json:"boots"`
}

// Boot is one boot of a machine: its events in the order they were kept.
type Boot struct {
	IDs           []BootID  `json:"boot_ids,omitempty"`
	Start         time.Time `json:"start"`
	Last          time.Time `json:"last"`
	Events        []Event   `json:"events"`
	EventsDropped uint64    `json:"events_dropped,omitempty"`
	// Console holds the machine's own console lines (Stage StageConsole), the latest.
	Console      []Line `json:"console,omitempty"`
	LinesDropped uint64 `json:"lines_dropped,omitempty"`
}

// Line is a console line.
type Line struct {
	Time     time.Time      `json:"time"`
	Peer     netip.AddrPort `json:"peer,omitzero"`
	Severity string         `json:"severity,omitempty"`
	Text     string         `json:"text"`
}

// Last returns the newest boot; ok is false when there is none.
func (m Machine) Last() (Boot, bool) {
	if len(m.Boots) == 0 {
		return Boot{}, false
	}
	return m.Boots[len(m.Boots)-1], true
}

// Machine returns mac's timeline; ok is false when the Timeline holds no event of mac.
func (t *Timeline) Machine(mac hwid.MAC) (Machine, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.slotOf(mac)
	if !ok {
		return Machine{}, false
	}
	return t.snapshot(s), true
}

// ByBootID returns the timeline of the machine whose boot id is id and the index of that
// boot in its Boots; ok is false when no boot held has that id.
func (t *Timeline) ByBootID(id BootID) (m Machine, boot int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id.IsZero() {
		return Machine{}, 0, false
	}
	s, ok := t.slotByID(id)
	if !ok {
		return Machine{}, 0, false
	}
	m = t.snapshot(s)
	for i, b := range m.Boots {
		if slices.Contains(b.IDs, id) {
			return m, i, true
		}
	}
	return Machine{}, 0, false
}

// Len returns the number of machines held.
func (t *Timeline) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count
}

func (t *Timeline) snapshot(s int32) Machine {
	m := t.at(s)
	var v view
	v.decode(m.data)
	out := Machine{MAC: m.mac, Answered: m.answered, Boots: make([]Boot, 0, len(v.boots))}
	for _, a := range v.addrs {
		if a.IsValid() {
			out.Addrs = append(out.Addrs, a)
		}
	}
	cs := t.cons[s]
	for i := range v.boots {
		b := &v.boots[i]
		c := ctxOf(&v, b)
		c.details = t.detailList
		ob := Boot{Start: time.Unix(0, b.start), Last: time.Unix(0, b.last),
			Events: unpackAll(b.recs, b.n, m.mac, b.start, t.reasonList, &c), EventsDropped: uint64(b.dropped)}
		if ob.Events == nil {
			ob.Events = []Event{}
		}
		for _, id := range b.ids {
			if !id.IsZero() {
				ob.IDs = append(ob.IDs, id)
			}
		}
		if cs != nil && i < len(cs.boots) {
			ob.LinesDropped = cs.boots[i].dropped
			for _, l := range cs.boots[i].lines {
				ob.Console = append(ob.Console, Line{Time: l.Time, Peer: l.Peer, Severity: l.Reason, Text: l.Detail})
			}
		}
		out.Boots = append(out.Boots, ob)
	}
	return out
}
