package bootevents

import (
	"fmt"
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
	// Default DefaultMaxMachines.
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
	// the packed events, with the slack of the allocator's size classes (at most 1/8)
	packed := c.EventsPerBoot * maxPacked * 9 / 8
	lines := int(unsafe.Sizeof(console{})) + c.LinesPerBoot*(ev+MaxLine)
	perBoot := int(unsafe.Sizeof(boot{})) + packed + lines +
		IDsPerBoot*(int(unsafe.Sizeof(BootID{}))+int(unsafe.Sizeof(&machine{}))+mapEntry)
	perMachine := int(unsafe.Sizeof(machine{})) + c.BootsPerMachine*perBoot +
		int(unsafe.Sizeof(hwid.MAC{})) + mapEntry + AddrsPerMachine*(int(unsafe.Sizeof(addr16{}))+mapEntry+8)
	return c.MaxMachines*perMachine + (MaxReasons+1)*(MaxReason+16+2*mapEntry) +
		MaxDetails*(MaxDetail+16+mapEntry) + maxPacked
}

// Timeline keeps the last boots of each machine, bounded (Config), and finds them by MAC
// and by boot id. It is a Sink. Safe for concurrent use.
type Timeline struct {
	cfg Config

	mu       sync.Mutex
	machines map[hwid.MAC]*machine
	byAddr   addrIndex
	byID     map[BootID]*machine
	reasons  map[string]uint16 // a reason's index in reasonList, under both spellings
	// reasonList holds the kept reasons; index 0 is "" (none).
	reasonList []string
	details    map[string]uint16 // a detail's index in detailList
	detailList []string
	scratch    []byte // one event packed, before it is appended to its boot
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

// A machine and its boots are held in two allocations besides their events' bytes: a
// machine's struct and its boots' array (values, grown to BootsPerMachine as needed).
type machine struct {
	mac      hwid.MAC
	answered bool
	hasUUID  bool
	// uuid is the first UUID the machine sent; records with the same one refer to it.
	uuid       hwid.UUID
	addrs      [AddrsPerMachine]addr16
	boots      []boot // oldest first
	prev, next *machine
}

type boot struct {
	ids         [IDsPerBoot]BootID
	start, last int64 // ns since the epoch
	// data holds the boot's n events, packed (pack.go).
	data []byte
	// home is the boot's first address (an event's Addr, else its peer's); records naming
	// it refer to it.
	home          addr16
	con           *console // nil until a console line
	eventsDropped uint32
	n             uint16
	progressed    bool // an event past DHCP (TFTP, HTTP, ...) was seen
}

// console is a boot's console lines, the latest.
type console struct {
	lines   []Event
	dropped uint64
}

// addr16 is an address held in 16 bytes (an IPv4 address as IPv4-mapped, no zone); the
// zero addr16 is none. A Timeline holds addresses unmapped, so the round trip is exact.
type addr16 [16]byte

func addrOf(a netip.Addr) addr16 {
	if !a.IsValid() || a.Zone() != "" || a == netip.IPv6Unspecified() {
		return addr16{}
	}
	return a.As16()
}

func (a addr16) addr() netip.Addr {
	if a == (addr16{}) {
		return netip.Addr{}
	}
	return netip.AddrFrom16(a).Unmap()
}

// addrIndex finds machines by address: IPv4 addresses in a map of their own, keyed by
// their 4 bytes (a third of the cost of a 16-byte key a machine).
type addrIndex struct {
	v4 map[[4]byte]*machine
	v6 map[addr16]*machine
}

func (a addr16) v4() ([4]byte, bool) {
	if [12]byte(a[:12]) == [12]byte{10: 0xff, 11: 0xff} {
		return [4]byte(a[12:]), true
	}
	return [4]byte{}, false
}

func (x *addrIndex) get(a addr16) *machine {
	if a == (addr16{}) {
		return nil
	}
	if k, ok := a.v4(); ok {
		return x.v4[k]
	}
	return x.v6[a]
}

func (x *addrIndex) set(a addr16, m *machine) {
	if k, ok := a.v4(); ok {
		x.v4[k] = m
	} else {
		x.v6[a] = m
	}
}

func (x *addrIndex) del(a addr16) {
	if k, ok := a.v4(); ok {
		delete(x.v4, k)
	} else {
		delete(x.v6, a)
	}
}

func (m *machine) ctx(b *boot) packCtx {
	return packCtx{uuid: m.uuid, hasUUID: m.hasUUID, ids: &b.ids, home: b.home.addr()}
}

// list is an intrusive doubly linked list of machines, least recently heard first.
type list struct{ head, tail *machine }

func (l *list) remove(m *machine) {
	if m.prev != nil {
		m.prev.next = m.next
	} else {
		l.head = m.next
	}
	if m.next != nil {
		m.next.prev = m.prev
	} else {
		l.tail = m.prev
	}
	m.prev, m.next = nil, nil
}

func (l *list) pushBack(m *machine) {
	m.prev, m.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = m
	} else {
		l.head = m
	}
	l.tail = m
}

