package tftpd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Outcome says how a request ended.
type Outcome string

// Outcomes reported in Transfer.
const (
	OutcomeOK       Outcome = "ok"        // every block acknowledged
	OutcomeNotFound Outcome = "not-found" // answered error 1
	OutcomeDenied   Outcome = "denied"    // answered error 2: name, file type or root refused
	OutcomeRefused  Outcome = "refused"   // write request or a mode other than octet
	OutcomeAborted  Outcome = "aborted"   // the client sent an error (EDK2 does after the OACK), or the socket failed
	OutcomeTimeout  Outcome = "timeout"   // the client stopped acknowledging
	OutcomeFailed   Outcome = "failed"    // reading the file failed
	OutcomeShutdown Outcome = "shutdown"  // Close, or Shutdown whose context ended
	OutcomeEvicted  Outcome = "evicted"   // gave its slot to a new request before its first acknowledgement
)

// Outcomes are every Outcome, in a stable order, for a host that exports
// [Stats].Outcomes by name.
func Outcomes() []Outcome {
	return []Outcome{OutcomeOK, OutcomeNotFound, OutcomeDenied, OutcomeRefused, OutcomeAborted,
		OutcomeTimeout, OutcomeFailed, OutcomeShutdown, OutcomeEvicted}
}

// OutcomeCounts are the requests reported to OnTransfer (with or without a hook), by
// Outcome: one field per outcome.
type OutcomeCounts struct {
	OK, NotFound, Denied, Refused, Aborted, Timeout, Failed, Shutdown, Evicted uint64
}

// Of returns the count of outcome o; 0 for an outcome the package does not report.
func (c OutcomeCounts) Of(o Outcome) uint64 {
	if p := c.field(o); p != nil {
		return *p
	}
	return 0
}

// field is c's field of outcome o; nil for an unknown outcome.
func (c *OutcomeCounts) field(o Outcome) *uint64 {
	switch o {
	case OutcomeOK:
		return &c.OK
	case OutcomeNotFound:
		return &c.NotFound
	case OutcomeDenied:
		return &c.Denied
	case OutcomeRefused:
		return &c.Refused
	case OutcomeAborted:
		return &c.Aborted
	case OutcomeTimeout:
		return &c.Timeout
	case OutcomeFailed:
		return &c.Failed
	case OutcomeShutdown:
		return &c.Shutdown
	case OutcomeEvicted:
		return &c.Evicted
	}
	return nil
}

// Transfer describes one request and what came of it, for the host's OnTransfer hook.
type Transfer struct {
	Requested string         // the filename as the client sent it (any bytes but NUL)
	File      string         // the path under the root; empty when the name was refused
	Peer      netip.AddrPort // the client
	Size      int64          // the file's size; -1 when no file was opened
	Bytes     int64          // file bytes handed to the network
	BlockSize int            // negotiated block size; 0 when refused
	Window    int            // negotiated windowsize (RFC 7440): 1 when not asked; 0 when refused
	Start     time.Time      // when the request was read
	Duration  time.Duration  // from the request to the end of the transfer
	Outcome   Outcome
	Err       error // the detail (nil for OutcomeOK); never sent to the client
}

// transfer is an admitted request between admit and the end of serveTransfer.
type transfer struct {
	requested string
	name      string
	peer      netip.AddrPort
	file      fs.File
	size      int64
	blksize   int
	window    int
	start     time.Time
	options   []option // granted, for the OACK; none: no OACK

	// Guarded by Server.mu once the transfer runs.
	conn     tconn
	running  time.Time // when its socket opened, just before its first datagram
	evicted  bool      // gave its slot to a new request
	spared   bool      // not to be evicted: its source had just answered another transfer
	released bool      // its slot was given back
}

// Messages on the wire: generic on purpose.
const (
	msgNotFound  = "file not found"
	msgAccess    = "access violation"
	msgReadOnly  = "read-only server"
	msgOctetOnly = "octet mode only"
)

// Messages a transfer sends when it stops on our side: generic too.
const (
	msgReadError  = "read error"
	msgShutdown   = "server shutting down"
	msgTimeout    = "timed out"
	msgUnknownTID = "unknown transfer id"
)

// TFTP error code 5 (RFC 1350).
const codeUnknownTID = 5

