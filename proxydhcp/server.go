package proxydhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
)

// Defaults used when the corresponding Server field is zero.
const (
	DefaultAddr     = ":67"
	DefaultBootAddr = ":4011"
	DefaultWorkers  = 4
)

// Server is a proxy DHCP server. Set its fields, then call Serve and ServeBoot with bound
// sockets (or ListenAndServe); the fields must not change after that, except the boot file
// table through SetBootFiles.
type Server struct {
	// Handler decides which requests are answered. Required.
	Handler Handler

	// Discoverer, if set, is told about requests the Handler called ReasonUnknown.
	Discoverer Discoverer

	// BootFiles is the initial boot file table. A table with a nil ByArch means
	// DefaultBootFiles(). SetBootFiles replaces it while the server runs.
	BootFiles BootFiles

	// ServerIP, if set, is the address every reply names as server (option 54, siaddr) and
	// puts in URLs. When zero, each reply names the address of the interface the request came
	// in on, read per packet.
	ServerIP netip.Addr

	// HTTPPort is the port of the boot HTTP server in the URLs handed to HTTP boot clients
	// and iPXE. Default 80 (not written in the URL).
	HTTPPort int

	// ClientPort is where replies to port-67 requests go when they are not relayed.
	// Default ClientPort (68). Replies to port-4011 requests go to the request's source port.
	ClientPort int

	// Addr and BootAddr are the addresses ListenAndServe binds for port 67 and port 4011.
	// Defaults DefaultAddr and DefaultBootAddr.
	Addr, BootAddr string

	// Workers is how many goroutines read and answer requests on each socket, so at most
	// Workers requests per socket are handled at once; while all are busy, datagrams wait in
	// the socket's buffer, and what does not fit is dropped by the kernel (counted as
	// ReasonOverload on Linux). Default DefaultWorkers.
	Workers int

	// ReadBuffer, if set, is the receive buffer size (SO_RCVBUF) set on each socket.
	ReadBuffer int

	// HandlerTimeout, if set, is a deadline on the context of each Handler call. When zero,
	// the context is only canceled by Close: a deadline costs a timer per request, and a
	// Handler that looks a MAC up in memory needs none.
	HandlerTimeout time.Duration

	// Logger receives one debug record per request and errors of the sockets. Nil discards.
	Logger *slog.Logger

	counters counters
	files    atomic.Pointer[BootFiles]

	initOnce sync.Once
	initErr  error
	ctx      context.Context // canceled by Close; set once by init

	mu      sync.Mutex
	cancel  context.CancelFunc
	closed  bool
	conns   map[*serveConn]struct{}
	serving sync.WaitGroup // one per running serve call
}

