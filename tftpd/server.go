package tftpd

import (
	"context"
	"errors"
	"fmt"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used for zero Server fields.
const (
	DefaultMaxTransfers = 64
	DefaultMaxPerSource = 4
	DefaultMaxBlockSize = 65464 // the largest blksize of RFC 2348
	DefaultMaxNameLen   = 1024
	DefaultTimeout      = time.Second
	DefaultRetries      = 5
	DefaultFirstRetries = 0
	// DefaultFirstWaitTimeouts is how many Timeouts a transfer waits for the first
	// acknowledgement of a source that never acknowledged, when FirstWait is zero.
	DefaultFirstWaitTimeouts = 3
	DefaultMaxWindow         = 64 // RFC 7440 windowsize
	DefaultEvictAfter        = 50 * time.Millisecond
	DefaultMaxQueued         = 1024
	DefaultQueueWait         = 5 * time.Second
	DefaultAddr              = ":69"
)

// MaxWindowBytes bounds the file bytes a transfer holds in flight, whatever windowsize it
// was granted: the window granted is at most MaxWindowBytes/blksize blocks (at least one).
const MaxWindowBytes = 256 << 10

// knownSources is how many source addresses that acknowledged a transfer the server
// remembers, for the retries of a transfer's first datagram (FirstRetries).
const knownSources = 4096

// Server is a read-only TFTP server. Its fields are read when Serve is first called and must
// not change afterwards. A Server serves any number of sockets at once (Serve per socket); the
// limits hold across all of them.
type Server struct {
	// Addr is the UDP address ListenAndServe binds. Empty means DefaultAddr (":69").
	Addr string
	// Dir is the directory served, opened with os.OpenRoot when Serve is first called:
	// "..", absolute names and symbolic links cannot lead out of it. Exactly one of Dir and
	// FS is set.
	Dir string
	// FS is the file system served instead of Dir (an embed.FS, a fstest.MapFS, an
	// os.Root's FS). Open must refuse names outside it as fs.FS requires; os.DirFS does not
	// confine symbolic links, (*os.Root).FS does. An FS that is also a PeerFS is opened
	// with OpenFrom, told who asked.
	FS fs.FS

	// MaxTransfers bounds the transfers running at once; a request beyond it evicts a
	// transfer not yet acknowledged, waits for a slot (MaxQueued) or is dropped unanswered.
	// Zero means DefaultMaxTransfers (64).
	MaxTransfers int
	// MaxPerSource bounds the transfers running at once for one source IP address; a
	// request beyond it is dropped unanswered. Zero means DefaultMaxPerSource (4).
	MaxPerSource int
	// MaxBlockSize is the largest blksize granted, 512 to 65464. Zero means
	// DefaultMaxBlockSize (65464): a client gets what it asks for.
	MaxBlockSize int
	// MaxNameLen is the longest filename accepted, in bytes. Zero means DefaultMaxNameLen.
	MaxNameLen int
	// Timeout is how long a transfer waits for an acknowledgement before it sends its last
	// datagram again. Zero means DefaultTimeout (1 s).
	Timeout time.Duration
	// Retries is how many times an unacknowledged datagram is sent again before the transfer
	// gives up, after Timeout*(Retries+1) in all. Zero means DefaultRetries (5).
	Retries int
	// FirstRetries is how many times the first datagram of a transfer (its OACK, or DATA
	// block 1) is sent again when its source address has not acknowledged a datagram of any
	// transfer yet: a spoofed request then gets back at most FirstRetries+1 datagrams, and
	// no time-out error. It is at most Retries. DefaultFirstRetries is 0: the first datagram
	// goes out once, and a client that lost it sends its request again (RFC 1350 has the
	// side that times out send its last packet again), which is answered as a new request.
	FirstRetries int
	// FirstWait is how long a transfer waits for the first acknowledgement from a source
	// that has not acknowledged any transfer yet, across the sends of its first datagram,
	// so that a client whose acknowledgement was lost and sent again still gets its file.
	// Zero means DefaultFirstWaitTimeouts Timeouts (3 s by default); it is at least
	// Timeout*(FirstRetries+1).
	FirstWait time.Duration
	// EvictAfter is how long a transfer's first datagram must have gone unacknowledged
	// before a new request may take its slot when every slot is taken: a real client answers
	// within a round trip. At 64 slots and 50 ms, 1,280 spoofed requests a second are needed
	// to keep every slot turning over. The next transfer of a source that has just answered
	// one is spared. Zero means DefaultEvictAfter (50 ms).
	EvictAfter time.Duration
	// MaxWindow is the largest windowsize (RFC 7440) granted, 1 to 65535; the window is also
	// bounded by MaxWindowBytes. Zero means DefaultMaxWindow (64).
	MaxWindow int
	// MaxQueued bounds the read requests held, across all sockets, while every slot is
	// taken and none can be evicted: such a request waits for the next slot to free up
	// instead of being dropped, so that firmware is served at once rather than after its
	// retransmission time-out (4 s for EDK2). Zero means DefaultMaxQueued (1024); a negative
	// value holds none (every such request is dropped).
	MaxQueued int
	// QueueWait is how long a held request waits for a slot after it was last received (a
	// client that sends it again keeps its place and waits on); then it is dropped. Zero
	// means DefaultQueueWait (5 s, longer than EDK2's retransmission time-out).
	QueueWait time.Duration

	// Fence, when set, is asked for every read request: while it reports this agent
	// inactive, requests are answered "access violation" (Transfer.Err wraps ErrFenced)
	// and no file is opened. Nil serves regardless. [lease.Fence] implements it.
	//
	// [lease.Fence]: https://pkg.go.dev/github.com/bettercompute/siteboot/lease#Fence
	Fence Fence

	// Logger receives the detail of refusals and failures. Nil discards.
	Logger *slog.Logger
	// OnTransfer, when set, is called once for every admitted request when its transfer
	// ends, and once for every refused request (write, mode, name, missing file). It runs
	// on the transfer's goroutine, or on the listening loop for refusals: it must not block.
	OnTransfer func(Transfer)
	// Events, if set, receives the same as OnTransfer as boot events (stage TFTP, the
	// Outcome's word as the reason, the peer, the bytes and duration, the file's base name:
	// never a directory, which may be a nonce). TFTP knows no MAC: a bootevents.Timeline
	// finds the machine by the peer's address. Nil builds none.
	Events bootevents.Sink
	// Clock is the clock for Transfer.Start and Duration. Nil means [clock.Real].
	Clock clock.Clock

	mu        sync.Mutex
	started   bool
	closed    bool
	fsys      fs.FS
	root      *os.Root
	servers   map[*listener]struct{}
	running   sync.WaitGroup // transfers of every listener
	active    int
	perSource map[netip.Addr]int
	pending   map[uint64]*transfer
	unacked   []*transfer // running transfers that saw no acknowledgement yet, oldest first
	known     map[netip.Addr]struct{}
	knownRing []netip.Addr // known in the order they were added, for eviction
	knownNext int
	spares    map[netip.Addr]time.Time // sources that have just answered a transfer, and when (evictableLocked)
	nextID    uint64
	abort     chan struct{}
	abortOnce sync.Once
	doneOnce  sync.Once

	pollerOnly bool     // every transfer socket in the network poller (tests of that path)
	maps       fileMaps // the files transfers send from a mapping

	c counters
}

// PeerFS is an fs.FS whose answer may depend on who asks: a host that serves a machine's
// own file only to the address it was handed to. Server opens the file of each read request
// with OpenFrom, given the request's source (its address unmapped); the file is served
// from another socket as usual, to that source only.
type PeerFS interface {
	fs.FS
	OpenFrom(name string, peer netip.AddrPort) (fs.File, error)
}

type counters struct {
	requests, transfers, completed, failed, bytes atomic.Uint64
	notFound, denied, refusedWrite, refusedMode   atomic.Uint64
	droppedBusy, droppedSource, droppedMalformed  atomic.Uint64
	evicted, windowed, queued, fenced             atomic.Uint64
	waiting                                       atomic.Int64 // held in the queues now

	outcomesMu sync.Mutex
	outcomes   OutcomeCounts // the reports, by outcome
}

// outcomeCounts is a copy of the counts by outcome.
func (c *counters) outcomeCounts() OutcomeCounts {
	c.outcomesMu.Lock()
	defer c.outcomesMu.Unlock()
	return c.outcomes
}

// Stats is a snapshot of what a Server did since it was made, for a host to export.
type Stats struct {
	Requests         uint64 // datagrams read on the listening sockets
	Transfers        uint64 // transfers started (each opened a socket)
	Completed        uint64 // transfers acknowledged to the last block
	Failed           uint64 // transfers that ended otherwise (client error, time-out, shutdown)
	Bytes            uint64 // file bytes sent by all transfers
	NotFound         uint64 // requests answered "file not found"
	Denied           uint64 // requests answered "access violation" (name, file type, root)
	RefusedWrite     uint64 // write requests refused
	RefusedMode      uint64 // netascii and mail requests refused
	DroppedBusy      uint64 // requests dropped unanswered: MaxTransfers running, none evictable, and the queue full or QueueWait passed
	DroppedSource    uint64 // requests dropped unanswered: MaxPerSource running for the source
	DroppedMalformed uint64 // datagrams that were not a well-formed request, dropped
	Evicted          uint64 // transfers ended before their first acknowledgement to make room
	Windowed         uint64 // transfers granted a windowsize above 1
	Queued           uint64 // requests that waited in the queue for a slot
	Fenced           uint64 // read requests refused while the Fence was inactive (also counted in Denied)
	Active           uint64 // transfers running now
	Waiting          uint64 // requests in the queue now
	// Outcomes are the requests reported (each admitted request when its transfer ends,
	// each refused one), by Outcome; Transfer.Bytes summed over them is Bytes.
	Outcomes OutcomeCounts
}

// Fence tells whether this agent is the site's active boot server.
type Fence interface {
	// Active reports the lease epoch and whether this agent holds the lease now.
	Active() (epoch uint64, active bool)
}

// FenceFunc adapts a function to [Fence].
type FenceFunc func() (uint64, bool)

// Active calls f.
func (f FenceFunc) Active() (uint64, bool) { return f() }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	active := s.active
	s.mu.Unlock()
	return Stats{
		Requests:         s.c.requests.Load(),
		Transfers:        s.c.transfers.Load(),
		Completed:        s.c.completed.Load(),
		Failed:           s.c.failed.Load(),
		Bytes:            s.c.bytes.Load(),
		NotFound:         s.c.notFound.Load(),
		Denied:           s.c.denied.Load(),
		RefusedWrite:     s.c.refusedWrite.Load(),
		RefusedMode:      s.c.refusedMode.Load(),
		DroppedBusy:      s.c.droppedBusy.Load(),
		DroppedSource:    s.c.droppedSource.Load(),
		DroppedMalformed: s.c.droppedMalformed.Load(),
		Evicted:          s.c.evicted.Load(),
		Windowed:         s.c.windowed.Load(),
		Queued:           s.c.queued.Load(),
		Fenced:           s.c.fenced.Load(),
		Active:           uint64(max(active, 0)),
		Waiting:          uint64(max(s.c.waiting.Load(), 0)),
		Outcomes:         s.c.outcomeCounts(),
	}
}

