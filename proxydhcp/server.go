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
	DefaultAddr           = ":67"
	DefaultBootAddr       = ":4011"
	DefaultWorkers        = 4
	DefaultQueueLen       = 256
	DefaultHandlerTimeout = time.Second
	// InterfaceCacheTTL is how long the addresses of an interface are reused before they are
	// read again.
	InterfaceCacheTTL = 10 * time.Second
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

	// Workers is how many requests are handled at once. Default DefaultWorkers.
	Workers int

	// QueueLen is how many datagrams may wait for a worker; more are dropped (and counted as
	// ReasonOverload). Default DefaultQueueLen.
	QueueLen int

	// HandlerTimeout bounds the context of each Handler call. Default DefaultHandlerTimeout.
	HandlerTimeout time.Duration

	// Logger receives one debug record per request and errors of the sockets. Nil discards.
	Logger *slog.Logger

	// Now is the clock of the interface address cache. Default time.Now.
	Now func() time.Time

	counters counters
	files    atomic.Pointer[BootFiles]
	ifaces   ifaceCache
	bufs     sync.Pool

	initOnce   sync.Once
	initErr    error
	ctx        context.Context
	cancel     context.CancelFunc
	jobs       chan job
	mu         sync.Mutex
	closed     bool
	conns      map[*serveConn]struct{}
	readers    sync.WaitGroup
	workers    sync.WaitGroup
	jobsClosed sync.Once
}