// admit decides what to do with one datagram read on a listening socket, on the listener's
// goroutine. It answers refusals itself, starts a transfer for a request within the limits,
// and holds one beyond MaxTransfers in the listener's queue (or drops it when that is full).
func (s *Server) admit(l *listener, b []byte, from *net.UDPAddr, local netip.Addr) {
	s.c.requests.Add(1)
	peer := unmapped(from)
	log := s.logger()
	defer func() {
		if r := recover(); r != nil {
			s.c.droppedMalformed.Add(1)
			log.Error("tftpd: request handling panicked", "peer", peer, "panic", fmt.Sprint(r))
		}
	}()
	req, err := parseRequest(b)
	if err != nil {
		s.c.droppedMalformed.Add(1)
		log.Debug("tftpd: datagram dropped", "peer", peer, "err", err)
		return
	}
	w := &waiting{from: from, peer: peer, local: local, req: req, start: s.now(), last: time.Now()}
	if req.Op == opWRQ {
		s.c.refusedWrite.Add(1)
		s.refuse(l, w, codeAccess, msgReadOnly, OutcomeRefused, "", ErrWriteRefused)
		return
	}
	if req.Mode != "octet" {
		s.c.refusedMode.Add(1)
		s.refuse(l, w, codeUndefined, msgOctetOnly, OutcomeRefused, "", fmt.Errorf("%w: mode %q", ErrMode, req.Mode))
		return
	}
	if w.name, err = cleanName(req.Filename, s.maxNameLen()); err != nil {
		s.c.denied.Add(1)
		s.refuse(l, w, codeAccess, msgAccess, OutcomeDenied, "", err)
		return
	}
	if s.Fence != nil {
		if _, active := s.Fence.Active(); !active {
			s.c.denied.Add(1)
			s.c.fenced.Add(1)
			s.refuse(l, w, codeAccess, msgAccess, OutcomeDenied, w.name, ErrFenced)
			return
		}
	}
	// A request sent again while it waits for a slot keeps its place; sent again as a
	// client retransmits (resendGap or more after it was last received), it may also take a
	// slot as a new request would, by evicting a transfer that never saw an
	// acknowledgement, so that the client is not left behind the requests queued before it.
	if len(l.queue) > 0 {
		w.key = queueKey(peer, b)
		if q, ok := l.queued[w.key]; ok {
			resent := time.Since(q.last) >= resendGap
			q.last = time.Now()
			if !resent {
				return
			}
			if ok, _ := s.reserve(peer.Addr(), l.waitingFrom(peer.Addr())-1, true); ok {
				l.unqueue(slices.Index(l.queue, q))
				s.startRequest(l, q)
			}
			return
		}
	}
	ok, busy := s.reserve(peer.Addr(), l.waitingFrom(peer.Addr()), true)
	switch {
	case ok:
		s.startRequest(l, w)
	case busy && l.enqueue(w, b):
		s.c.queued.Add(1)
		log.Debug("tftpd: request waits for a slot", "peer", peer, "file", w.name)
	case busy:
		s.c.droppedBusy.Add(1)
		log.Debug("tftpd: request dropped: transfer limit", "peer", peer, "file", w.name)
	default:
		s.c.droppedSource.Add(1)
		log.Debug("tftpd: request dropped: per-source limit", "peer", peer, "file", w.name)
	}
}

// resendGap is the least time between two receipts of a held request for the second to
// count as the client's retransmission (iPXE's shortest retransmission time-out; EDK2
// waits 4 s): repeats closer together, as a flood sends them, only keep its place.
const resendGap = 250 * time.Millisecond

// waiting is a read request between its arrival and its transfer: admitted at once, or
// held in a listener's queue until a slot is free.
type waiting struct {
	from  *net.UDPAddr
	peer  netip.AddrPort
	local netip.Addr // the address it came to; invalid when unknown
	req   request
	name  string    // req.Filename, cleaned
	key   string    // the peer and the datagram: a request sent again has the same
	start time.Time // when it was first read (Server.Clock)
	last  time.Time // when it was last read (time.Now): it expires QueueWait after
}

// queueKey is what makes two datagrams the same request: the source and the bytes.
func queueKey(peer netip.AddrPort, b []byte) string {
	return peer.String() + "\x00" + string(b)
}

func (s *Server) refuse(l *listener, w *waiting, code uint16, msg string, outcome Outcome, name string, err error) {
	l.reply(w.from, code, msg)
	s.logger().Info("tftpd: request refused", "peer", w.peer, "file", w.req.Filename, "outcome", string(outcome), "err", err)
	s.report(Transfer{Requested: w.req.Filename, File: name, Peer: w.peer, Size: -1, Start: w.start, Outcome: outcome, Err: err})
}