// Validate reports settings that cannot work.
func (s *Server) Validate() error {
	if s.Handler == nil {
		return ErrNoHandler
	}
	if s.ServerIP.IsValid() && !usableServer(s.ServerIP) {
		return fmt.Errorf("proxydhcp: ServerIP %s is not a unicast IPv4 address", s.ServerIP)
	}
	for name, v := range map[string]int{"HTTPPort": s.HTTPPort, "ClientPort": s.ClientPort} {
		if v < 0 || v > 65535 {
			return fmt.Errorf("proxydhcp: %s %d out of range", name, v)
		}
	}
	if s.Workers < 0 || s.ReadBuffer < 0 || s.HandlerTimeout < 0 {
		return fmt.Errorf("proxydhcp: negative Workers, ReadBuffer or HandlerTimeout")
	}
	if s.BootFiles.ByArch != nil {
		if err := s.BootFiles.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// SetBootFiles replaces the boot file table; requests handled after it returns use t.
// The server keeps its own copy.
func (s *Server) SetBootFiles(t BootFiles) error {
	if err := t.Validate(); err != nil {
		return err
	}
	c := t.Clone()
	s.files.Store(&c)
	return nil
}

// CurrentBootFiles returns a copy of the table in use.
func (s *Server) CurrentBootFiles() BootFiles { return s.table().Clone() }

func (s *Server) table() *BootFiles {
	if t := s.files.Load(); t != nil {
		return t
	}
	var t BootFiles
	if s.BootFiles.ByArch != nil {
		t = s.BootFiles.Clone()
	} else {
		t = DefaultBootFiles()
	}
	s.files.CompareAndSwap(nil, &t)
	return s.files.Load()
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats { return s.counters.snapshot() }

var discard = slog.New(slog.DiscardHandler)

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return discard
	}
	return s.Logger
}

func (s *Server) init() error {
	s.initOnce.Do(func() {
		if err := s.Validate(); err != nil {
			s.initErr = err
			return
		}
		s.table()
		ctx, cancel := context.WithCancel(context.Background())
		s.mu.Lock()
		s.ctx, s.cancel = ctx, cancel
		if s.conns == nil {
			s.conns = make(map[*serveConn]struct{})
		}
		if s.closed {
			cancel()
		}
		s.mu.Unlock()
	})
	return s.initErr
}

// Serve answers port-67 requests (DISCOVER, and REQUEST to this server) read from conn until
// Shutdown or Close, and returns ErrServerClosed then. conn is usually a *net.UDPConn bound to
// 0.0.0.0:67; on it the server reads the interface of each request and answers from that
// interface's address. Serve takes ownership of conn and closes it when it returns.
func (s *Server) Serve(conn net.PacketConn) error { return s.serve(conn, PortDHCP) }

// ServeBoot answers PXE boot-server requests (port 4011) read from conn, like Serve.
func (s *Server) ServeBoot(conn net.PacketConn) error { return s.serve(conn, PortBoot) }

// ListenAndServe binds Addr and BootAddr and serves both until Shutdown or Close. It returns
// ErrServerClosed after those, or the first error of either socket.
func (s *Server) ListenAndServe() error {
	if err := s.init(); err != nil {
		return err
	}
	addr, baddr := s.Addr, s.BootAddr
	if addr == "" {
		addr = DefaultAddr
	}
	if baddr == "" {
		baddr = DefaultBootAddr
	}
	c67, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return &OpError{Op: "listen", Addr: addr, Err: err}
	}
	c4011, err := net.ListenPacket("udp4", baddr)
	if err != nil {
		c67.Close()
		return &OpError{Op: "listen", Addr: baddr, Err: err}
	}
	errc := make(chan error, 2)
	go func() { errc <- s.Serve(c67) }()
	go func() { errc <- s.ServeBoot(c4011) }()
	err = <-errc
	if !errors.Is(err, ErrServerClosed) {
		s.Close() // one socket failed: stop the other too
	}
	if err2 := <-errc; errors.Is(err, ErrServerClosed) && !errors.Is(err2, ErrServerClosed) {
		return err2
	}
	return err
}

func (s *Server) serve(conn net.PacketConn, port Port) error {
	if err := s.init(); err != nil {
		conn.Close()
		return err
	}
	sc := newServeConn(conn, port)
	if s.ReadBuffer > 0 && sc.uc != nil {
		sc.uc.SetReadBuffer(s.ReadBuffer)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return ErrServerClosed
	}
	s.conns[sc] = struct{}{}
	s.serving.Add(1)
	s.mu.Unlock()
	defer s.serving.Done()

	n := s.Workers
	if n == 0 {
		n = DefaultWorkers
	}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			errs <- s.work(sc)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrServerClosed) {
			s.mu.Lock()
			delete(s.conns, sc)
			s.mu.Unlock()
			conn.Close()
			return err
		}
	}
	return ErrServerClosed
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// work is one worker of a socket: read a datagram, answer it, again.
func (s *Server) work(sc *serveConn) error {
	buf := make([]byte, MaxPacketSize+1)
	out := make([]byte, 0, 576) // the reply, rebuilt in place for each request
	oob := make([]byte, sc.oobLen)
	for {
		n, src, info, err := sc.read(buf, oob)
		if err != nil {
			return s.readError(sc, err)
		}
		if !s.received(sc, n, info) {
			continue
		}
		local, direct := s.localAddr(sc, info)
		s.handle(sc, buf[:n], out, src, info.ifIndex, local, direct)
	}
}

