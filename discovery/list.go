package discovery

import (
	"context"
	"errors"
	"fmt"
	"github.com/bettercompute/siteboot/clock"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Defaults used when the corresponding [Config] field is zero.
const (
	// DefaultMax is how many machines a list holds, and how many a merge returns.
	DefaultMax = 256
	// DefaultForgetAfter is how long after it was last seen a machine is forgotten, and the
	// window of Merge and Match.
	DefaultForgetAfter = 24 * time.Hour
	// DefaultReportEvery is the least time between two calls of Config.ReportWanted.
	DefaultReportEvery = 30 * time.Second
)

// maxMax bounds Config.Max: the list is for a site's unknown machines, not a database.
const maxMax = 1 << 16

// Via says who saw a machine.
type Via uint8

const (
	// ViaDHCP is a PXE or HTTP-boot DHCP request (proxy DHCP). It is the zero value.
	ViaDHCP Via = iota
	// ViaHTTP is an iPXE script fetch (the boot handler). With Config.DHCPFirst it counts
	// only for a MAC that DHCP already put in the list.
	ViaHTTP
)

// String returns "dhcp" or "http".
func (v Via) String() string {
	switch v {
	case ViaDHCP:
		return "dhcp"
	case ViaHTTP:
		return "http"
	}
	return fmt.Sprintf("via(%d)", uint8(v))
}

// Sighting is one request from a machine without a boot entry, with the fields its sender
// already parsed (proxy DHCP's request, the boot handler's query): the list keeps them as
// they are, so nothing is turned into text and parsed again on the way. A zero field means
// the request did not carry it.
type Sighting struct {
	MAC     hwid.MAC   // the client hardware address; zero drops the sighting
	UUID    hwid.UUID  // DHCP option 97 or iPXE's ${uuid}; zero when not sent
	Arch    hwid.Arch  // DHCP option 93, when HasArch
	HasArch bool       // Arch was sent
	Relay   netip.Addr // the DHCP relay (giaddr; for DHCPv6 the link address of the relay nearest the client); invalid or unspecified when none
	Via     Via        // who saw it (default ViaDHCP)
}

// Entry is one machine in a list. Every field is well-formed: ProductUUID is empty or in the
// canonical lower-case 36-character form, Arch empty or [a-z0-9_-]{1,32}, Relay zero or an
// address without a zone.
type Entry struct {
	MAC         hwid.MAC
	ProductUUID string     // the last UUID the machine sent, "" when it sent none
	Arch        string     // the last client architecture it sent, "" when none
	Relay       netip.Addr // the last relay it came through, zero when none
	FirstSeen   time.Time
	LastSeen    time.Time
	Count       uint64 // sightings since FirstSeen
}

// UUID returns the entry's product UUID, and false when it has none.
func (e Entry) UUID() (hwid.UUID, bool) {
	if e.ProductUUID == "" {
		return hwid.UUID{}, false
	}
	u, err := hwid.ParseUUID(e.ProductUUID)
	return u, err == nil
}

// Snapshot is a list's content at one moment, for the status report.
type Snapshot struct {
	Entries []Entry // newest LastSeen first; ties in MAC order
	Digest  Digest  // DigestOf(Entries)
}

// Stats are a list's counters since it was made, for a host to export.
type Stats struct {
	Sightings      uint64 // Seen calls
	Recorded       uint64 // sightings stored (New included)
	New            uint64 // machines added
	DroppedBadMAC  uint64 // sightings dropped for a zero MAC
	DroppedNoDHCP  uint64 // ViaHTTP sightings dropped under DHCPFirst for a MAC DHCP did not show
	IgnoredRelay   uint64 // relays with a zone, or multicast, ignored in recorded sightings
	Evicted        uint64 // machines evicted to make room
	Expired        uint64 // machines forgotten ForgetAfter after they were last seen
	Forgotten      uint64 // machines dropped by Forget or ForgetFunc
	ReportsWanted  uint64 // calls of ReportWanted
	ReportsDelayed uint64 // new machines whose report request waited for the throttle
	Len            uint64 // machines listed now
}

// Config configures a [List]. The zero value is usable.
type Config struct {
	// Max is how many machines the list holds; the one last seen longest ago is evicted to
	// make room. Zero means DefaultMax; at most 65536.
	Max int
	// ForgetAfter is how long after it was last seen a machine is forgotten. Zero means
	// DefaultForgetAfter.
	ForgetAfter time.Duration
	// ReportEvery is the least time between two calls of ReportWanted. Zero means
	// DefaultReportEvery.
	ReportEvery time.Duration
	// ReportWanted, when set, is called when a new machine was added: the host should send
	// a status report soon. It is called at most once per ReportEvery; a new machine that
	// arrives within the interval gets one trailing call when the interval ends. It is called
	// without the list's lock, from the goroutine of Seen or from a timer's goroutine; it
	// must not block, and must not call Close.
	ReportWanted func()
	// DHCPFirst makes a ViaHTTP sighting count only for a MAC already listed (which only a
	// ViaDHCP sighting can add). Set it when proxy DHCP feeds the list.
	DHCPFirst bool
	// Clock is the time source; nil means [clock.Real].
	Clock clock.Clock
	// Logger receives debug events (new machines, evictions). Nil means discard.
	Logger *slog.Logger
}

// Validate reports a field out of range.
func (c *Config) Validate() error {
	switch {
	case c.Max < 0 || c.Max > maxMax:
		return fmt.Errorf("%w: Max %d not in 0..%d", ErrConfig, c.Max, maxMax)
	case c.ForgetAfter < 0:
		return fmt.Errorf("%w: negative ForgetAfter %v", ErrConfig, c.ForgetAfter)
	case c.ReportEvery < 0:
		return fmt.Errorf("%w: negative ReportEvery %v", ErrConfig, c.ReportEvery)
	}
	return nil
}

// ErrConfig is returned by [NewList] for a Config field out of range.
var ErrConfig = errors.New("discovery: invalid config")

// node is a listed machine. Nodes live in one slice and are linked by index, most recently
// seen first, so the list allocates no node per sighting once it is warm.
type node struct {
	mac        hwid.MAC
	uuid       hwid.UUID
	uuidText   string // uuid.String(), kept so that a snapshot allocates none; "" when none
	arch       string // archNum.String(), kept so that a snapshot allocates none
	archNum    hwid.Arch
	hasArch    bool
	relay      netip.Addr
	first      time.Time
	last       time.Time
	count      uint64
	prev, next int32
}

const none = -1

// List is the agent's bounded list of unknown machines. It is safe for concurrent use.
type List struct {
	max         int
	forgetAfter time.Duration
	every       time.Duration
	wanted      func()
	dhcpFirst   bool
	clock       clock.Clock
	log         *slog.Logger

	mu         sync.Mutex
	nodes      []node
	free       []int32
	index      map[hwid.MAC]int32
	head, tail int32 // most and least recently seen
	version    uint64
	digestVer  uint64
	digest     Digest
	stats      Stats

	// The report throttle.
	reported   bool        // ReportWanted was called at least once
	lastReport time.Time   // when it was last called
	pending    bool        // a new machine waits for a trailing call
	timer      clock.Timer // the trailing call, when armed
	timerGen   uint64      // bumped whenever timer is disarmed, so a late one does nothing
	closed     bool
	inflight   sync.WaitGroup // ReportWanted calls decided and not yet returned, armed timers
}

// NewList returns an empty list configured by c.
func NewList(c Config) (*List, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	l := &List{
		max:         cmp0(c.Max, DefaultMax),
		forgetAfter: cmp0(c.ForgetAfter, DefaultForgetAfter),
		every:       cmp0(c.ReportEvery, DefaultReportEvery),
		wanted:      c.ReportWanted,
		dhcpFirst:   c.DHCPFirst,
		clock:       clock.Or(c.Clock),
		log:         c.Logger,
		head:        none,
		tail:        none,
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.nodes = make([]node, 0, l.max)
	l.index = make(map[hwid.MAC]int32, l.max)
	l.digest = DigestOf(nil)
	return l, nil
}

func cmp0[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Seen records a sighting and reports whether it was recorded. A sighting with a zero MAC
// is dropped, as is a ViaHTTP sighting of a MAC not listed under Config.DHCPFirst (the one
// place the "DHCP saw it first" rule is kept); a relay with a zone is ignored and the rest
// recorded.
func (l *List) Seen(s Sighting) bool {
	mac := s.MAC
	relay, relaySt := relayAddr(s.Relay)

	l.mu.Lock()
	now := l.clock.Now() // under the lock, so sightings are stamped in the order they are recorded
	l.stats.Sightings++
	if mac.IsZero() {
		l.stats.DroppedBadMAC++
		l.mu.Unlock()
		return false
	}
	l.expireTail(now)
	i, ok := l.index[mac]
	if !ok && s.Via == ViaHTTP && l.dhcpFirst {
		l.stats.DroppedNoDHCP++
		l.mu.Unlock()
		return false
	}
	if ok {
		l.unlink(i)
	} else {
		if len(l.index) >= l.max {
			old := l.tail
			if l.log.Enabled(context.Background(), slog.LevelDebug) { // no boxing of arguments when off
				l.log.Debug("discovery: evicting machine", "mac", l.nodes[old].mac, "last_seen", l.nodes[old].last)
			}
			l.remove(old)
			l.stats.Evicted++
		}
		i = l.alloc()
		l.nodes[i] = node{mac: mac, first: now}
		l.index[mac] = i
		l.stats.New++
	}
	l.pushFront(i)
	n := &l.nodes[i]
	if now.After(n.last) || n.count == 0 { // a clock set back never makes LastSeen go back
		n.last = now
	}
	if n.count < ^uint64(0) {
		n.count++
	}
	if s.UUID != (hwid.UUID{}) && (n.uuidText == "" || n.uuid != s.UUID) {
		n.uuid, n.uuidText = s.UUID, s.UUID.String()
	}
	if s.HasArch && (!n.hasArch || n.archNum != s.Arch) {
		n.archNum, n.hasArch, n.arch = s.Arch, true, s.Arch.String()
	}
	switch relaySt {
	case fieldOK:
		n.relay = relay
	case fieldBad:
		l.stats.IgnoredRelay++
	}
	l.stats.Recorded++
	l.version++
	call := false
	if !ok {
		call = l.wantReport(now)
		if l.log.Enabled(context.Background(), slog.LevelDebug) { // no boxing of arguments when off
			l.log.Debug("discovery: new machine", "mac", mac, "via", s.Via, "report", call)
		}
	}
	l.mu.Unlock()
	if call {
		defer l.inflight.Done()
		l.wanted()
	}
	return true
}

// wantReport decides, for a new machine at now, whether ReportWanted is to be called at
// once; otherwise it arms the trailing call. When it returns true, the caller calls
// ReportWanted and then inflight.Done.
func (l *List) wantReport(now time.Time) bool {
	if l.wanted == nil || l.closed {
		return false
	}
	since := now.Sub(l.lastReport)
	if !l.reported || since >= l.every {
		l.disarm()
		l.reported, l.lastReport, l.pending = true, now, false
		l.stats.ReportsWanted++
		l.inflight.Add(1)
		return true
	}
	l.stats.ReportsDelayed++
	l.pending = true
	if l.timer == nil {
		d := l.every - since
		if d <= 0 || d > l.every { // the clock went backwards
			d = l.every
		}
		gen := l.timerGen
		l.inflight.Add(1)
		l.timer = l.clock.AfterFunc(d, func() { l.trailing(gen) })
	}
	return false
}

// disarm stops the trailing call. A call that already started finds timerGen moved on.
func (l *List) disarm() {
	if l.timer == nil {
		return
	}
	if l.timer.Stop() {
		l.inflight.Done()
	}
	l.timer = nil
	l.timerGen++
}

// trailing is the armed timer's call.
func (l *List) trailing(gen uint64) {
	defer l.inflight.Done()
	l.mu.Lock()
	if gen != l.timerGen || l.closed {
		l.mu.Unlock()
		return
	}
	l.timer = nil
	l.timerGen++
	call := l.pending
	if call {
		l.pending = false
		l.lastReport = l.clock.Now()
		l.stats.ReportsWanted++
	}
	l.mu.Unlock()
	if call {
		l.wanted()
	}
}

// Close stops the trailing report: once it returns, ReportWanted is not called again and
// no goroutine of the list is left. The list itself stays usable. It returns nil; the
// error is there so that a List closes like every other siteboot type (io.Closer).
func (l *List) Close() error {
	l.mu.Lock()
	l.closed = true
	l.pending = false
	l.disarm()
	l.mu.Unlock()
	l.inflight.Wait()
	return nil
}

// Forget drops the given MACs (they got boot entries) and returns how many were listed.
func (l *List) Forget(macs ...hwid.MAC) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, mac := range macs {
		if i, ok := l.index[mac]; ok {
			l.remove(i)
			n++
		}
	}
	l.stats.Forgotten += uint64(n)
	return n
}

// ForgetFunc drops every listed MAC for which known returns true (for example, the MACs that
// have a boot entry) and returns how many it dropped. known is called with the list's lock
// held and must not call the list.
func (l *List) ForgetFunc(known func(hwid.MAC) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := l.head; i != none; {
		next := l.nodes[i].next
		if known(l.nodes[i].mac) {
			l.remove(i)
			n++
		}
		i = next
	}
	l.stats.Forgotten += uint64(n)
	return n
}

// Get returns the entry of mac, and false when it is not listed.
func (l *List) Get(mac hwid.MAC) (Entry, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireAll(now)
	i, ok := l.index[mac]
	if !ok {
		return Entry{}, false
	}
	return l.nodes[i].entry(), true
}

// Contains reports whether mac is listed. It costs one lookup, so it suits a check made per
// request, such as the boot handler's "did proxy DHCP see this MAC".
func (l *List) Contains(mac hwid.MAC) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	i, ok := l.index[mac]
	return ok && !l.expired(i, now)
}

// Len returns how many machines are listed.
func (l *List) Len() int {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireAll(now)
	return len(l.index)
}

// Snapshot returns the listed machines, newest first, with their digest.
func (l *List) Snapshot() Snapshot {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireAll(now)
	entries := make([]Entry, 0, len(l.index))
	for i := l.head; i != none; i = l.nodes[i].next {
		entries = append(entries, l.nodes[i].entry())
	}
	sortNewestFirst(entries, func(e *Entry) (time.Time, hwid.MAC) { return e.LastSeen, e.MAC })
	return Snapshot{Entries: entries, Digest: l.digestOf(entries)}
}

// Digest returns the digest of the list's current content.
func (l *List) Digest() Digest {
	return l.Snapshot().Digest
}

// Stats returns the list's counters.
func (l *List) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Len = uint64(len(l.index))
	return s
}