// startRequest serves a request that holds a slot (reserve): it opens the file, grants the options
// and starts the transfer, or answers the refusal and gives the slot back. It runs on the
// listener's goroutine.
func (s *Server) startRequest(l *listener, w *waiting) {
	req, name, peer := w.req, w.name, w.peer
	f, size, err := s.open(name, peer)
	if err != nil {
		s.release(peer.Addr())
		if errors.Is(err, ErrNotFound) {
			s.c.notFound.Add(1)
			s.refuse(l, w, codeNotFound, msgNotFound, OutcomeNotFound, name, err)
		} else {
			s.c.denied.Add(1)
			s.refuse(l, w, codeAccess, msgAccess, OutcomeDenied, name, err)
		}
		return
	}
	var opts []option
	blksize := 512
	if v, ok := req.option("blksize"); ok {
		if n, ok := parseDecimal(v); ok && n >= 512 {
			blksize = int(min(n, int64(s.maxBlockSize())))
			opts = append(opts, option{"blksize", strconv.Itoa(blksize)})
		}
	}
	if v, ok := req.option("tsize"); ok {
		if _, ok := parseDecimal(v); ok {
			opts = append(opts, option{"tsize", strconv.FormatInt(size, 10)})
		}
	}
	window := 1
	if v, ok := req.option("windowsize"); ok {
		if n, ok := parseDecimal(v); ok && n >= 1 && n <= 65535 {
			window = int(min(n, int64(s.maxWindow()), int64(max(1, MaxWindowBytes/blksize))))
			opts = append(opts, option{"windowsize", strconv.Itoa(window)})
			if window > 1 {
				s.c.windowed.Add(1)
			}
		}
	}
	t := &transfer{requested: req.Filename, name: name, peer: peer, file: f, size: size, blksize: blksize, window: window, start: w.start, options: opts}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.pending[id] = t
	s.mu.Unlock()
	if l.admitted != nil {
		l.admitted(id)
		return
	}
	l.begin(id, w.local)
}

// open opens name under the root and checks that it is a regular file.
func (s *Server) open(name string, peer netip.AddrPort) (fs.File, int64, error) {
	var f fs.File
	var err error
	if pf, ok := s.fsys.(PeerFS); ok {
		f, err = pf.OpenFrom(name, peer)
	} else {
		f, err = s.fsys.Open(name)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, &OpError{Op: "open", Name: name, Err: fmt.Errorf("%w: %w", ErrNotFound, err)}
		}
		return nil, 0, &OpError{Op: "open", Name: name, Err: fmt.Errorf("%w: %w", ErrDenied, err)}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, &OpError{Op: "stat", Name: name, Err: fmt.Errorf("%w: %w", ErrDenied, err)}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, &OpError{Op: "open", Name: name, Err: fmt.Errorf("%w: not a regular file (%v)", ErrDenied, st.Mode().Type())}
	}
	return f, st.Size(), nil
}

// packets pools the datagram buffers of transfers, by size class: a buffer holds one DATA
// packet of the negotiated block size, or (the smallest class) an OACK or a DATA block's
// header of a transfer that sends its blocks from a mapping (placedBuf).
var packets = [...]struct {
	size int
	pool sync.Pool
}{{size: placedBuf}, {size: 4 + 1468}, {size: 4 + 8192}, {size: 4 + 65464}}

// placedBuf is the size of a window buffer of a transfer whose blocks lie in a mapping: it
// holds the OACK (a few options of short values) or a DATA header.
const placedBuf = 516

func getPacket(n int) (*[]byte, int) {
	for i := range packets {
		if n <= packets[i].size {
			if b, ok := packets[i].pool.Get().(*[]byte); ok {
				return b, i
			}
			b := make([]byte, packets[i].size)
			return &b, i
		}
	}
	b := make([]byte, n)
	return &b, -1
}

func putPacket(b *[]byte, class int) {
	if class >= 0 {
		packets[class].pool.Put(b)
	}
}

// errClient is an ERROR packet a client sent during its transfer.
type errClient struct {
	code uint16
	msg  string
}

func (e *errClient) Error() string {
	return fmt.Sprintf("client sent error %d %q", e.code, e.msg)
}