// readError ends a worker: ErrServerClosed while shutting down, else the socket failed.
func (s *Server) readError(sc *serveConn, err error) error {
	if s.shuttingDown() {
		return ErrServerClosed
	}
	s.logger().Error("proxydhcp: read", "port", sc.port.String(), "err", err)
	sc.conn.Close() // stops the other workers of this socket too
	return &OpError{Op: "read", Addr: sc.addr, Err: err}
}

// received counts a datagram of n bytes and reports whether it is small enough to handle.
func (s *Server) received(sc *serveConn, n int, info pktInfo) bool {
	s.counters.received[sc.port].Add(1)
	if info.hasDrops {
		if d := sc.noteDrops(info.drops); d > 0 {
			s.counters.silent[sc.port][ReasonOverload].Add(d)
		}
	}
	if n > MaxPacketSize {
		s.counters.silent[sc.port][ReasonMalformed].Add(1)
		return false
	}
	return true
}

// localAddr picks the server address for a packet and the address to send its reply from:
// the kernel's own choice for it (Linux IP_PKTINFO ipi_spec_dst: for a broadcast, the
// address of the interface it came in on), else the unicast address it was sent to, else the
// socket's own address. Elsewhere than Linux, a socket bound to 0.0.0.0 that receives
// broadcasts needs Server.ServerIP.
func (s *Server) localAddr(sc *serveConn, info pktInfo) (local, direct netip.Addr) {
	switch {
	case usableServer(info.specDst):
		return info.specDst, info.specDst
	case usableServer(info.dst):
		return info.dst, info.dst
	case usableServer(sc.local):
		return sc.local, sc.local
	}
	return netip.Addr{}, netip.Addr{}
}

func (s *Server) handle(sc *serveConn, data, out []byte, src netip.AddrPort, ifIdx int, local, direct netip.Addr) {
	resp := s.answer(sc, data, out, src, local)
	if resp.Reply == nil {
		return
	}
	s.sent(sc, &resp, sc.write(resp.Reply, resp.Dest, ifIdx, s.sendFrom(direct)))
}

// answer runs the decision for one datagram; the reply, if any, is built in out's storage.
func (s *Server) answer(sc *serveConn, data, out []byte, src netip.AddrPort, local netip.Addr) (resp Response) {
	log := s.logger()
	defer func() {
		if v := recover(); v != nil {
			s.counters.silent[sc.port][ReasonError].Add(1)
			log.Error("proxydhcp: panic handling a request", "panic", v)
			resp = Response{}
		}
	}()
	if s.ctx.Err() != nil {
		return Response{}
	}
	resp = s.respond(s.ctx, Packet{Data: data, Port: sc.port, Source: src, Local: local}, out)
	if resp.Reply == nil && log.Enabled(s.ctx, slog.LevelDebug) {
		attrs := []any{"port", sc.port.String(), "src", src.String(), "reason", resp.Reason.String()}
		if resp.Request != nil {
			attrs = append(attrs, "mac", resp.Request.MAC.String(), "arch", resp.Request.Arch.String())
		}
		if resp.Err != nil {
			attrs = append(attrs, "err", resp.Err)
		}
		log.Debug("proxydhcp: silent", attrs...)
	}
	return resp
}

// sendFrom is the source address for a reply: the packet's own local address, unless
// ServerIP names another one (then the kernel chooses).
func (s *Server) sendFrom(direct netip.Addr) netip.Addr {
	if !s.ServerIP.IsValid() || s.ServerIP == direct {
		return direct
	}
	return netip.Addr{}
}

// sent counts and logs the outcome of sending resp.
func (s *Server) sent(sc *serveConn, resp *Response, err error) {
	log := s.logger()
	if err != nil {
		s.counters.sendErrors[sc.port].Add(1)
		log.Warn("proxydhcp: send", "port", sc.port.String(), "dest", resp.Dest.String(), "mac", resp.Request.MAC.String(), "err", err)
		return
	}
	s.counters.answered[sc.port].Add(1)
	if log.Enabled(s.ctx, slog.LevelDebug) {
		log.Debug("proxydhcp: answered", "port", sc.port.String(), "mac", resp.Request.MAC.String(),
			"arch", resp.Request.Arch.String(), "ipxe", resp.Request.IPXE, "dest", resp.Dest.String())
	}
}

