package tftpd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"strconv"
	"sync"
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
	conn     *net.UDPConn
	running  time.Time // when its socket opened, just before its first datagram
	evicted  bool      // gave its slot to a new request
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

// admit decides what to do with one datagram read on a listening socket. It answers
// refusals itself and returns the request to serve, rewritten (filename a transfer id, only
// the options granted), or nil.
func (s *Server) admit(l *listener, b []byte, from *net.UDPAddr) (out []byte, id uint64) {
	s.c.requests.Add(1)
	peer := unmapped(from)
	log := s.logger()
	defer func() {
		if r := recover(); r != nil {
			s.c.droppedMalformed.Add(1)
			log.Error("tftpd: request handling panicked", "peer", peer, "panic", fmt.Sprint(r))
			out, id = nil, 0
		}
	}()
	req, err := parseRequest(b)
	if err != nil {
		s.c.droppedMalformed.Add(1)
		log.Debug("tftpd: datagram dropped", "peer", peer, "err", err)
		return nil, 0
	}
	start := s.now()
	refuse := func(code uint16, msg string, outcome Outcome, name string, err error) {
		l.reply(from, code, msg)
		log.Info("tftpd: request refused", "peer", peer, "file", req.Filename, "outcome", string(outcome), "err", err)
		s.report(Transfer{Requested: req.Filename, File: name, Peer: peer, Size: -1, Start: start, Outcome: outcome, Err: err})
	}
	if req.Op == opWRQ {
		s.c.refusedWrite.Add(1)
		refuse(codeAccess, msgReadOnly, OutcomeRefused, "", ErrWriteRefused)
		return nil, 0
	}
	if req.Mode != "octet" {
		s.c.refusedMode.Add(1)
		refuse(codeUndefined, msgOctetOnly, OutcomeRefused, "", fmt.Errorf("%w: mode %q", ErrMode, req.Mode))
		return nil, 0
	}
	name, err := cleanName(req.Filename, s.maxNameLen())
	if err != nil {
		s.c.denied.Add(1)
		refuse(codeAccess, msgAccess, OutcomeDenied, "", err)
		return nil, 0
	}

	ip := peer.Addr()
	if ok, busy := s.reserve(ip); !ok {
		if busy {
			s.c.droppedBusy.Add(1)
			log.Debug("tftpd: request dropped: transfer limit", "peer", peer, "file", name)
		} else {
			s.c.droppedSource.Add(1)
			log.Debug("tftpd: request dropped: per-source limit", "peer", peer, "file", name)
		}
		return nil, 0
	}
	f, size, err := s.open(name)
	if err != nil {
		s.release(ip)
		if errors.Is(err, ErrNotFound) {
			s.c.notFound.Add(1)
			refuse(codeNotFound, msgNotFound, OutcomeNotFound, name, err)
		} else {
			s.c.denied.Add(1)
			refuse(codeAccess, msgAccess, OutcomeDenied, name, err)
		}
		return nil, 0
	}

	fwd := request{Op: opRRQ, Mode: "octet"}
	blksize := 512
	if v, ok := req.option("blksize"); ok {
		if n, ok := parseDecimal(v); ok && n >= 512 {
			blksize = int(min(n, int64(s.maxBlockSize())))
			fwd.Options = append(fwd.Options, option{"blksize", strconv.Itoa(blksize)})
		}
	}
	if v, ok := req.option("tsize"); ok {
		if _, ok := parseDecimal(v); ok {
			fwd.Options = append(fwd.Options, option{"tsize", strconv.FormatInt(size, 10)})
		}
	}
	window := 1
	if v, ok := req.option("windowsize"); ok {
		if n, ok := parseDecimal(v); ok && n >= 1 && n <= 65535 {
			window = int(min(n, int64(s.maxWindow()), int64(max(1, MaxWindowBytes/blksize))))
			fwd.Options = append(fwd.Options, option{"windowsize", strconv.Itoa(window)})
			if window > 1 {
				s.c.windowed.Add(1)
			}
		}
	}
	t := &transfer{requested: req.Filename, name: name, peer: peer, file: f, size: size, blksize: blksize, window: window, start: start, options: fwd.Options}
	s.mu.Lock()
	s.nextID++
	id = s.nextID
	s.pending[id] = t
	s.mu.Unlock()
	fwd.Filename = strconv.FormatUint(id, 10)
	return fwd.marshal(), id
}

