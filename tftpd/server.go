package tftpd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pin/tftp/v3"
)

// Defaults used for zero Server fields.
const (
	DefaultMaxTransfers = 64
	DefaultMaxPerSource = 4
	DefaultMaxBlockSize = 65464 // the largest blksize of RFC 2348
	DefaultMaxNameLen   = 1024
	DefaultTimeout      = time.Second
	DefaultRetries      = 5
	DefaultAddr         = ":69"
)

// Server is a read-only TFTP server. Its fields are read when Serve is first called and must
// not change afterwards. A Server serves any number of sockets at once (Serve per socket); the
// limits hold across all of them.
type Server struct {
	// Dir is the directory served, opened with os.OpenRoot when Serve is first called:
	// "..", absolute names and symbolic links cannot lead out of it. Exactly one of Dir and
	// FS is set.
	Dir string
	// FS is the file system served instead of Dir (an embed.FS, a fstest.MapFS, an
	// os.Root's FS). Open must refuse names outside it as fs.FS requires; os.DirFS does not
	// confine symbolic links, (*os.Root).FS does.
	FS fs.FS

	// MaxTransfers bounds the transfers running at once; a request beyond it is dropped
	// unanswered. Zero means DefaultMaxTransfers (64).
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

	// Logger receives the detail of refusals and failures. Nil discards.
	Logger *slog.Logger
	// OnTransfer, when set, is called once for every admitted request when its transfer
	// ends, and once for every refused request (write, mode, name, missing file). It runs
	// on the transfer's goroutine, or on the listening loop for refusals: it must not block.
	OnTransfer func(Transfer)
	// Now is the clock for Transfer.Start and Duration. Nil means time.Now.
	Now func() time.Time

	mu        sync.Mutex
	started   bool
	closed    bool
	fsys      fs.FS
	root      *os.Root
	servers   map[*listener]*tftp.Server
	active    int
	perSource map[netip.Addr]int
	pending   map[uint64]*transfer
	nextID    uint64
	abort     chan struct{}
	abortOnce sync.Once
	doneOnce  sync.Once

	c counters
}

type counters struct {
	requests, transfers, completed, failed, bytes atomic.Uint64
	notFound, denied, refusedWrite, refusedMode   atomic.Uint64
	droppedBusy, droppedSource, droppedMalformed  atomic.Uint64
}

// Counters is a snapshot of what a Server did since it was made, for a host to export.
type Counters struct {
	Requests         uint64 // datagrams read on the listening sockets
	Transfers        uint64 // transfers started (each opened a socket)
	Completed        uint64 // transfers acknowledged to the last block
	Failed           uint64 // transfers that ended otherwise (client error, time-out, shutdown)
	Bytes            uint64 // file bytes sent by all transfers
	NotFound         uint64 // requests answered "file not found"
	Denied           uint64 // requests answered "access violation" (name, file type, root)
	RefusedWrite     uint64 // write requests refused
	RefusedMode      uint64 // netascii and mail requests refused
	DroppedBusy      uint64 // requests dropped unanswered: MaxTransfers running
	DroppedSource    uint64 // requests dropped unanswered: MaxPerSource running for the source
	DroppedMalformed uint64 // datagrams that were not a well-formed request, dropped
	Active           int    // transfers running now
}

// Counters returns a snapshot of the server's counters.
func (s *Server) Counters() Counters {
	s.mu.Lock()
	active := s.active
	s.mu.Unlock()
	return Counters{
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
		Active:           active,
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
func (s *Server) now() time.Time         { return s.clock()() }
func (s *Server) clock() func() time.Time {
	if s.Now != nil {
		return s.Now
	}
	return time.Now
}

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
	s.servers = make(map[*listener]*tftp.Server)
	s.perSource = make(map[netip.Addr]int)
	s.pending = make(map[uint64]*transfer)
	s.abort = make(chan struct{})
	s.started = true
	return nil
}

// ListenAndServe binds addr (DefaultAddr when empty) for UDP and serves it.
func (s *Server) ListenAndServe(addr string) error {
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
		failed:     make(chan struct{}),
	}
	ps := tftp.NewServer(s.serveTransfer, nil)
	ps.SetTimeout(s.timeout())
	ps.SetRetries(s.retries())
	ps.SetBackoff(func(int) time.Duration { return 0 })
	// The listening socket handed to pin/tftp is not a *net.UDPConn, so it cannot learn the
	// interface MTU; the blksize granted is decided in admit instead.
	ps.SetBlockSizeNegotiation(false)
	ps.SetHook(l)
	s.servers[l] = ps
	s.mu.Unlock()

	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-l.failed:
			ps.Shutdown()
		case <-stop:
		}
	})
	serveErr := ps.Serve(l)
	close(stop)
	watch.Wait()
	l.Close()

	s.mu.Lock()
	delete(s.servers, l)
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrServerClosed
	case l.err != nil:
		return &OpError{Op: "read", Err: l.err}
	case serveErr != nil:
		return &OpError{Op: "serve", Err: serveErr}
	}
	return ErrServerClosed
}