// aLongTimeAgo unblocks reads at Shutdown.
var aLongTimeAgo = time.Unix(1, 0)

// Shutdown stops reading, lets the requests being handled be answered, then closes the
// sockets. If ctx ends first it closes at once and returns ctx's error. Serve, ServeBoot and
// ListenAndServe return ErrServerClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for sc := range s.conns {
		sc.conn.SetReadDeadline(aLongTimeAgo)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.serving.Wait()
		close(done)
	}()
	select {
	case <-done:
		return s.Close()
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close closes the sockets at once and cancels the contexts of the Handler calls under way.
// Serve, ServeBoot and ListenAndServe return ErrServerClosed. No goroutine of the server
// outlives Close.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var err error
	for sc := range s.conns {
		if e := sc.conn.Close(); e != nil && !errors.Is(e, net.ErrClosed) && err == nil {
			err = &OpError{Op: "close", Addr: sc.addr, Err: e}
		}
		delete(s.conns, sc)
	}
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.serving.Wait()
	return err
}

// serveConn is one socket the server reads, with per-packet interface information when the
// socket supports it.
type serveConn struct {
	conn   net.PacketConn
	uc     *net.UDPConn
	pc     *ipv4.PacketConn // nil when control messages are not available
	oobLen int              // control message buffer size
	port   Port
	addr   string
	local  netip.Addr    // the socket's bound address, when specific
	drops  atomic.Uint32 // the kernel's drop count last seen (SO_RXQ_OVFL)
}

// noteDrops records the kernel's cumulative drop count d and returns how many are new.
func (sc *serveConn) noteDrops(d uint32) uint64 {
	for {
		old := sc.drops.Load()
		if int32(d-old) <= 0 {
			return 0
		}
		if sc.drops.CompareAndSwap(old, d) {
			return uint64(d - old)
		}
	}
}

func newServeConn(conn net.PacketConn, port Port) *serveConn {
	sc := &serveConn{conn: conn, port: port}
	if la := conn.LocalAddr(); la != nil {
		sc.addr = la.String()
		if ua, ok := la.(*net.UDPAddr); ok {
			if a, ok := netip.AddrFromSlice(ua.IP); ok {
				sc.local = a.Unmap()
			}
		}
	}
	if uc, ok := conn.(*net.UDPConn); ok {
		setSockopts(uc)
		pc := ipv4.NewPacketConn(uc)
		if err := pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err == nil {
			sc.uc, sc.pc = uc, pc
			sc.oobLen = len(ipv4.NewControlMessage(ipv4.FlagDst|ipv4.FlagInterface)) + 64
		}
	}
	return sc
}

func (sc *serveConn) read(b, oob []byte) (n int, src netip.AddrPort, info pktInfo, err error) {
	if sc.pc != nil {
		var oobn int
		n, oobn, _, src, err = sc.uc.ReadMsgUDPAddrPort(b, oob)
		if err == nil {
			info = parsePktInfo(oob[:oobn])
		}
	} else {
		var from net.Addr
		n, from, err = sc.conn.ReadFrom(b)
		if ua, ok := from.(*net.UDPAddr); ok {
			src = ua.AddrPort()
		}
	}
	return n, netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), info, err
}

// pktInfo is what the kernel says about a received datagram.
type pktInfo struct {
	ifIndex int
	dst     netip.Addr // the destination address in the IP header
	specDst netip.Addr // the local address the kernel would answer from (Linux IP_PKTINFO)

	drops    uint32 // datagrams the kernel dropped on this socket so far (Linux SO_RXQ_OVFL)
	hasDrops bool
}

func (sc *serveConn) write(b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) error {
	if sc.pc != nil && ifIdx > 0 {
		return sc.writeFrom(b, dst, ifIdx, src)
	}
	if sc.uc != nil {
		_, err := sc.uc.WriteToUDPAddrPort(b, dst)
		return err
	}
	_, err := sc.conn.WriteTo(b, net.UDPAddrFromAddrPort(dst))
	return err
}