// NewTimeline returns an empty Timeline; the error is Validate's.
func NewTimeline(c Config) (*Timeline, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Timeline{
		cfg:        c.withDefaults(),
		machines:   make(map[hwid.MAC]*machine),
		byAddr:     addrIndex{v4: make(map[[4]byte]*machine), v6: make(map[addr16]*machine)},
		byID:       make(map[BootID]*machine),
		reasons:    make(map[string]uint16),
		reasonList: []string{""},
		details:    make(map[string]uint16),
		scratch:    make([]byte, 0, maxPacked),
	}, nil
}

// Config returns the Timeline's settings with their defaults filled in.
func (t *Timeline) Config() Config { return t.cfg }

// Stats returns a snapshot of the counters.
func (t *Timeline) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Machines = uint64(len(t.machines))
	return s
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
	if m := t.machines[mac]; m != nil {
		t.learn(m, addr)
	}
}

// MACOf returns the machine the Timeline knows addr to be, from the events it kept or
// Learn.
func (t *Timeline) MACOf(addr netip.Addr) (hwid.MAC, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := addrOf(addr.Unmap().WithZone("")); a != (addr16{}) {
		if m := t.byAddr.get(a); m != nil {
			return m.mac, true
		}
	}
	return hwid.MAC{}, false
}

func (t *Timeline) learn(m *machine, ip netip.Addr) {
	addr := addrOf(ip)
	if addr == (addr16{}) {
		return
	}
	if old := t.byAddr.get(addr); old == m {
		return
	} else if old != nil {
		for i, a := range old.addrs {
			if a == addr {
				old.addrs[i] = addr16{}
			}
		}
	}
	// the newest address first; the oldest gives way
	if last := m.addrs[len(m.addrs)-1]; last != (addr16{}) && t.byAddr.get(last) == m {
		t.byAddr.del(last)
	}
	copy(m.addrs[1:], m.addrs[:len(m.addrs)-1])
	m.addrs[0] = addr
	t.byAddr.set(addr, m)
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
	m := t.find(&e)
	if m == nil {
		t.stats.Unattributed++
		return
	}
	e.MAC = m.mac
	if e.Stage == StageConsole {
		e.Reason = t.reasonList[t.reason(e.Reason)]
		e.Detail = strings.Clone(Printable(e.Detail, MaxLine))
	} else {
		e.Detail = Printable(e.Detail, MaxDetail) // copied as it is packed
	}
	b := t.bootFor(m, &e)
	t.appendTo(m, b, e)
	if e.Addr.IsValid() {
		t.learn(m, e.Addr)
	}
	// the machine was heard of: to the back of its list
	if e.Outcome == OutcomeOK && !m.answered {
		t.quiet.remove(m)
		m.answered = true
	} else {
		t.listOf(m).remove(m)
	}
	t.listOf(m).pushBack(m)
	t.stats.Events++
}

func (t *Timeline) listOf(m *machine) *list {
	if m.answered {
		return &t.heard
	}
	return &t.quiet
}

// find returns the machine of e, making room for it when it is new and has a MAC.
func (t *Timeline) find(e *Event) *machine {
	if !e.MAC.IsZero() {
		if m := t.machines[e.MAC]; m != nil {
			return m
		}
		if len(t.machines) >= t.cfg.MaxMachines {
			t.evict()
		}
		m := &machine{mac: e.MAC}
		t.machines[e.MAC] = m
		t.quiet.pushBack(m)
		return m
	}
	if !e.BootID.IsZero() {
		if m := t.byID[e.BootID]; m != nil {
			return m
		}
	}
	for _, a := range [2]netip.Addr{e.Addr, e.Peer.Addr().Unmap().WithZone("")} {
		if !a.IsValid() {
			continue
		}
		if m := t.byAddr.get(addrOf(a)); m != nil {
			return m
		}
		if t.cfg.Resolve != nil {
			if mac, ok := t.cfg.Resolve(a); ok && !mac.IsZero() {
				if m := t.machines[mac]; m != nil {
					return m
				}
			}
		}
	}
	return nil
}

func (t *Timeline) evict() {
	m := t.quiet.head
	if m == nil {
		m = t.heard.head
	}
	if m == nil {
		return
	}
	t.listOf(m).remove(m)
	for i := range m.boots {
		t.dropIDs(m, &m.boots[i])
	}
	for _, a := range m.addrs {
		if a != (addr16{}) && t.byAddr.get(a) == m {
			t.byAddr.del(a)
		}
	}
	delete(t.machines, m.mac)
	t.stats.MachinesEvicted++
}

