package proxydhcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Defaults used when the corresponding Server field is zero.
const (
	DefaultAddr      = ":67"
	DefaultBootAddr  = ":4011"
	DefaultAddr6     = "[::]:547"
	DefaultBootAddr6 = "[::]:4011"
	DefaultWorkers   = 4
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

	// Relays, if set, lists the relay agents whose relayed requests are answered: a DHCPv4
	// request naming any other giaddr is dropped and counted as ReasonRelayNotAllowed before
	// the Handler or the Discoverer hear of it (for DHCPv6, the address a RELAY-FORW comes
	// from). Requests that were not relayed are not affected. When nil, every relay is.
	Relays []netip.Addr

	// Segments lists the provisioning subnets besides those of the interface each request
	// came in on: subnets behind the relays whose machines send their later requests (the
	// PXE and iPXE REQUEST to port 4011) straight to this server. An answer that goes unicast
	// to the requester (port 4011, a port-67 request with ciaddr, a DHCPv6 request not
	// relayed) is sent only to an address on the receiving interface's own subnets, an IPv6
	// link-local one, one on Segments, or one in the RelayPrefixLen subnet of the relay the
	// MAC's own relayed requests came through (learned for LearnedRelayTTL); any other
	// request is dropped before the Handler hears of it, counted as ReasonOffSegment. Where
	// the server cannot read a request's interface (Respond without Packet.Link, or an OS
	// without per-packet interface information) only the other rules admit it.
	Segments []netip.Prefix

	// RelayPrefixLen is the length of the subnet behind a relay learned from its giaddr.
	// Default DefaultRelayPrefixLen (24) for IPv4, 64 for IPv6.
	RelayPrefixLen int

	// Binder, if set, binds each answer to iPXE to the machine it goes to: see Binder.
	Binder Binder

	// Fence, if set, keeps the server silent while this agent is not the site's active boot
	// server: every request that would reach the Handler gets ReasonFenced instead, and the
	// Discoverer does not hear of it (DESIGN.md P5). *lease.Fence is one. When nil, the
	// Handler decides alone.
	Fence Fence

	// Now is the server's clock for what it learns about relays and for how long it keeps
	// an interface's subnets. Default clock.Real.
	Clock clock.Clock

	// ServerIP6, if set, is the IPv6 address DHCPv6 replies name in their boot file URLs.
	// When zero, each reply names the address its request was sent to when that is a global
	// one (a relayed request, or EDK2's boot-server request on port 4011), and for a request
	// to the multicast group a global address of the interface it came in on. Set it when the
	// sockets live in another network namespace than the process.
	ServerIP6 netip.Addr

	// ServerDUID is this server's DHCPv6 DUID (option 2), 3 to 130 bytes; EDK2 copies it
	// into its boot-server request. Default: a DUID-UUID (RFC 6355) drawn at random once per
	// Server. Set a stable one when several agents take turns as the boot server.
	ServerDUID []byte

	// TFTPPort is the TFTP server's port in the tftp:// URLs of DHCPv6 replies. Default 69
	// (not written in the URL).
	TFTPPort int

	// IPv6 makes ListenAndServe also serve DHCPv6 on Addr6 (joining ff02::1:2 on every
	// multicast interface, see ListenDHCPv6) and port 4011 on BootAddr6.
	IPv6 bool

	// Addr6 and BootAddr6 are the addresses ListenAndServe binds for DHCPv6 when IPv6 is
	// set. Defaults DefaultAddr6 and DefaultBootAddr6.
	Addr6, BootAddr6 string

	// HTTPPort is the port of the boot HTTP server in the URLs handed to HTTP boot clients
	// and iPXE. Default 80 (not written in the URL).
	HTTPPort int

	// HTTPSPort, when set, is the port of the boot server's HTTPS side: iPXE is handed its
	// chain URL as https://SERVER[:HTTPSPort] (443 is not written), so that everything it
	// fetches after it starts goes over TLS. UEFI HTTP boot clients still get http:// URLs on
	// HTTPPort for the iPXE build itself: their firmware may not trust the site's CA.
	// Zero: http for iPXE too.
	HTTPSPort int

	// HTTPBootTLS hands UEFI HTTP boot clients their iPXE build over https on HTTPSPort too
	// (https://SERVER[:HTTPSPort]/boot/files/NAME): for firmware that trusts the site's CA
	// (enrolled in the firmware; OVMF takes it through QEMU's etc/edk2/https/cacerts).
	// It needs HTTPSPort. False: http on HTTPPort.
	HTTPBootTLS bool

	// UpgradeIPXE, with HTTPSPort, answers an iPXE that says it has no HTTPS
	// ([Request.NoHTTPS]: a NIC ROM's, say) with its arch's boot file from the table, over
	// TFTP, instead of the https chain URL it could not fetch. Set it only when every build
	// in the table speaks https (siteboot's own do): a build without it would be handed
	// itself again, and loop. False: every iPXE gets the chain URL.
	UpgradeIPXE bool

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

	// ReplyDelay, if set, holds back every DHCPv4 reply to a client of an architecture it
	// lists (by option 93, or option 60's ":Arch:") for that long, as dnsmasq's
	// --dhcp-reply-delay does: some firmware ignores an answer that arrives at once, and a
	// site whose own DHCP server must answer first can make the proxy answer late. The worker
	// is not held: the reply waits in a timer (at most maxDelayed at once; beyond that it is
	// sent at once). Each is 0 to MaxReplyDelay (Validate). Default none.
	ReplyDelay map[hwid.Arch]time.Duration

	// HandlerTimeout, if set, is a deadline on the context of each Handler call. When zero,
	// the context is only canceled by Close: a deadline costs a timer per request, and a
	// Handler that looks a MAC up in memory needs none.
	HandlerTimeout time.Duration

	// Logger receives one debug record per request and errors of the sockets. Nil discards.
	Logger *slog.Logger

	// Events, if set, receives one event per parsed request: answered, or silent for its
	// Reason (named as Reason.String), with the boot id of the nonce an answer names. Nil
	// builds none.
	Events bootevents.Sink

	counters counters
	files    atomic.Pointer[BootFiles]
	relays   learnedRelays

	duidOnce sync.Once
	randDUID []byte
	macs     macCache // DHCPv6 clients' MACs by the ADVERTISE they got

	initOnce sync.Once
	initErr  error
	ctx      context.Context // canceled by Close; set once by init

	mu      sync.Mutex
	cancel  context.CancelFunc
	closed  bool
	conns   map[*serveConn]struct{}
	serving sync.WaitGroup // one per running serve call and per pending resend
	resends int            // pending resends
	delayed int            // replies waiting out a ReplyDelay
}