// Validate reports a field that is out of range or in conflict with another.
func (s *Server) Validate() error {
	switch {
	case s.Dir == "" && s.FS == nil:
		return fmt.Errorf("%w: neither Dir nor FS is set", ErrConfig)
	case s.Dir != "" && s.FS != nil:
		return fmt.Errorf("%w: both Dir and FS are set", ErrConfig)
	case s.MaxTransfers < 0:
		return fmt.Errorf("%w: MaxTransfers %d is negative", ErrConfig, s.MaxTransfers)
	case s.MaxPerSource < 0:
		return fmt.Errorf("%w: MaxPerSource %d is negative", ErrConfig, s.MaxPerSource)
	case s.maxPerSource() > s.maxTransfers():
		return fmt.Errorf("%w: MaxPerSource %d exceeds MaxTransfers %d", ErrConfig, s.maxPerSource(), s.maxTransfers())
	case s.MaxBlockSize != 0 && (s.MaxBlockSize < 512 || s.MaxBlockSize > 65464):
		return fmt.Errorf("%w: MaxBlockSize %d is not within 512..65464", ErrConfig, s.MaxBlockSize)
	case s.MaxNameLen < 0:
		return fmt.Errorf("%w: MaxNameLen %d is negative", ErrConfig, s.MaxNameLen)
	case s.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v is negative", ErrConfig, s.Timeout)
	case s.Retries < 0:
		return fmt.Errorf("%w: Retries %d is negative", ErrConfig, s.Retries)
	case s.FirstRetries < 0:
		return fmt.Errorf("%w: FirstRetries %d is negative", ErrConfig, s.FirstRetries)
	case s.FirstWait < 0:
		return fmt.Errorf("%w: FirstWait %v is negative", ErrConfig, s.FirstWait)
	case s.EvictAfter < 0:
		return fmt.Errorf("%w: EvictAfter %v is negative", ErrConfig, s.EvictAfter)
	case s.MaxWindow < 0 || s.MaxWindow > 65535:
		return fmt.Errorf("%w: MaxWindow %d is not within 1..65535", ErrConfig, s.MaxWindow)
	case s.QueueWait < 0:
		return fmt.Errorf("%w: QueueWait %v is negative", ErrConfig, s.QueueWait)
	}
	return nil
}