func (t *Timeline) dropIDs(m *machine, b *boot) {
	for _, id := range b.ids {
		if !id.IsZero() && t.byID[id] == m {
			delete(t.byID, id)
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

// bootFor returns the boot e belongs to, beginning a new one where e starts one. The
// pointer is good until the machine's next boot begins.
func (t *Timeline) bootFor(m *machine, e *Event) *boot {
	if !e.BootID.IsZero() && t.byID[e.BootID] == m {
		for i := len(m.boots) - 1; i >= 0; i-- {
			if slices.Contains(m.boots[i].ids[:], e.BootID) {
				return &m.boots[i]
			}
		}
	}
	now := e.Time.UnixNano()
	var cur *boot
	if n := len(m.boots); n > 0 {
		cur = &m.boots[n-1]
	}
	if cur == nil || time.Duration(now-cur.last) > t.cfg.BootGap || (e.Stage.dhcp() && !e.IPXE && cur.progressed) {
		if len(m.boots) >= t.cfg.BootsPerMachine {
			t.dropIDs(m, &m.boots[0])
			copy(m.boots, m.boots[1:])
			m.boots = m.boots[:len(m.boots)-1]
			t.stats.BootsEvicted++
		}
		if len(m.boots) == cap(m.boots) { // grown by hand: to BootsPerMachine, no further
			bs := make([]boot, len(m.boots), min(max(2*cap(m.boots), 1), t.cfg.BootsPerMachine))
			copy(bs, m.boots)
			m.boots = bs
		}
		m.boots = append(m.boots, boot{start: now, last: now})
		cur = &m.boots[len(m.boots)-1]
	}
	if !e.BootID.IsZero() && !slices.Contains(cur.ids[:], e.BootID) {
		for i, id := range cur.ids {
			if id.IsZero() {
				cur.ids[i] = e.BootID
				t.byID[e.BootID] = m
				break
			}
		}
	}
	return cur
}

func (t *Timeline) appendTo(m *machine, b *boot, e Event) {
	if now := e.Time.UnixNano(); now > b.last {
		b.last = now
	}
	if e.Stage == StageConsole {
		if b.con == nil {
			b.con = &console{}
		}
		c := b.con
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
	if b.home == (addr16{}) {
		if b.home = addrOf(e.Addr); b.home == (addr16{}) {
			b.home = addrOf(e.Peer.Addr())
		}
	}
	if e.HasUUID && !m.hasUUID {
		m.uuid, m.hasUUID = e.UUID, true
	}
	if int(b.n) >= t.cfg.EventsPerBoot {
		from, to := skip(b.data, t.cfg.EventsPerBoot/4)
		b.data = append(b.data[:from], b.data[to:]...)
		b.n--
		if b.eventsDropped < math.MaxUint32 {
			b.eventsDropped++
		}
		t.stats.EventsDropped++
	}
	c := m.ctx(b)
	c.detail = t.detail(e.Detail)
	t.scratch = pack(t.scratch[:0], &e, b.start, t.reason(e.Reason), &c)
	if cap(b.data)-len(b.data) < len(t.scratch) {
		// Exactly the room for this event (and the allocator's rounding): a boot's bytes
		// stay its events', whatever append's growth would give.
		b.data = slices.Concat(b.data, t.scratch)
	} else {
		b.data = append(b.data, t.scratch...)
	}
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
	m := t.machines[mac]
	if m == nil {
		return Machine{}, false
	}
	return t.snapshot(m), true
}

// ByBootID returns the timeline of the machine whose boot id is id and the index of that
// boot in its Boots; ok is false when no boot held has that id.
func (t *Timeline) ByBootID(id BootID) (m Machine, boot int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mm := t.byID[id]
	if id.IsZero() || mm == nil {
		return Machine{}, 0, false
	}
	for i := range mm.boots {
		if slices.Contains(mm.boots[i].ids[:], id) {
			return t.snapshot(mm), i, true
		}
	}
	return Machine{}, 0, false
}

// Len returns the number of machines held.
func (t *Timeline) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.machines)
}

func (t *Timeline) snapshot(m *machine) Machine {
	out := Machine{MAC: m.mac, Answered: m.answered, Boots: make([]Boot, 0, len(m.boots))}
	for _, a := range m.addrs {
		if a != (addr16{}) {
			out.Addrs = append(out.Addrs, a.addr())
		}
	}
	for i := range m.boots {
		b := &m.boots[i]
		c := m.ctx(b)
		c.details = t.detailList
		ob := Boot{Start: time.Unix(0, b.start), Last: time.Unix(0, b.last),
			Events: unpackAll(b.data, int(b.n), m.mac, b.start, t.reasonList, &c), EventsDropped: uint64(b.eventsDropped)}
		if ob.Events == nil {
			ob.Events = []Event{}
		}
		for _, id := range b.ids {
			if !id.IsZero() {
				ob.IDs = append(ob.IDs, id)
			}
		}
		if b.con != nil {
			ob.LinesDropped = b.con.dropped
			for _, l := range b.con.lines {
				ob.Console = append(ob.Console, Line{Time: l.Time, Peer: l.Peer, Severity: l.Reason, Text: l.Detail})
			}
		}
		out.Boots = append(out.Boots, ob)
	}
	return out
}