// errTimedOut: no acknowledgement came after Retries+1 sends of a datagram.
var errTimedOut = errors.New("no acknowledgement")

// errEvicted: the transfer gave its slot to a new request before its first acknowledgement.
var errEvicted = errors.New("evicted before the first acknowledgement")

// sender is one running transfer: its socket, its client and its buffers.
type sender struct {
	s       *Server
	t       *transfer
	conn    tconn
	peer    netip.AddrPort
	timeout time.Duration
	retries int // resends of a datagram once the client acknowledged one
	first   int // resends before that
	// firstWait is how long the first datagram waits for its acknowledgement in all, its
	// resends included, when the source has not acknowledged anything.
	firstWait time.Duration
	acked     bool
	rbuf      [516]byte

	// The file side, for run and readAhead.
	src     blockSource
	placed  []byte   // the file in a shared mapping (fileMaps), its blocks sent from there; nil: read through src
	bufs    [][]byte // the buffers of one read
	w       *window
	blksize int
	next    uint16 // the block number of the next block read
	read    int64  // file bytes read into blocks
	spare   int    // the blocks read ahead at most
	eof     bool   // the last block was read
	readErr error
	ahead   func() // readAhead, made once

	// The window exchange sends first, and its read-ahead, for sendOnce while sendRecv runs it.
	firstSend struct {
		pkts, bodies [][]byte
		ahead        func()
	}
	sendFirst func() error // sendOnce, made once
}

// exchange sends the window pkts, the datagrams of blocks base, base+1, ... (one datagram:
// the OACK as block 0, or one DATA block; with bodies, pkts are the blocks' headers), and
// waits for an acknowledgement of one of them, sending the window again when none comes
// within the timeout. It returns how many of the
// window's datagrams the acknowledgement covers (1 to len(pkts)): the caller goes on from
// the block after it, as RFC 7440 has a sender do after a short acknowledgement. ahead, when
// set, runs once after the first send, before the wait.
// Acknowledgements of blocks outside the window (duplicates of earlier ones) are ignored; a
// datagram from another port gets error 5 and is ignored otherwise.
func (x *sender) exchange(pkts, bodies [][]byte, base uint16, ahead func()) (int, error) {
	retries, last := x.retries, x.timeout
	if !x.acked {
		// A source not yet seen to acknowledge (maybe a spoofed one) gets the first datagram
		// FirstRetries+1 times, and is waited for FirstWait in all.
		retries = x.first
		last = max(x.timeout, x.firstWait-time.Duration(x.first)*x.timeout)
	}
	for i := range retries + 1 {
		wait := x.timeout
		if i == retries {
			wait = last
		}
		deadline := time.Now().Add(wait)
		var n int
		var from netip.AddrPort
		var err error
		if i == 0 {
			// The first send of the window, and the wait for its answer, in one step.
			x.firstSend.pkts, x.firstSend.bodies, x.firstSend.ahead = pkts, bodies, ahead
			n, from, err = x.conn.sendRecv(x.sendFirst, x.rbuf[:], deadline)
			x.firstSend.pkts, x.firstSend.bodies, x.firstSend.ahead = nil, nil, nil
		} else {
			// A resend reads what came in the wait, too (an error the client sent late).
			if err := x.send(pkts, bodies); err != nil {
				return 0, err
			}
			n, from, err = x.conn.recv(x.rbuf[:], deadline)
		}
		for ; err != errWait; n, from, err = x.conn.recv(x.rbuf[:], deadline) {
			if err != nil {
				return 0, err
			}
			if from.Port() != x.peer.Port() || from.Addr().Unmap() != x.peer.Addr() {
				x.conn.sendTo(errorPacket(codeUnknownTID, msgUnknownTID), from)
				continue
			}
			switch op, num, msg := parseReply(x.rbuf[:n]); op {
			case opACK:
				if off := int(num - base); off < len(pkts) {
					if !x.acked {
						if !x.s.acknowledged(x.t) {
							return 0, errEvicted
						}
						x.acked = true
					}
					return off + 1, nil
				}
			case opERROR:
				if !x.acked {
					// It read the first datagram (EDK2 aborts its size request so).
					x.s.spareNext(x.peer.Addr())
				}
				return 0, &errClient{code: num, msg: msg}
			}
		}
	}
	return 0, errTimedOut
}

