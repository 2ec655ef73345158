package syslogd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
)

// DefaultAddr is where ListenAndServe listens when Addr is empty: the syslog port.
const DefaultAddr = ":514"

// Resolver names the machine behind a source address: the address a DHCP answer went
// to. *bootevents.Timeline is one.
type Resolver interface {
	MACOf(addr netip.Addr) (hwid.MAC, bool)
}

// Server receives syslog datagrams and hands each line to Sink as a console event
// (bootevents.StageConsole, OutcomeLog, Reason the severity's keyword, Detail the line
// cleaned of all but printable text). It serves nothing unless a host starts it.
type Server struct {
	// Addr is ListenAndServe's address. Default DefaultAddr.
	Addr string
	// Sink receives the lines. Required.
	Sink bootevents.Sink
	// Resolve, if set, names the machine of a source address; without it (or when it
	// does not know the address) the event carries only the source, which a
	// bootevents.Timeline resolves itself.
	Resolve Resolver
	// Logger receives errors of the socket. Nil discards.
	Logger *slog.Logger

	received, malformedN, lines atomic.Uint64

	mu     sync.Mutex
	conns  map[net.PacketConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Stats counts a Server's work.
type Stats struct {
	Received  uint64 // datagrams read
	Malformed uint64 // datagrams that were not syslog
	Lines     uint64 // lines handed to Sink
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	return Stats{Received: s.received.Load(), Malformed: s.malformedN.Load(), Lines: s.lines.Load()}
}

// ListenAndServe listens on UDP Addr and serves.
func (s *Server) ListenAndServe() error {
	addr := s.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	return s.Serve(c)
}

// Serve reads datagrams from conn until Shutdown or Close, and closes conn. It returns
// ErrServerClosed then, or the socket's error.
func (s *Server) Serve(conn net.PacketConn) error {
	if s.Sink == nil {
		conn.Close()
		return ErrNoSink
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return ErrServerClosed
	}
	if s.conns == nil {
		s.conns = make(map[net.PacketConn]struct{})
	}
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer conn.Close()
	buf := make([]byte, MaxMessage)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.logger().Error("syslogd: read", "err", err)
			return err
		}
		s.received.Add(1)
		s.handle(buf[:n], from)
	}
}

func (s *Server) handle(b []byte, from net.Addr) {
	m, err := Parse(b)
	if err != nil {
		s.malformedN.Add(1)
		return
	}
	var src netip.AddrPort
	if ua, ok := from.(*net.UDPAddr); ok {
		src = ua.AddrPort()
		src = netip.AddrPortFrom(src.Addr().Unmap().WithZone(""), src.Port())
	}
	e := bootevents.Event{
		Stage: bootevents.StageConsole, Outcome: bootevents.OutcomeLog, Peer: src,
		Reason: SeverityName(m.Severity), Detail: RedactURLs(CleanText(m.Text, bootevents.MaxLine)),
	}
	if e.Detail == "" {
		return
	}
	if s.Resolve != nil {
		if mac, ok := s.Resolve.MACOf(src.Addr()); ok {
			e.MAC = mac
		}
	}
	s.lines.Add(1)
	s.Sink.Emit(e)
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Shutdown stops the server as Close does: a datagram server has nothing to drain. It
// returns ctx's error if ctx ends before Serve has returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes the sockets and waits for Serve to return.
func (s *Server) Close() error {
	s.close()
	s.wg.Wait()
	return nil
}

func (s *Server) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.SetReadDeadline(time.Unix(1, 0))
		c.Close()
	}
	clear(s.conns)
}

func printable(s string, max int) string { return bootevents.Printable(s, max) }