// Shutdown stops reading requests, closes the listening sockets and waits for the running
// transfers to end. If ctx ends first, it aborts them as Close does, waits for them to stop
// and returns ctx.Err(). Every Serve returns ErrServerClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	list := make(map[*listener]*tftp.Server, len(s.servers))
	for l, ps := range s.servers {
		list[l] = ps
	}
	started := s.started
	s.mu.Unlock()
	if !started {
		return nil
	}

	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for l, ps := range list {
			wg.Go(func() {
				l.Close()
				ps.Shutdown()
			})
		}
		wg.Wait()
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

// reserve takes a slot for a transfer from ip, or reports which limit refused it.
func (s *Server) reserve(ip netip.Addr) (ok bool, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, true
	}
	if s.active >= s.maxTransfers() {
		return false, true
	}
	if s.perSource[ip] >= s.maxPerSource() {
		return false, false
	}
	s.active++
	s.perSource[ip]++
	return true, false
}

func (s *Server) release(ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if n := s.perSource[ip] - 1; n > 0 {
		s.perSource[ip] = n
	} else {
		delete(s.perSource, ip)
	}
}

// reclaim undoes an admission whose transfer pin/tftp could not start.
func (s *Server) reclaim(id uint64, err error) {
	s.mu.Lock()
	t := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if t == nil {
		return
	}
	t.file.Close()
	s.release(t.peer.Addr())
	s.c.failed.Add(1)
	s.logger().Warn("tftpd: transfer could not start", "peer", t.peer, "file", t.name, "err", err)
	s.report(Transfer{
		Requested: t.requested, File: t.name, Peer: t.peer, Size: t.size, BlockSize: t.blksize,
		Start: t.start, Outcome: OutcomeAborted,
		Err: &OpError{Op: "transfer", Name: t.name, Err: fmt.Errorf("%w: %w", ErrAborted, err)},
	})
}

func (s *Server) report(t Transfer) {
	if s.OnTransfer != nil {
		s.OnTransfer(t)
	}
}

// listener is the listening socket as pin/tftp sees it: it reads datagrams, admits read
// requests within the limits and hands on only those, rewritten.
type listener struct {
	net.PacketConn
	srv *Server
	buf []byte
	// lastID is the admission handed to pin/tftp by the last ReadFrom; only pin/tftp's
	// serving goroutine touches it (ReadFrom, and OnFailure for a transfer that did not start).
	lastID uint64

	closeOnce sync.Once
	closed    chan struct{}
	failOnce  sync.Once
	failed    chan struct{}
	err       error // written before failed is closed
}

func (l *listener) ReadFrom(p []byte) (int, net.Addr, error) {
	l.lastID = 0
	for {
		n, addr, err := l.PacketConn.ReadFrom(l.buf)
		if err != nil {
			select {
			case <-l.closed:
				return 0, nil, err
			default:
			}
			l.failOnce.Do(func() {
				l.err = err
				close(l.failed)
			})
			<-l.closed
			return 0, nil, err
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			l.srv.c.droppedMalformed.Add(1)
			continue
		}
		out, id := l.srv.admit(l, l.buf[:n], ua)
		if out == nil {
			continue
		}
		l.lastID = id
		return copy(p, out), ua, nil
	}
}

func (l *listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		err = l.PacketConn.Close()
	})
	return err
}

// OnSuccess implements tftp.Hook; transfers are accounted in serveTransfer.
func (l *listener) OnSuccess(tftp.TransferStats) {}

// OnFailure implements tftp.Hook. Called with an empty Filename it comes from pin/tftp's
// serving loop: the request just handed on did not start a transfer (no socket).
func (l *listener) OnFailure(st tftp.TransferStats, err error) {
	if st.Filename != "" || l.lastID == 0 {
		return
	}
	id := l.lastID
	l.lastID = 0
	l.srv.reclaim(id, err)
}

func (l *listener) reply(to net.Addr, code uint16, msg string) {
	if _, err := l.PacketConn.WriteTo(errorPacket(code, msg), to); err != nil {
		l.srv.logger().Debug("tftpd: sending error", "peer", to.String(), "err", err)
	}
}

var _ tftp.Hook = (*listener)(nil)

func unmapped(a *net.UDPAddr) netip.AddrPort {
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// errRecovered marks a request whose handling panicked.
var errRecovered = errors.New("tftpd: panic while handling a request")