// open opens name under the root and checks that it is a regular file.
func (s *Server) open(name string) (fs.File, int64, error) {
	f, err := s.fsys.Open(name)
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

// readers pools the buffered readers transfers read their file through, so that a transfer
// of small blocks reads the file in large pieces.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 128<<10) }}

// packets pools the datagram buffers of transfers, by size class: a buffer holds one DATA
// packet of the negotiated block size.
var packets = [...]struct {
	size int
	pool sync.Pool
}{{size: 4 + 1468}, {size: 4 + 8192}, {size: 4 + 65464}}

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
	conn    *net.UDPConn
	peer    netip.AddrPort
	timeout time.Duration
	retries int // resends of a datagram once the client acknowledged one
	first   int // resends before that
	acked   bool
	batch   *batcher // nil: one system call per datagram
	rbuf    [516]byte
}

// exchange sends the window pkts, the datagrams of blocks base, base+1, ... (one datagram:
// the OACK as block 0, or one DATA block), and waits for an acknowledgement of one of them,
// sending the window again when none comes within the timeout. It returns how many of the
// window's datagrams the acknowledgement covers (1 to len(pkts)): the caller goes on from
// the block after it, as RFC 7440 has a sender do after a short acknowledgement.
// Acknowledgements of blocks outside the window (duplicates of earlier ones) are ignored; a
// datagram from another port gets error 5 and is ignored otherwise.
func (x *sender) exchange(pkts [][]byte, base uint16) (int, error) {
	retries := x.retries
	if !x.acked {
		retries = x.first
	}
	for range retries + 1 {
		if err := x.send(pkts); err != nil {
			return 0, err
		}
		if err := x.conn.SetReadDeadline(time.Now().Add(x.timeout)); err != nil {
			return 0, err
		}
		for {
			n, from, err := x.conn.ReadFromUDPAddrPort(x.rbuf[:])
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return 0, err
			}
			if from.Port() != x.peer.Port() || from.Addr().Unmap() != x.peer.Addr() {
				x.conn.WriteToUDPAddrPort(errorPacket(codeUnknownTID, msgUnknownTID), from)
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
				return 0, &errClient{code: num, msg: msg}
			}
		}
	}
	return 0, errTimedOut
}

// send hands a window to the kernel: one datagram with one system call, more in as few as
// the batcher manages.
func (x *sender) send(pkts [][]byte) error {
	if len(pkts) > 1 && x.batch != nil {
		return x.batch.send(pkts)
	}
	for _, p := range pkts {
		if _, err := x.conn.WriteToUDPAddrPort(p, x.peer); err != nil {
			return err
		}
	}
	return nil
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
	x.conn.WriteToUDPAddrPort(errorPacket(code, msg), x.peer)
}

// directRead is the block size from which a transfer reads its file straight into its
// datagrams: a buffered reader would copy every block once more.
const directRead = 8192