func orDefault[T int | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

func (s *Server) maxTransfers() int      { return orDefault(s.MaxTransfers, DefaultMaxTransfers) }
func (s *Server) maxPerSource() int      { return orDefault(s.MaxPerSource, DefaultMaxPerSource) }
func (s *Server) maxBlockSize() int      { return orDefault(s.MaxBlockSize, DefaultMaxBlockSize) }
func (s *Server) maxNameLen() int        { return orDefault(s.MaxNameLen, DefaultMaxNameLen) }
func (s *Server) timeout() time.Duration { return orDefault(s.Timeout, DefaultTimeout) }
func (s *Server) retries() int           { return orDefault(s.Retries, DefaultRetries) }
func (s *Server) firstRetries() int {
	return min(orDefault(s.FirstRetries, DefaultFirstRetries), s.retries())
}
func (s *Server) firstWait() time.Duration {
	w := orDefault(s.FirstWait, DefaultFirstWaitTimeouts*s.timeout())
	return max(w, time.Duration(s.firstRetries()+1)*s.timeout())
}
func (s *Server) maxWindow() int { return orDefault(s.MaxWindow, DefaultMaxWindow) }
func (s *Server) maxQueued() int { return orDefault(s.MaxQueued, DefaultMaxQueued) }
func (s *Server) queueWait() time.Duration {
	return orDefault(s.QueueWait, DefaultQueueWait)
}
func (s *Server) evictAfter() time.Duration {
	return orDefault(s.EvictAfter, DefaultEvictAfter)
}
func (s *Server) now() time.Time { return clock.Or(s.Clock).Now() }

// discard is the logger of a Server whose Logger is nil.
var discard = slog.New(slog.DiscardHandler)

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return discard
}