type job struct {
	sc     *serveConn
	buf    *[]byte
	n      int
	src    netip.AddrPort
	local  netip.Addr
	ifIdx  int
	direct netip.Addr // the local address to send from, when known
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
	if s.Workers < 0 || s.QueueLen < 0 || s.HandlerTimeout < 0 {
		return fmt.Errorf("proxydhcp: negative Workers, QueueLen or HandlerTimeout")
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

func (s *Server) handlerTimeout() time.Duration {
	if s.HandlerTimeout == 0 {
		return DefaultHandlerTimeout
	}
	return s.HandlerTimeout
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) init() error {
	s.initOnce.Do(func() {
		if err := s.Validate(); err != nil {
			s.initErr = err
			return
		}
		s.table()
		s.ctx, s.cancel = context.WithCancel(context.Background())
		q := s.QueueLen
		if q == 0 {
			q = DefaultQueueLen
		}
		n := s.Workers
		if n == 0 {
			n = DefaultWorkers
		}
		s.jobs = make(chan job, q)
		s.bufs.New = func() any { b := make([]byte, MaxPacketSize+1); return &b }
		s.conns = make(map[*serveConn]struct{})
		s.workers.Add(n)
		for range n {
			go s.worker()
		}
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
	go func() { errc <- s.ServeBoot(c4011) }()
	err = s.Serve(c67)
	if !errors.Is(err, ErrServerClosed) {
		s.Close()
	}
	err2 := <-errc
	if errors.Is(err, ErrServerClosed) && !errors.Is(err2, ErrServerClosed) {
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return ErrServerClosed
	}
	s.conns[sc] = struct{}{}
	s.readers.Add(1)
	s.mu.Unlock()

	err := s.readLoop(sc)
	s.readers.Done()
	if !errors.Is(err, ErrServerClosed) {
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		conn.Close()
	}
	return err
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) readLoop(sc *serveConn) error {
	log := s.logger()
	for {
		bp := s.bufs.Get().(*[]byte)
		n, src, info, err := sc.read(*bp)
		if err != nil {
			s.bufs.Put(bp)
			if s.shuttingDown() {
				return ErrServerClosed
			}
			log.Error("proxydhcp: read", "port", sc.port.String(), "err", err)
			return &OpError{Op: "read", Addr: sc.addr, Err: err}
		}
		s.counters.received[sc.port].Add(1)
		if n > MaxPacketSize {
			s.counters.silent[sc.port][ReasonMalformed].Add(1)
			s.bufs.Put(bp)
			continue
		}
		j := job{sc: sc, buf: bp, n: n, src: src, ifIdx: info.ifIndex}
		j.local, j.direct = s.localAddr(sc, info)
		select {
		case s.jobs <- j:
		default:
			s.counters.silent[sc.port][ReasonOverload].Add(1)
			s.bufs.Put(bp)
		}
	}
}

// localAddr picks the server address for a packet: the kernel's own answer (Linux), else
// the unicast address it was sent to when that is in one of the interface's subnets, else the
// interface's first IPv4 address, else the socket's own address. direct is the address to
// send from (one the host owns).
func (s *Server) localAddr(sc *serveConn, info pktInfo) (local, direct netip.Addr) {
	if usableServer(info.specDst) {
		return info.specDst, info.specDst
	}
	ifIdx, dst := info.ifIndex, info.dst
	if ifIdx > 0 {
		prefixes := s.ifaces.get(ifIdx, s.now())
		for _, p := range prefixes {
			// A unicast address of the interface's subnets (the request's own target) wins
			// over the interface's first address; the subnet's broadcast address does not.
			edge := p.Bits() < 31 && (dst == lastAddr(p) || dst == p.Masked().Addr())
			if p.Contains(dst) && !edge {
				return dst, dst
			}
		}
		if len(prefixes) > 0 {
			a := prefixes[0].Addr()
			return a, a
		}
	}
	if usableServer(dst) && ifIdx == 0 {
		return dst, dst
	}
	if usableServer(sc.local) {
		return sc.local, sc.local
	}
	return netip.Addr{}, netip.Addr{}
}

func (s *Server) worker() {
	defer s.workers.Done()
	for j := range s.jobs {
		s.handle(j)
	}
}

func (s *Server) handle(j job) {
	defer s.bufs.Put(j.buf)
	log := s.logger()
	defer func() {
		if v := recover(); v != nil {
			s.counters.silent[j.sc.port][ReasonError].Add(1)
			log.Error("proxydhcp: panic handling a request", "panic", v)
		}
	}()
	if s.ctx.Err() != nil {
		return
	}
	resp := s.Respond(s.ctx, Packet{Data: (*j.buf)[:j.n], Port: j.sc.port, Source: j.src, Local: j.local})
	debug := log.Enabled(s.ctx, slog.LevelDebug)
	if resp.Reply == nil {
		if debug {
			attrs := []any{"port", j.sc.port.String(), "src", j.src.String(), "reason", resp.Reason.String()}
			if resp.Request != nil {
				attrs = append(attrs, "mac", resp.Request.MAC.String(), "arch", resp.Request.Arch.String())
			}
			if resp.Err != nil {
				attrs = append(attrs, "err", resp.Err)
			}
			log.Debug("proxydhcp: silent", attrs...)
		}
		return
	}
	src := netip.Addr{}
	if !s.ServerIP.IsValid() || s.ServerIP == j.direct {
		src = j.direct
	}
	if err := j.sc.write(resp.Reply, resp.Dest, j.ifIdx, src); err != nil {
		s.counters.sendErrors[j.sc.port].Add(1)
		log.Warn("proxydhcp: send", "port", j.sc.port.String(), "dest", resp.Dest.String(), "mac", resp.Request.MAC.String(), "err", err)
		return
	}
	s.counters.answered[j.sc.port].Add(1)
	if debug {
		log.Debug("proxydhcp: answered", "port", j.sc.port.String(), "mac", resp.Request.MAC.String(),
			"arch", resp.Request.Arch.String(), "ipxe", resp.Request.IPXE, "dest", resp.Dest.String())
	}
}

// aLongTimeAgo unblocks reads at Shutdown.
var aLongTimeAgo = time.Unix(1, 0)

// Shutdown stops reading, lets the requests already read be answered, then closes the
// sockets. If ctx ends first it closes at once and returns ctx's error. Serve, ServeBoot and
// ListenAndServe return ErrServerClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for sc := range s.conns {
		sc.conn.SetReadDeadline(aLongTimeAgo)
	}
	s.mu.Unlock()
	s.readers.Wait()
	done := make(chan struct{})
	go func() {
		s.closeJobs()
		s.workers.Wait()
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

// Close closes the sockets at once and drops what is queued. Serve, ServeBoot and
// ListenAndServe return ErrServerClosed. No goroutine of the server outlives Close.
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
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	s.readers.Wait()
	s.closeJobs()
	s.workers.Wait()
	return err
}

func (s *Server) closeJobs() {
	s.jobsClosed.Do(func() {
		// Readers have all returned (closed is set, so none starts), so nothing sends on jobs.
		if s.jobs != nil {
			close(s.jobs)
		}
	})
}

// serveConn is one socket the server reads, with per-packet interface information when the
// socket supports it.
type serveConn struct {
	conn  net.PacketConn
	uc    *net.UDPConn
	pc    *ipv4.PacketConn // nil when control messages are not available
	oob   []byte           // control message buffer of the one reader
	port  Port
	addr  string
	local netip.Addr // the socket's bound address, when specific
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
		setBroadcast(uc)
		pc := ipv4.NewPacketConn(uc)
		if err := pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err == nil {
			sc.uc, sc.pc = uc, pc
			sc.oob = ipv4.NewControlMessage(ipv4.FlagDst | ipv4.FlagInterface)
		}
	}
	return sc
}

func (sc *serveConn) read(b []byte) (n int, src netip.AddrPort, info pktInfo, err error) {
	if sc.pc != nil {
		var oobn int
		n, oobn, _, src, err = sc.uc.ReadMsgUDPAddrPort(b, sc.oob)
		if err == nil {
			info = parsePktInfo(sc.oob[:oobn])
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
}

func (sc *serveConn) write(b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) error {
	to := net.UDPAddrFromAddrPort(dst)
	if sc.pc != nil && ifIdx > 0 {
		cm := &ipv4.ControlMessage{IfIndex: ifIdx}
		if src.IsValid() {
			a := src.As4()
			cm.Src = net.IP(a[:])
		}
		_, err := sc.pc.WriteTo(b, cm, to)
		return err
	}
	_, err := sc.conn.WriteTo(b, to)
	return err
}

// ifaceCache holds the IPv4 addresses of interfaces by index.
type ifaceCache struct {
	mu sync.Mutex
	m  map[int]ifaceEntry
}

type ifaceEntry struct {
	addrs   []netip.Prefix
	expires time.Time
}

func (c *ifaceCache) get(idx int, now time.Time) []netip.Prefix {
	c.mu.Lock()
	e, ok := c.m[idx]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.addrs
	}
	e = ifaceEntry{addrs: interfaceAddrs(idx), expires: now.Add(InterfaceCacheTTL)}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[int]ifaceEntry)
	}
	c.m[idx] = e
	c.mu.Unlock()
	return e.addrs
}

func interfaceAddrs(idx int) []netip.Prefix {
	ifi, err := net.InterfaceByIndex(idx)
	if err != nil {
		return nil
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok || !ip.Unmap().Is4() {
			continue
		}
		ones, bits := ipn.Mask.Size()
		if bits != 32 {
			continue
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out
}

// lastAddr is the broadcast address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(0xffffffff) >> p.Bits()
	if p.Bits() >= 32 {
		host = 0
	}
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