// serveTransfer runs an admitted transfer on its socket conn: the OACK when options were
// granted, then the file a window at a time, each window sent until acknowledged.
func (s *Server) serveTransfer(t *transfer, conn *net.UDPConn) {
	x := &sender{s: s, t: t, conn: conn, peer: t.peer, timeout: s.timeout(), retries: s.retries(), first: s.firstRetries()}
	if s.isKnown(t.peer.Addr()) {
		x.first = x.retries
	}
	if t.window > 1 {
		x.batch = newBatcher(conn, t.peer, t.window)
	}
	var r io.Reader = t.file
	var br *bufio.Reader
	if t.blksize < directRead {
		br = readers.Get().(*bufio.Reader)
		br.Reset(t.file)
		r = br
	}
	w := newWindow(t.window, 4+t.blksize)
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
		n, outcome, readFail, err = x.run(t, r, w)
	}()
	conn.Close()
	if br != nil {
		br.Reset(nil)
		readers.Put(br)
	}
	w.free()
	t.file.Close()
	evicted := s.ended(t)

	tr := Transfer{
		Requested: t.requested, File: t.name, Peer: t.peer, Size: t.size, Bytes: n,
		BlockSize: t.blksize, Window: t.window, Start: t.start, Duration: s.now().Sub(t.start), Outcome: OutcomeOK,
	}
	s.c.bytes.Add(uint64(n))
	log := s.logger()
	if err == nil {
		s.c.completed.Add(1)
		log.Debug("tftpd: transfer done", "peer", t.peer, "file", t.name, "bytes", n, "blksize", t.blksize, "window", t.window, "duration", tr.Duration)
		s.report(tr)
		return
	}
	s.c.failed.Add(1)
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
// acknowledged, in a ring of pooled buffers.
type window struct {
	bufs    []*[]byte
	classes []int
	lens    []int
	start   int      // ring index of the oldest held block
	held    int      // blocks held
	out     [][]byte // the held datagrams in order, for exchange
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
func (w *window) next() []byte { return *w.bufs[(w.start+w.held)%len(w.bufs)] }

// push counts the block written into next, of n bytes with its header.
func (w *window) push(n int) {
	w.lens[(w.start+w.held)%len(w.bufs)] = n
	w.held++
}

// drop forgets the n oldest blocks (they were acknowledged).
func (w *window) drop(n int) {
	w.start = (w.start + n) % len(w.bufs)
	w.held -= n
}

func (w *window) datagrams() [][]byte {
	w.out = w.out[:0]
	for i := range w.held {
		j := (w.start + i) % len(w.bufs)
		w.out = append(w.out, (*w.bufs[j])[:w.lens[j]])
	}
	return w.out
}

// run is the transfer proper. It returns the file bytes sent and, when it did not complete,
// the error, with OutcomeShutdown when the server aborted it and the file's error when
// reading failed.
func (x *sender) run(t *transfer, r io.Reader, w *window) (sent int64, outcome Outcome, readFail, err error) {
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
		if _, err := x.exchange([][]byte{oack}, 0); err != nil {
			return 0, "", nil, x.stopped(err)
		}
	}
	base, next := uint16(1), uint16(1) // the oldest block held, the next block to read
	eof := false
	for {
		select {
		case <-abort:
			x.fail(codeNotFound, msgShutdown)
			return sent, OutcomeShutdown, nil, ErrShutdown
		default:
		}
		for w.held < len(w.bufs) && !eof {
			pkt := w.next()[:4+t.blksize]
			m, rerr := io.ReadFull(r, pkt[4:])
			if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
				x.fail(codeUndefined, msgReadError)
				return sent, "", rerr, rerr
			}
			sent += int64(m)
			binary.BigEndian.PutUint16(pkt, opDATA)
			binary.BigEndian.PutUint16(pkt[2:], next)
			next++
			w.push(4 + m)
			eof = m < t.blksize
		}
		n, err := x.exchange(w.datagrams(), base)
		if err != nil {
			return sent, "", nil, x.stopped(err)
		}
		w.drop(n)
		base += uint16(n)
		if eof && w.held == 0 {
			return sent, OutcomeOK, nil, nil
		}
	}
}

// stopped tells a client that stopped acknowledging that its transfer is over.
func (x *sender) stopped(err error) error {
	if errors.Is(err, errTimedOut) {
		x.fail(codeUndefined, msgTimeout)
	}
	return err
}