// start validates the fields and opens the root, once; s.mu is held.
func (s *Server) start() error {
	if s.started {
		return nil
	}
	if err := s.Validate(); err != nil {
		return err
	}
	s.fsys = s.FS
	if s.Dir != "" {
		r, err := os.OpenRoot(s.Dir)
		if err != nil {
			return &OpError{Op: "open root", Name: s.Dir, Err: err}
		}
		s.root = r
		s.fsys = r.FS()
	}
	s.servers = make(map[*listener]struct{})
	s.perSource = make(map[netip.Addr]int)
	s.pending = make(map[uint64]*transfer)
	s.known = make(map[netip.Addr]struct{})
	s.abort = make(chan struct{})
	s.started = true
	return nil
}

// ListenAndServe binds Addr (DefaultAddr when empty) for UDP and serves it, as Serve does.
// After Shutdown or Close it returns ErrServerClosed.
func (s *Server) ListenAndServe() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrServerClosed
	}
	addr := s.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return &OpError{Op: "listen", Name: addr, Err: err}
	}
	return s.Serve(conn)
}

// Serve answers the requests that arrive on conn, a UDP socket the caller bound, until
// Shutdown or Close (then it returns ErrServerClosed) or until reading conn fails (then it
// returns that error once the transfers it started have ended). conn is closed on return.
func (s *Server) Serve(conn net.PacketConn) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return ErrServerClosed
	}
	if err := s.start(); err != nil {
		s.mu.Unlock()
		conn.Close()
		return err
	}
	l := &listener{
		PacketConn: conn,
		srv:        s,
		buf:        make([]byte, 65536),
		closed:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	l.setup()
	s.servers[l] = struct{}{}
	s.mu.Unlock()

	readErr := l.serve()
	l.Close()
	close(l.done)

	s.mu.Lock()
	delete(s.servers, l)
	closed := s.closed
	s.mu.Unlock()
	if closed || readErr == nil {
		return ErrServerClosed
	}
	// The socket failed under us: the transfers it started end before Serve returns.
	l.transfers.Wait()
	return &OpError{Op: "read", Err: readErr}
}