// sendOnce is exchange's first send of a window (x.firstSend), then its read-ahead; made once
// as x.sendFirst: a closure made per window would be allocated per window.
func (x *sender) sendOnce() error {
	if err := x.send(x.firstSend.pkts, x.firstSend.bodies); err != nil {
		return err
	}
	if x.firstSend.ahead != nil {
		x.firstSend.ahead()
	}
	return nil
}

// send hands a window to the kernel: one datagram with one system call, more in as few as
// the socket manages. With bodies, each datagram is pkts[i] followed by bodies[i].
func (x *sender) send(pkts, bodies [][]byte) error {
	if len(pkts) == 1 && bodies == nil {
		return x.conn.sendTo(pkts[0], x.peer)
	}
	return x.conn.sendWindow(pkts, bodies)
}

// parseReply reads what a client sends on a transfer's socket: an ACK (op opACK, num the
// block) or an ERROR (op opERROR, num the code, msg its text up to the first NUL, or to the
// end when unterminated). Anything else, or anything shorter than 4 bytes, is op 0.
func parseReply(b []byte) (op, num uint16, msg string) {
	if len(b) < 4 {
		return 0, 0, ""
	}
	op, num = binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
	switch op {
	case opACK:
		return op, num, ""
	case opERROR:
		m, _, _ := cutNUL(b[4:])
		if m == nil {
			m = b[4:]
		}
		return op, num, string(m)
	}
	return 0, 0, ""
}

// fail tells the client why its transfer stops.
func (x *sender) fail(code uint16, msg string) {
	x.conn.sendTo(errorPacket(code, msg), x.peer)
}

// serveTransfer runs an admitted transfer on its socket conn: the OACK when options were
// granted, then the file a window at a time, each window sent until acknowledged.
func (s *Server) serveTransfer(t *transfer, conn tconn) {
	x := &sender{s: s, t: t, conn: conn, peer: t.peer, timeout: s.timeout(), retries: s.retries(), first: s.firstRetries(),
		firstWait: s.firstWait()}
	x.sendFirst = x.sendOnce
	if s.isKnown(t.peer.Addr()) {
		x.first = x.retries
	}
	src := blockSource(noSource{})
	var w *window
	placed, unmap := s.maps.take(t.file)
	if placed != nil {
		// Nothing to read: the window holds the blocks' headers, their bytes lie in the
		// mapping.
		x.placed = placed
		w = newWindow(t.window, placedBuf)
	} else {
		src = newBlockSource(t.file, t.blksize)
		// Buffers beyond the window for the blocks read ahead while the window is on its way.
		x.spare = spareBlocks(t.window, t.blksize)
		w = newWindow(t.window+x.spare, 4+t.blksize)
		x.ahead = x.readAhead
	}
	var (
		n        int64
		err      error
		outcome  = OutcomeOK
		readFail error
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", errRecovered, r)
			}
		}()
		n, outcome, readFail, err = x.run(t, src, w)
	}()
	conn.close()
	src.release()
	unmap()
	w.free()
	t.file.Close()
	// Counted before the slot is given back: once Stats shows a transfer no longer active,
	// its outcome is in the counters.
	s.c.bytes.Add(uint64(n))
	if err == nil {
		s.spareNext(t.peer.Addr())
		s.c.completed.Add(1)
	} else {
		s.c.failed.Add(1)
	}
	evicted := s.ended(t)

	tr := Transfer{
		Requested: t.requested, File: t.name, Peer: t.peer, Size: t.size, Bytes: n,
		BlockSize: t.blksize, Window: t.window, Start: t.start, Duration: s.now().Sub(t.start), Outcome: OutcomeOK,
	}
	log := s.logger()
	if err == nil {
		log.Debug("tftpd: transfer done", "peer", t.peer, "file", t.name, "bytes", n, "blksize", t.blksize, "window", t.window, "duration", tr.Duration)
		s.report(tr)
		return
	}
	switch {
	case evicted:
		tr.Outcome, err = OutcomeEvicted, ErrEvicted
	case outcome == OutcomeShutdown:
		tr.Outcome, err = OutcomeShutdown, ErrShutdown
	case readFail != nil:
		tr.Outcome, err = OutcomeFailed, &OpError{Op: "read file", Name: t.name, Err: readFail}
	case errors.Is(err, errTimedOut):
		sends := x.retries + 1
		if !x.acked {
			sends = x.first + 1
		}
		tr.Outcome, err = OutcomeTimeout, fmt.Errorf("%w: %w after %d sends %v apart", ErrTimeout, err, sends, x.timeout)
	default:
		tr.Outcome, err = OutcomeAborted, fmt.Errorf("%w: %w", ErrAborted, err)
	}
	if !errors.As(err, new(*OpError)) {
		err = &OpError{Op: "transfer", Name: t.name, Err: err}
	}
	tr.Err = err
	if evicted {
		log.Debug("tftpd: transfer evicted", "peer", t.peer, "file", t.name)
	} else {
		log.Info("tftpd: transfer ended", "peer", t.peer, "file", t.name, "bytes", n, "outcome", string(tr.Outcome), "err", err)
	}
	s.report(tr)
}