func (l *List) digestOf(entries []Entry) Digest {
	if l.digestVer != l.version {
		l.digest = DigestOf(entries)
		l.digestVer = l.version
	}
	return l.digest
}

func (n *node) entry() Entry {
	return Entry{MAC: n.mac, ProductUUID: n.uuidText, Arch: n.arch, Relay: n.relay, FirstSeen: n.first, LastSeen: n.last, Count: n.count}
}

func (l *List) expired(i int32, now time.Time) bool {
	return now.Sub(l.nodes[i].last) >= l.forgetAfter
}

// expireTail forgets machines from the least recently seen end. With a clock that never
// goes back that is all of them; expireAll checks every entry.
func (l *List) expireTail(now time.Time) {
	for l.tail != none && l.expired(l.tail, now) {
		l.remove(l.tail)
		l.stats.Expired++
	}
}

func (l *List) expireAll(now time.Time) {
	for i := l.head; i != none; {
		next := l.nodes[i].next
		if l.expired(i, now) {
			l.remove(i)
			l.stats.Expired++
		}
		i = next
	}
}

func (l *List) alloc() int32 {
	if n := len(l.free); n > 0 {
		i := l.free[n-1]
		l.free = l.free[:n-1]
		return i
	}
	l.nodes = append(l.nodes, node{})
	return int32(len(l.nodes) - 1)
}

func (l *List) remove(i int32) {
	l.unlink(i)
	delete(l.index, l.nodes[i].mac)
	l.nodes[i] = node{}
	l.free = append(l.free, i)
	l.version++
}

func (l *List) unlink(i int32) {
	n := &l.nodes[i]
	if n.prev != none {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next != none {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.prev, n.next = none, none
}

func (l *List) pushFront(i int32) {
	n := &l.nodes[i]
	n.prev, n.next = none, l.head
	if l.head != none {
		l.nodes[l.head].prev = i
	} else {
		l.tail = i
	}
	l.head = i
}