// Shutdown stops reading requests, closes the listening sockets and waits for the running
// transfers to end. If ctx ends first, it aborts them as Close does, waits for them to stop
// and returns ctx.Err(). Every Serve returns ErrServerClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	list := make([]*listener, 0, len(s.servers))
	for l := range s.servers {
		list = append(list, l)
	}
	started := s.started
	s.mu.Unlock()
	if !started {
		return nil
	}

	done := make(chan struct{})
	go func() {
		// Every listening loop ends before the wait for the transfers, so that none starts
		// a transfer once the wait has begun.
		for _, l := range list {
			l.Close()
			<-l.done
		}
		s.running.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.abortTransfers()
		<-done
		err = ctx.Err()
	}
	s.finish()
	return err
}

// Close closes the listening sockets and aborts the running transfers: each stops at its
// next block, or when its wait for an acknowledgement times out. It returns when they have.
func (s *Server) Close() error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		s.abortTransfers()
	}
	return s.Shutdown(context.Background())
}

func (s *Server) abortTransfers() {
	s.abortOnce.Do(func() { close(s.abort) })
}

// finish releases what admitted requests left behind and closes the root.
func (s *Server) finish() {
	s.doneOnce.Do(func() {
		s.mu.Lock()
		pending := s.pending
		s.pending = make(map[uint64]*transfer)
		root := s.root
		s.mu.Unlock()
		for _, t := range pending {
			t.file.Close()
			s.release(t.peer.Addr())
		}
		if root != nil {
			root.Close()
		}
	})
}

// reserve takes a slot for a transfer from ip, or reports which limit refused it; held is
// how many other requests of ip wait in the queue (they count against MaxPerSource). When
// every slot is taken and evict is set, the oldest transfer that has not seen an
// acknowledgement, if it has waited EvictAfter, gives its slot up (it is evicted: its socket
// is closed and it ends without another datagram); otherwise the request is refused.
func (s *Server) reserve(ip netip.Addr, held int, evict bool) (ok bool, busy bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, true
	}
	if s.perSource[ip]+held >= s.maxPerSource() {
		s.mu.Unlock()
		return false, false
	}
	var victim *transfer
	if s.active >= s.maxTransfers() {
		if evict {
			victim = s.evictableLocked()
		}
		if victim == nil {
			s.mu.Unlock()
			return false, true
		}
		s.dropUnacked(victim)
		victim.evicted = true
		s.releaseLocked(victim)
	}
	s.active++
	s.perSource[ip]++
	s.mu.Unlock()
	if victim != nil {
		s.c.evicted.Add(1)
		victim.conn.evict()
	}
	return true, false
}

func (s *Server) release(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseIP(ip)
	s.wakeLocked()
}

// releaseLocked gives back the slot of a running transfer, once; s.mu is held.
func (s *Server) releaseLocked(t *transfer) {
	if t.released {
		return
	}
	t.released = true
	s.releaseIP(t.peer.Addr())
}

func (s *Server) releaseIP(ip netip.Addr) {
	s.active--
	if n := s.perSource[ip] - 1; n > 0 {
		s.perSource[ip] = n
	} else {
		delete(s.perSource, ip)
	}
}

// runningTransfer records a transfer whose socket is open: until its first acknowledgement it may
// be evicted.
func (s *Server) runningTransfer(t *transfer, conn tconn) {
	s.mu.Lock()
	t.conn, t.running = conn, time.Now()
	s.unacked = append(s.unacked, t)
	s.mu.Unlock()
}

// evictableLocked is the transfer a new request may evict, nil when none: the oldest that
// has waited EvictAfter for its first acknowledgement, but for one whose source answered a
// transfer just before (spareNext): EDK2 aborts its size request, then asks for the file
// and acknowledges that OACK, late when the server is loaded; evicted then, it would send
// the acknowledgement to a closed socket until it gave up. Each answer spares one transfer,
// the oldest of its source considered here, so that a spoofer of the address gains a slot
// only by winning that race. s.mu is held.
func (s *Server) evictableLocked() *transfer {
	for _, t := range s.unacked {
		if time.Since(t.running) < s.evictAfter() {
			return nil // the rest started later
		}
		if t.spared {
			continue
		}
		if at, ok := s.spares[t.peer.Addr()]; ok {
			delete(s.spares, t.peer.Addr())
			if time.Since(at) < spareFor {
				t.spared = true
				continue
			}
		}
		return t
	}
	return nil
}

// spareFor is how long after a source answered a transfer its next one is spared from
// eviction: the next request may wait in the queue (QueueWait) and be sent again first.
const spareFor = 30 * time.Second