// window holds the datagrams of the blocks a transfer has sent and not yet seen
// acknowledged, in a ring of pooled buffers; for a transfer that sends from a mapping, the
// buffers hold the blocks' headers, and bodies point at their bytes in the mapping.
type window struct {
	bufs    []*[]byte
	classes []int
	lens    []int    // each datagram's length, its body's included
	bodies  [][]byte // nil until a block with a body is pushed
	start   int      // ring index of the oldest held block
	held    int      // blocks held
	out     [][]byte // the held datagrams (or headers) in order, for exchange
	bout    [][]byte // their bodies
}

func newWindow(n, size int) *window {
	w := &window{bufs: make([]*[]byte, n), classes: make([]int, n), lens: make([]int, n), out: make([][]byte, 0, n)}
	for i := range w.bufs {
		w.bufs[i], w.classes[i] = getPacket(size)
	}
	return w
}

func (w *window) free() {
	for i, b := range w.bufs {
		putPacket(b, w.classes[i])
	}
}

// next returns the buffer for the block after the held ones.
func (w *window) next() []byte { return w.slot(w.held) }

// slot returns the buffer of the i-th block from the oldest held one.
func (w *window) slot(i int) []byte { return *w.bufs[(w.start+i)%len(w.bufs)] }

// push counts the block written into next, of n bytes with its header.
func (w *window) push(n int) {
	w.lens[(w.start+w.held)%len(w.bufs)] = n
	w.held++
}

// pushPlaced counts the block whose header was written into next and whose bytes are body.
func (w *window) pushPlaced(body []byte) {
	if w.bodies == nil {
		w.bodies = make([][]byte, len(w.bufs))
		w.bout = make([][]byte, 0, len(w.bufs))
	}
	i := (w.start + w.held) % len(w.bufs)
	w.lens[i], w.bodies[i] = 4+len(body), body
	w.held++
}

// drop forgets the n oldest blocks (they were acknowledged).
func (w *window) drop(n int) {
	w.start = (w.start + n) % len(w.bufs)
	w.held -= n
}

// datagrams returns the first n held datagrams (all when fewer are held), in order; for
// blocks pushed with a body, their headers and, in the same order, the bodies (else nil).
func (w *window) datagrams(n int) (pkts, bodies [][]byte) {
	w.out = w.out[:0]
	if w.bodies != nil {
		w.bout = w.bout[:0]
		for i := range min(w.held, n) {
			j := (w.start + i) % len(w.bufs)
			w.out = append(w.out, (*w.bufs[j])[:4])
			w.bout = append(w.bout, w.bodies[j])
		}
		return w.out, w.bout
	}
	for i := range min(w.held, n) {
		j := (w.start + i) % len(w.bufs)
		w.out = append(w.out, (*w.bufs[j])[:w.lens[j]])
	}
	return w.out, nil
}