// Validate reports settings that cannot work.
func (s *Server) Validate() error {
	if s.Handler == nil {
		return ErrNoHandler
	}
	if s.ServerIP.IsValid() && !usableServer(s.ServerIP) {
		return fmt.Errorf("proxydhcp: ServerIP %s is not a unicast IPv4 address", s.ServerIP)
	}
	if s.ServerIP6.IsValid() && !usableServer6(s.ServerIP6) {
		return fmt.Errorf("proxydhcp: ServerIP6 %s is not a global unicast IPv6 address", s.ServerIP6)
	}
	if s.ServerDUID != nil {
		if err := validDUID(s.ServerDUID); err != nil {
			return fmt.Errorf("proxydhcp: ServerDUID: %w", err)
		}
	}
	for name, v := range map[string]int{"HTTPPort": s.HTTPPort, "HTTPSPort": s.HTTPSPort, "ClientPort": s.ClientPort, "TFTPPort": s.TFTPPort} {
		if v < 0 || v > 65535 {
			return fmt.Errorf("proxydhcp: %s %d out of range", name, v)
		}
	}
	if s.HTTPBootTLS && s.HTTPSPort == 0 {
		return errors.New("proxydhcp: HTTPBootTLS without HTTPSPort")
	}
	for _, p := range s.Segments {
		if !p.IsValid() || p.Bits() == 0 {
			return fmt.Errorf("proxydhcp: segment %v is not a subnet", p)
		}
	}
	for arch, d := range s.ReplyDelay {
		if d < 0 || d > MaxReplyDelay {
			return fmt.Errorf("proxydhcp: ReplyDelay for %s is %v, want 0 to %v", arch, d, MaxReplyDelay)
		}
	}
	if s.RelayPrefixLen < 0 || s.RelayPrefixLen > 128 {
		return fmt.Errorf("proxydhcp: RelayPrefixLen %d out of range", s.RelayPrefixLen)
	}
	for _, r := range s.Relays {
		if !r.IsValid() || r.IsUnspecified() || r.IsMulticast() || r == broadcast4 {
			return fmt.Errorf("proxydhcp: relay %v is not a unicast address", r)
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

// ServeBoot answers PXE boot-server requests (port 4011) read from conn, like Serve. conn
// may be an IPv6 socket ([::]:4011): EDK2's DHCPv6 PXE asks its boot-server REQUEST there.
func (s *Server) ServeBoot(conn net.PacketConn) error { return s.serve(conn, PortBoot) }

// ServeDHCPv6 answers DHCPv6 requests (port 547: SOLICIT, INFORMATION-REQUEST, RELAY-FORW)
// read from conn, like Serve. conn is usually from ListenDHCPv6, which joins the
// All_DHCP_Relay_Agents_and_Servers group that clients on the link send to; a socket that
// only relays reach needs no group.
func (s *Server) ServeDHCPv6(conn net.PacketConn) error { return s.serve(conn, PortDHCPv6) }

// AllDHCPRelayAgentsAndServers is the group DHCPv6 clients send to (RFC 8415 section 7.1).
var AllDHCPRelayAgentsAndServers = netip.MustParseAddr("ff02::1:2")

// ListenDHCPv6 binds addr (DefaultAddr6 when empty) for DHCPv6 and joins ff02::1:2 on the
// named interfaces, or on every interface that is up and multicast when none is named. An
// interface that cannot join is an error when named, and skipped otherwise. Interfaces
// are those of the calling thread's network namespace.
func ListenDHCPv6(addr string, ifaces ...string) (net.PacketConn, error) {
	if addr == "" {
		addr = DefaultAddr6
	}
	c, err := net.ListenPacket("udp6", addr)
	if err != nil {
		return nil, &OpError{Op: "listen", Addr: addr, Err: err}
	}
	pc := ipv6.NewPacketConn(c)
	group := &net.UDPAddr{IP: AllDHCPRelayAgentsAndServers.AsSlice()}
	if len(ifaces) > 0 {
		for _, name := range ifaces {
			ifi, err := net.InterfaceByName(name)
			if err == nil {
				err = pc.JoinGroup(ifi, group)
			}
			if err != nil {
				c.Close()
				return nil, &OpError{Op: "join ff02::1:2", Addr: name, Err: err}
			}
		}
		return c, nil
	}
	all, err := net.Interfaces()
	if err != nil {
		c.Close()
		return nil, &OpError{Op: "interfaces", Err: err}
	}
	for i := range all {
		if ifi := &all[i]; ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagMulticast != 0 {
			pc.JoinGroup(ifi, group)
		}
	}
	return c, nil
}

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
	var conns []net.PacketConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, a := range []string{addr, baddr} {
		c, err := net.ListenPacket("udp4", a)
		if err != nil {
			closeAll()
			return &OpError{Op: "listen", Addr: a, Err: err}
		}
		conns = append(conns, c)
	}
	serves := []func(net.PacketConn) error{s.Serve, s.ServeBoot}
	if s.IPv6 {
		c547, err := ListenDHCPv6(s.Addr6)
		if err != nil {
			closeAll()
			return err
		}
		conns = append(conns, c547)
		baddr6 := s.BootAddr6
		if baddr6 == "" {
			baddr6 = DefaultBootAddr6
		}
		c4011, err := net.ListenPacket("udp6", baddr6)
		if err != nil {
			closeAll()
			return &OpError{Op: "listen", Addr: baddr6, Err: err}
		}
		conns = append(conns, c4011)
		serves = append(serves, s.ServeDHCPv6, s.ServeBoot)
	}
	errc := make(chan error, len(conns))
	for i, c := range conns {
		go func() { errc <- serves[i](c) }()
	}
	var first error
	for range conns {
		err := <-errc
		if first == nil || errors.Is(first, ErrServerClosed) && !errors.Is(err, ErrServerClosed) {
			first = err
		}
		if !errors.Is(err, ErrServerClosed) {
			s.Close() // one socket failed: stop the others too
		}
	}
	return first
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
	closeNetns(sc.netns)
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
	if sc.v6 {
		return s.localAddr6(sc, info)
	}
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
	resp := s.answer(sc, data, out, src, local, sc.links.prefixes(sc.netns, ifIdx, s.now()))
	if resp.Reply == nil {
		return
	}
	from := s.sendFrom(direct)
	if resp.Delay > 0 && s.sendLater(sc, resp, ifIdx, from) {
		return
	}
	err := sc.write(resp.Reply, resp.Dest, ifIdx, from)
	s.sent(sc, &resp, err)
	if err == nil && sc.v6 && sc.port == PortBoot {
		s.resendLater(sc, resp.Reply, resp.Dest, ifIdx, from)
	}
}

// MaxReplyDelay bounds a Server.ReplyDelay: firmware gives up on DHCP after a few seconds.
const MaxReplyDelay = 10 * time.Second

// maxDelayed bounds the replies waiting out a ReplyDelay.
const maxDelayed = 256

// sendLater sends resp's reply after resp.Delay, unless the server closes first; false when
// too many replies wait already (the caller sends it at once).
func (s *Server) sendLater(sc *serveConn, resp Response, ifIdx int, from netip.Addr) bool {
	s.mu.Lock()
	if s.closed || s.delayed >= maxDelayed {
		s.mu.Unlock()
		return false
	}
	s.delayed++
	s.serving.Add(1) // Shutdown and Close wait for it
	s.mu.Unlock()
	resp.Reply = bytes.Clone(resp.Reply)
	go func() {
		defer func() {
			s.mu.Lock()
			s.delayed--
			s.mu.Unlock()
			s.serving.Done()
		}()
		t := time.NewTimer(resp.Delay)
		defer t.Stop()
		select {
		case <-t.C:
			s.sent(sc, &resp, sc.write(resp.Reply, resp.Dest, ifIdx, from))
		case <-s.ctx.Done():
		}
	}()
	return true
}

// Resend6Delay is when the REPLY to EDK2's DHCPv6 boot-server REQUEST (port 4011) is sent a
// second time. EDK2 starts reading for the answer only once its own send has completed
// (UefiPxeBcDxe/PxeBcImpl.c EfiPxeBcUdpWrite resets its writer, then
// PxeBcRequestBootService configures its reader) and never asks again: an answer that
// arrives in between is lost, and with it the boot attempt. The copy is harmless (same
// transaction; EDK2 reads one).
const Resend6Delay = 250 * time.Millisecond

// maxResends bounds the copies waiting to be sent.
const maxResends = 64

// resendLater sends a copy of b after Resend6Delay, unless the server closes first.
func (s *Server) resendLater(sc *serveConn, b []byte, dst netip.AddrPort, ifIdx int, src netip.Addr) {
	s.mu.Lock()
	if s.closed || s.resends >= maxResends {
		s.mu.Unlock()
		return
	}
	s.resends++
	s.serving.Add(1) // Shutdown and Close wait for it
	s.mu.Unlock()
	b = bytes.Clone(b)
	go func() {
		defer func() {
			s.mu.Lock()
			s.resends--
			s.mu.Unlock()
			s.serving.Done()
		}()
		t := time.NewTimer(Resend6Delay)
		defer t.Stop()
		select {
		case <-t.C:
			if sc.write(b, dst, ifIdx, src) == nil {
				s.counters.resent.Add(1)
			}
		case <-s.ctx.Done():
		}
	}()
}

// answer runs the decision for one datagram; the reply, if any, is built in out's storage.
func (s *Server) answer(sc *serveConn, data, out []byte, src netip.AddrPort, local netip.Addr, link []netip.Prefix) (resp Response) {
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
	resp = s.respond(s.ctx, Packet{Data: data, Port: sc.port, Source: src, Local: local, Link: link}, out)
	s.emit(sc.port, &resp)
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

// localAddr6 is localAddr for an IPv6 socket (IPV6_PKTINFO): the server address is the
// address the request was sent to when it is global, else (the multicast group, or our
// link-local address) a global address of the receiving interface; the reply leaves from
// the address the request was sent to when it was unicast, and from the address the kernel
// chooses on that interface (link-local) for the group.
func (s *Server) localAddr6(sc *serveConn, info pktInfo) (local, direct netip.Addr) {
	dst := info.dst
	if dst.Is4In6() { // a DHCPv4 request on a dual-stack socket
		return dst.Unmap(), dst.Unmap()
	}
	if dst.Is6() && !dst.IsMulticast() && !dst.IsUnspecified() {
		direct = dst
	}
	switch {
	case s.ServerIP6.IsValid():
		return s.ServerIP6, direct
	case usableServer6(dst):
		return dst, direct
	case usableServer6(sc.local):
		return sc.local, direct
	}
	return interfaceAddr6(info.ifIndex), direct
}

// interfaceAddr6 is the first global unicast address of interface ifIdx, in the process's
// network namespace; invalid when there is none.
func interfaceAddr6(ifIdx int) netip.Addr {
	if ifIdx <= 0 {
		return netip.Addr{}
	}
	ifi, err := net.InterfaceByIndex(ifIdx)
	if err != nil {
		return netip.Addr{}
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && usableServer6(ip) {
				return ip
			}
		}
	}
	return netip.Addr{}
}

// sendFrom is the source address for a reply: the packet's own local address, unless
// ServerIP names another one (then the kernel chooses). DHCPv6 replies always leave from
// the address asked.
func (s *Server) sendFrom(direct netip.Addr) netip.Addr {
	if direct.Is6() || !s.ServerIP.IsValid() || s.ServerIP == direct {
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
	if resp.NoUUID {
		s.counters.noUUID[sc.port].Add(1)
	}
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
	pc     *ipv4.PacketConn // nil when control messages are not available (or on an IPv6 socket)
	pc6    *ipv6.PacketConn // for an IPv6 socket; nil when control messages are not available
	v6     bool             // an IPv6 socket
	oobLen int              // control message buffer size
	port   Port
	addr   string
	local  netip.Addr    // the socket's bound address, when specific
	drops  atomic.Uint32 // the kernel's drop count last seen (SO_RXQ_OVFL)
	netns  int           // the socket's network namespace when not the process's (socketNetns); -1
	links  linkCache     // the subnets of the interfaces its requests came in on
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
	sc := &serveConn{conn: conn, port: port, netns: -1}
	if la := conn.LocalAddr(); la != nil {
		sc.addr = la.String()
		if ua, ok := la.(*net.UDPAddr); ok {
			if a, ok := netip.AddrFromSlice(ua.IP); ok {
				sc.local = a.Unmap()
			}
		}
	}
	if uc, ok := conn.(*net.UDPConn); ok && (port == PortDHCPv6 || isInet6(uc)) {
		sc.v6 = true
		setSockopts6(uc)
		pc := ipv6.NewPacketConn(uc)
		if err := pc.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true); err == nil {
			sc.uc, sc.pc6 = uc, pc
			sc.oobLen = len(ipv6.NewControlMessage(ipv6.FlagDst|ipv6.FlagInterface)) + 64
		}
	} else if ok {
		setSockopts(uc)
		pc := ipv4.NewPacketConn(uc)
		if err := pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err == nil {
			sc.uc, sc.pc = uc, pc
			sc.oobLen = len(ipv4.NewControlMessage(ipv4.FlagDst|ipv4.FlagInterface)) + 64
		}
	}
	sc.netns = socketNetns(sc.uc)
	return sc
}

func (sc *serveConn) read(b, oob []byte) (n int, src netip.AddrPort, info pktInfo, err error) {
	if sc.pc != nil || sc.pc6 != nil {
		var oobn int
		n, oobn, _, src, err = sc.uc.ReadMsgUDPAddrPort(b, oob)
		if err == nil && sc.v6 {
			info = parsePktInfo6(oob[:oobn])
		} else if err == nil {
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
	if sc.pc6 != nil && ifIdx > 0 {
		return sc.writeFrom6(b, dst, ifIdx, src)
	}
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

// emit hands the event of resp to Events; with no Events it builds nothing.
func (s *Server) emit(port Port, resp *Response) {
	if s.Events != nil && resp.Request != nil {
		s.Events.Emit(eventOf(port, resp))
	}
}

// eventOf is the event of a parsed request's response.
func eventOf(port Port, resp *Response) bootevents.Event {
	req := resp.Request
	e := bootevents.Event{
		MAC: req.MAC, Stage: bootevents.StageDHCPv4, Outcome: bootevents.OutcomeRefused, Reason: resp.Reason.String(),
		Peer: req.Source, Arch: req.Arch, HasArch: req.HasArch, UUID: req.UUID, HasUUID: req.HasUUID, IPXE: req.IPXE,
	}
	switch {
	case port == PortBoot:
		e.Stage = bootevents.StageBoot4011
	case req.IPv6:
		e.Stage = bootevents.StageDHCPv6
	}
	if req.ClientIP.IsValid() {
		e.Addr = req.ClientIP
	}
	if resp.Reply != nil {
		e.Outcome, e.Bytes = bootevents.OutcomeOK, uint64(len(resp.Reply))
		if to, ok := unicastTo(req, req.Relay.IsValid()); ok {
			e.Addr = to
		}
		e.BootID = bootevents.BootIDOf(resp.token)
		if resp.NoUUID {
			e.Detail = NoteNoUUID
		}
	}
	return e
}