// spareNext records that ip answered a transfer (its client acknowledged it to the end, or
// answered its first datagram with an error): its next transfer is spared from eviction
// once. At most knownSources sources are held; expired ones go first.
func (s *Server) spareNext(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spares == nil {
		s.spares = make(map[netip.Addr]time.Time)
	}
	if len(s.spares) >= knownSources {
		for a, at := range s.spares {
			if time.Since(at) >= spareFor {
				delete(s.spares, a)
			}
		}
		for a := range s.spares {
			if len(s.spares) < knownSources {
				break
			}
			delete(s.spares, a)
		}
	}
	s.spares[ip] = time.Now()
}

// acknowledged records a transfer's first acknowledgement: it can no longer be evicted, and
// its source is known. It reports false when the transfer was evicted already.
func (s *Server) acknowledged(t *transfer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.evicted {
		return false
	}
	s.dropUnacked(t)
	ip := t.peer.Addr()
	if _, ok := s.known[ip]; !ok {
		if len(s.knownRing) < knownSources {
			s.knownRing = append(s.knownRing, ip)
		} else {
			delete(s.known, s.knownRing[s.knownNext])
			s.knownRing[s.knownNext] = ip
			s.knownNext = (s.knownNext + 1) % knownSources
		}
		s.known[ip] = struct{}{}
	}
	return true
}

// isKnown reports whether ip acknowledged a datagram of an earlier transfer.
func (s *Server) isKnown(ip netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.known[ip]
	return ok
}

// ended gives back a finished transfer's slot (unless its eviction did) and reports whether
// it was evicted.
func (s *Server) ended(t *transfer) (evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropUnacked(t)
	s.releaseLocked(t)
	s.wakeLocked()
	return t.evicted
}