// run is the transfer proper. It returns the file bytes sent and, when it did not complete,
// the error, with OutcomeShutdown when the server aborted it and the file's error when
// reading failed.
func (x *sender) run(t *transfer, src blockSource, w *window) (sent int64, outcome Outcome, readFail, err error) {
	abort := x.s.abort
	// The OACK, built in the first block's buffer: tsize is left out for an empty file, as
	// curl refuses a tsize of 0; no OACK when nothing is left.
	buf := w.next()
	oack := binary.BigEndian.AppendUint16(buf[:0:len(buf)], opOACK)
	for _, o := range t.options {
		if o.Name == "tsize" && o.Value == "0" {
			continue
		}
		oack = append(append(oack, o.Name...), 0)
		oack = append(append(oack, o.Value...), 0)
	}
	if len(oack) > 2 {
		if _, err := x.exchange([][]byte{oack}, nil, 0, nil); err != nil {
			return 0, "", nil, x.stopped(err)
		}
	}
	x.src, x.w, x.blksize, x.next = src, w, t.blksize, 1
	base := uint16(1) // the oldest block held
	for {
		select {
		case <-abort:
			x.fail(codeNotFound, msgShutdown)
			return x.sentBytes(), OutcomeShutdown, nil, ErrShutdown
		default:
		}
		if w.held < t.window && !x.eof && x.readErr == nil {
			x.readBlocks(t.window - w.held)
		}
		if x.readErr != nil {
			x.fail(codeUndefined, msgReadError)
			return x.sentBytes(), "", x.readErr, x.readErr
		}
		pkts, bodies := w.datagrams(t.window)
		n, err := x.exchange(pkts, bodies, base, x.ahead)
		if err != nil {
			if x.placed != nil && errors.Is(err, syscall.EFAULT) {
				// The kernel found pages of the mapping gone: the file was cut short.
				x.fail(codeUndefined, msgReadError)
				err = fmt.Errorf("%w: the file was cut short while it was sent", err)
				return x.sentBytes(), "", err, err
			}
			return x.sentBytes(), "", nil, x.stopped(err)
		}
		w.drop(n)
		base += uint16(n)
		if x.eof && w.held == 0 {
			return x.read, OutcomeOK, nil, nil
		}
	}
}

// sentBytes is the file bytes handed to the network: those read, but for the blocks read
// ahead of the window.
func (x *sender) sentBytes() int64 {
	n := x.read
	for i := x.t.window; i < x.w.held; i++ {
		n -= int64(x.w.lens[(x.w.start+i)%len(x.w.bufs)] - 4)
	}
	return n
}

// readBlocks reads up to k blocks after the held ones into the window, in one read of the
// source; fewer when the file ends.
func (x *sender) readBlocks(k int) {
	w := x.w
	if x.placed != nil {
		x.placeBlocks(k)
		return
	}
	x.bufs = x.bufs[:0]
	for i := range k {
		x.bufs = append(x.bufs, w.slot(w.held + i)[4:4+x.blksize])
	}
	n, err := x.src.read(x.bufs)
	if err != nil {
		x.readErr = err
		return
	}
	for range k {
		m := min(n, x.blksize)
		n -= m
		x.header()
		w.push(4 + m)
		x.read += int64(m)
		if m < x.blksize {
			x.eof = true
			return
		}
	}
}

// header writes the DATA header of the next block into the window's next buffer.
func (x *sender) header() {
	pkt := x.w.next()
	binary.BigEndian.PutUint16(pkt, opDATA)
	binary.BigEndian.PutUint16(pkt[2:], x.next)
	x.next++
}

// placeBlocks is readBlocks for a file in a mapping: the blocks' bytes are pointed at, not
// read, and never touched by this process (see fileMaps).
func (x *sender) placeBlocks(k int) {
	w := x.w
	for range k {
		m := min(int64(len(x.placed))-x.read, int64(x.blksize))
		x.header()
		w.pushPlaced(x.placed[x.read : x.read+m : x.read+m])
		x.read += m
		if m < int64(x.blksize) {
			x.eof = true
			return
		}
	}
}

// readAhead reads the blocks after the window being sent into the window's spare buffers
// while its acknowledgement is on its way: the read overlaps the round trip, an
// acknowledgement that arrives meanwhile is read without waiting for it, and the next
// window is read with one call.
func (x *sender) readAhead() {
	if free := len(x.w.bufs) - x.w.held; free > 0 && !x.eof && x.readErr == nil {
		x.readBlocks(min(free, x.spare))
	}
}

// aheadBytes bounds the file bytes a transfer reads ahead of its window.
const aheadBytes = 16 << 10

// spareBlocks is how many blocks a transfer reads ahead: a whole window while that is
// within aheadBytes, else as many blocks as fit, at least one.
func spareBlocks(window, blksize int) int {
	return max(1, min(window, aheadBytes/blksize))
}

// stopped tells a client that stopped acknowledging that its transfer is over; a source
// that never acknowledged is told nothing (it may be a spoofed one: a datagram more
// reflected).
func (x *sender) stopped(err error) error {
	if errors.Is(err, errTimedOut) && x.acked {
		x.fail(codeUndefined, msgTimeout)
	}
	return err
}