// wakeLocked makes every listener that holds requests look at its queue now: a slot may
// have freed up; s.mu is held.
func (s *Server) wakeLocked() {
	if s.c.waiting.Load() == 0 {
		return
	}
	for l := range s.servers {
		if l.nqueued.Load() > 0 {
			l.PacketConn.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

func (s *Server) dropUnacked(t *transfer) {
	for i, u := range s.unacked {
		if u == t {
			s.unacked = slices.Delete(s.unacked, i, i+1)
			return
		}
	}
}

// reclaim undoes an admission whose transfer could not start (no socket).
func (s *Server) reclaim(t *transfer, err error) {
	t.file.Close()
	s.release(t.peer.Addr())
	s.c.failed.Add(1)
	s.logger().Warn("tftpd: transfer could not start", "peer", t.peer, "file", t.name, "err", err)
	s.report(Transfer{
		Requested: t.requested, File: t.name, Peer: t.peer, Size: t.size, BlockSize: t.blksize,
		Start: t.start, Duration: s.now().Sub(t.start), Outcome: OutcomeAborted,
		Err: &OpError{Op: "transfer", Name: t.name, Err: fmt.Errorf("%w: %w", ErrAborted, err)},
	})
}

func (s *Server) report(t Transfer) {
	s.c.outcomesMu.Lock()
	if p := s.c.outcomes.field(t.Outcome); p != nil {
		*p++
	}
	s.c.outcomesMu.Unlock()
	if s.OnTransfer != nil {
		s.OnTransfer(t)
	}
	if s.Events != nil {
		s.Events.Emit(eventOf(&t))
	}
}

// eventOf is the boot event of a finished or refused transfer.
func eventOf(t *Transfer) bootevents.Event {
	e := bootevents.Event{
		Time: t.Start, Stage: bootevents.StageTFTP, Outcome: bootevents.OutcomeFailed, Reason: string(t.Outcome),
		Peer: t.Peer, Duration: t.Duration, Detail: path.Base(strings.ReplaceAll(t.Requested, "\\", "/")),
	}
	if t.Bytes > 0 {
		e.Bytes = uint64(t.Bytes)
	}
	switch t.Outcome {
	case OutcomeOK:
		e.Outcome = bootevents.OutcomeOK
	case OutcomeNotFound, OutcomeDenied, OutcomeRefused:
		e.Outcome = bootevents.OutcomeRefused
		if errors.Is(t.Err, ErrFenced) {
			e.Reason = "fenced"
		}
	}
	return e
}

// listener is one listening socket: it reads datagrams, admits read requests within the
// limits, answers refusals and starts a transfer for each request it admitted.
type listener struct {
	net.PacketConn
	srv *Server
	buf []byte

	// udp is PacketConn when it is a *net.UDPConn; fixed is the address it is bound to when
	// that is not a wildcard; pktinfo says that the address each request came to is read
	// from its control message (IP_PKTINFO, IPV6_PKTINFO).
	udp     *net.UDPConn
	fixed   netip.Addr
	pktinfo bool
	oob     []byte

	// The requests held for a slot, oldest first, by key, and how many from each source;
	// only the listener's goroutine touches them. nqueued is len(queue), for wakeLocked.
	queue    []*waiting
	queued   map[string]*waiting
	bySource map[netip.Addr]int
	nqueued  atomic.Int32
	polling  bool // a read deadline is set, to look at the queue again

	admitted func(id uint64) // tests: called instead of begin, the transfer left pending

	transfers sync.WaitGroup // the transfers this listener started
	closeOnce sync.Once
	closed    chan struct{}
	done      chan struct{} // closed when the reading loop has ended
}

// setup learns how the local address of each request is known.
func (l *listener) setup() {
	if ua, ok := l.LocalAddr().(*net.UDPAddr); ok && ua != nil {
		if ip, ok := netip.AddrFromSlice(ua.IP); ok && !ip.Unmap().IsUnspecified() {
			l.fixed = ip.Unmap().WithZone(ua.Zone)
		}
	}
	udp, ok := l.PacketConn.(*net.UDPConn)
	if !ok {
		return
	}
	l.udp = udp
	if !l.fixed.IsValid() {
		l.pktinfo = enablePktinfo(udp)
		if l.pktinfo {
			l.oob = make([]byte, 256)
		}
	}
}

// read returns the next datagram, its sender and the local address it came to (invalid
// when unknown: the transfer socket is then bound to the wildcard address).
func (l *listener) read() ([]byte, *net.UDPAddr, netip.Addr, error) {
	if l.udp == nil {
		n, addr, err := l.PacketConn.ReadFrom(l.buf)
		if err != nil {
			return nil, nil, netip.Addr{}, err
		}
		ua, _ := addr.(*net.UDPAddr)
		return l.buf[:n], ua, l.fixed, nil
	}
	if !l.pktinfo {
		n, ua, err := l.udp.ReadFromUDP(l.buf)
		return l.buf[:n], ua, l.fixed, err
	}
	n, oobn, _, ua, err := l.udp.ReadMsgUDP(l.buf, l.oob)
	if err != nil {
		return nil, nil, netip.Addr{}, err
	}
	return l.buf[:n], ua, pktinfoDst(l.oob[:oobn]), nil
}

// serve is the reading loop; it returns nil when the listener was closed, else the error
// reading failed with.
func (l *listener) serve() error {
	defer l.clearQueue()
	for {
		b, ua, local, err := l.read()
		if err != nil {
			select {
			case <-l.closed:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Woken (a slot freed up) or time to look again. The deadline is cleared
				// first: a wake that comes later sets it again, one that came before is
				// seen by dequeue.
				l.PacketConn.SetReadDeadline(time.Time{})
				l.polling = false
				l.dequeue()
				continue
			}
			return err
		}
		if ua == nil {
			l.srv.c.droppedMalformed.Add(1)
			continue
		}
		l.srv.admit(l, b, ua, local)
		if len(l.queue) > 0 {
			l.dequeue()
		}
	}
}

// waitingFrom is how many requests of ip the queue holds.
func (l *listener) waitingFrom(ip netip.Addr) int { return l.bySource[ip] }

// enqueue holds w, read as b, for a slot, unless the queues are full.
func (l *listener) enqueue(w *waiting, b []byte) bool {
	s := l.srv
	if max := s.maxQueued(); max <= 0 || s.c.waiting.Add(1) > int64(max) {
		if max > 0 {
			s.c.waiting.Add(-1)
		}
		return false
	}
	if l.queued == nil {
		l.queued, l.bySource = make(map[string]*waiting), make(map[netip.Addr]int)
	}
	if w.key == "" {
		w.key = queueKey(w.peer, b)
	}
	l.queue = append(l.queue, w)
	l.queued[w.key] = w
	l.bySource[w.peer.Addr()]++
	l.nqueued.Store(int32(len(l.queue)))
	return true
}

// unqueue forgets the i-th held request.
func (l *listener) unqueue(i int) {
	w := l.queue[i]
	l.queue = slices.Delete(l.queue, i, i+1)
	delete(l.queued, w.key)
	if n := l.bySource[w.peer.Addr()] - 1; n > 0 {
		l.bySource[w.peer.Addr()] = n
	} else {
		delete(l.bySource, w.peer.Addr())
	}
	l.nqueued.Store(int32(len(l.queue)))
	l.srv.c.waiting.Add(-1)
}

// dequeue starts the held requests that get a free slot now, oldest first, and drops those
// that waited QueueWait since they were last received. A held request evicts no transfer:
// under a flood of spoofed requests the queue fills with them, and a real client's new
// request, which may evict, must not wait behind them. While some are left it looks again
// every EvictAfter, for those that expired.
func (l *listener) dequeue() {
	s := l.srv
	now := time.Now()
	for i := 0; i < len(l.queue); {
		w := l.queue[i]
		if now.Sub(w.last) > s.queueWait() {
			l.unqueue(i)
			s.c.droppedBusy.Add(1)
			s.logger().Debug("tftpd: request dropped: no slot within QueueWait", "peer", w.peer, "file", w.name)
			continue
		}
		ok, busy := s.reserve(w.peer.Addr(), l.waitingFrom(w.peer.Addr())-1, false)
		if ok {
			l.unqueue(i)
			s.startRequest(l, w)
			continue
		}
		if busy {
			break
		}
		i++ // its source has MaxPerSource running: the next may go
	}
	switch {
	case len(l.queue) > 0:
		l.PacketConn.SetReadDeadline(now.Add(s.evictAfter()))
		l.polling = true
	case l.polling:
		l.PacketConn.SetReadDeadline(time.Time{})
		l.polling = false
	}
}

// clearQueue drops what the queue holds when the listener ends.
func (l *listener) clearQueue() {
	for len(l.queue) > 0 {
		l.unqueue(len(l.queue) - 1)
	}
}

// begin opens the socket of the admitted request id, on the reading goroutine (a host that
// serves from inside a network namespace gets its transfer sockets there too), and starts
// the transfer.
func (l *listener) begin(id uint64, local netip.Addr) {
	s := l.srv
	s.mu.Lock()
	t := s.pending[id]
	delete(s.pending, id)
	few := !s.pollerOnly && s.active <= fewTransfers()
	s.mu.Unlock()
	if t == nil {
		return
	}
	conn, err := listenTransfer(local, t.peer, t.window, few)
	if err != nil {
		s.reclaim(t, err)
		return
	}
	s.runningTransfer(t, conn)
	s.c.transfers.Add(1)
	s.running.Add(1)
	l.transfers.Add(1)
	go func() {
		defer s.running.Done()
		defer l.transfers.Done()
		s.serveTransfer(t, conn)
	}()
}

// listenTransfer opens a transfer's socket on port 0 of local, the address the request came
// to, so that the client hears from the address it asked; on the wildcard address when that
// is unknown. window is the most datagrams it sends at once, to peer. few says that no more
// transfers run than fewTransfers: the transfer then waits for its client on a thread of its
// own where it can (Linux), which costs less CPU per block than the network poller, as
// long as such transfers do not outnumber the scheduler's Ps.
func listenTransfer(local netip.Addr, peer netip.AddrPort, window int, few bool) (tconn, error) {
	if few {
		if c, ok, err := listenRaw(local, peer, window); ok {
			return c, err
		}
	}
	c, err := listenUDP(local, peer.Addr())
	if err != nil {
		return nil, err
	}
	return newNetConn(c, peer, window), nil
}

// fewTransfers is how many transfers may run at once with the newest on a thread of its
// own: half the Ps, at least one. Such a transfer's thread waits in recvfrom(2) between
// windows, so these threads never outnumber the Ps that run everything else.
func fewTransfers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// listenUDP opens the socket of listenTransfer in the net package.
func listenUDP(local, peer netip.Addr) (*net.UDPConn, error) {
	if !local.IsValid() {
		return net.ListenUDP("udp", nil)
	}
	local = local.Unmap()
	network := "udp6"
	if local.Is4() {
		network = "udp4"
		if !peer.Is4() {
			network = "udp"
		}
	}
	ip := local.WithZone("")
	return net.ListenUDP(network, &net.UDPAddr{IP: ip.AsSlice(), Zone: local.Zone()})
}

func (l *listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		err = l.PacketConn.Close()
	})
	return err
}

func (l *listener) reply(to net.Addr, code uint16, msg string) {
	if _, err := l.PacketConn.WriteTo(errorPacket(code, msg), to); err != nil {
		l.srv.logger().Debug("tftpd: sending error", "peer", to.String(), "err", err)
	}
}

func unmapped(a *net.UDPAddr) netip.AddrPort {
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// errRecovered marks a request whose handling panicked.
var errRecovered = errors.New("tftpd: panic while handling a request")
