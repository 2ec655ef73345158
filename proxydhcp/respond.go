package proxydhcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"time"
)

// Well-known ports.
const (
	ServerPort = 67   // DHCP server port; replies through a relay go to the relay's port 67
	ClientPort = 68   // DHCP client port; default of Server.ClientPort
	BootPort   = 4011 // PXE boot-server port
)

// Packet is one datagram as the server received it.
type Packet struct {
	Data   []byte
	Port   Port           // the role of the socket it came in on
	Source netip.AddrPort // the sender
	// Local is the server's address for this packet: the address of the interface it came in
	// on (or the unicast address it was sent to). Server.ServerIP, when set, wins.
	Local netip.Addr
	// Link lists the subnets of the interface it came in on (the server reads them per
	// packet); nil when unknown. See Server.Segments.
	Link []netip.Prefix
}

// Response is what the server does with a Packet: send Reply to Dest, or stay silent for
// Reason.
type Response struct {
	Reply   []byte         // the reply; nil when silent
	Dest    netip.AddrPort // where Reply goes
	Reason  Reason         // ReasonNone when answered
	Request *Request       // the parsed request; nil when the packet did not parse
	Err     error          // the parse error or recovered panic behind ReasonMalformed, ReasonNotPXE, ReasonError
	Delay   time.Duration  // how long the socket holds Reply back (Server.ReplyDelay for the client's arch)
	NoUUID  bool           // answered without the entry's UUID check (Decision.NoUUID)

	token string // the Binder's token named in Reply, for the boot id of an event
}

var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// Respond runs the whole decision for one packet, without a socket: parse (DHCPv6 for
// PortDHCPv6 and for an IPv6 Source, DHCPv4 otherwise), check the message against the port, ask the Handler (and the Discoverer for unknown machines), look the boot
// file up and build the reply. The server's sockets call it for every datagram; tests and
// tools may call it directly. It counts what it did in the server's Stats, except the
// datagram itself (Received), which the socket loop counts.
func (s *Server) Respond(ctx context.Context, p Packet) Response {
	return s.respond(ctx, p, nil)
}

// respond is Respond building the reply in buf's storage.
func (s *Server) respond(ctx context.Context, p Packet, buf []byte) (resp Response) {
	port := p.Port
	if port >= numPorts {
		port = PortDHCP
	}
	defer func() {
		if v := recover(); v != nil {
			resp = Response{Reason: ReasonError, Request: resp.Request, Err: fmt.Errorf("proxydhcp: panic: %v", v)}
		}
		if resp.Reason == ReasonNone {
			return
		}
		s.counters.silent[port][resp.Reason].Add(1)
	}()

	if a := p.Source.Addr(); port == PortDHCPv6 || (a.Is6() && !a.Is4In6()) {
		return s.respond6(ctx, p, port, buf)
	}
	req, err := Parse(p.Data)
	if err != nil {
		if errors.Is(err, ErrNotPXE) {
			return Response{Reason: ReasonNotPXE, Err: err}
		}
		return Response{Reason: ReasonMalformed, Err: err}
	}
	req.Port, req.Source = port, p.Source
	resp.Request = req
	if req.Relay.IsValid() && !s.relayAllowed(req.Relay) {
		resp.Reason = ReasonRelayNotAllowed
		return resp
	}
	if req.Relay.IsValid() && port == PortDHCP {
		s.relays.learn(req.MAC, req.Relay, s.now())
	}

	req.Server = s.ServerIP
	if !req.Server.IsValid() {
		req.Server = p.Local
	}
	if !usableServer(req.Server) {
		resp.Reason = ReasonNoServerAddress
		return resp
	}

	var ack bool
	switch {
	case port == PortDHCP && req.Type == MessageDiscover:
	case port == PortDHCP && req.Type == MessageRequest && req.ServerID == req.Server:
		// A client that chose this proxy's offer asks again on 67: answer it.
		ack = true
	case port == PortBoot && (req.Type == MessageRequest || req.Type == MessageInform):
		ack = true
	default:
		resp.Reason = ReasonIgnored
		return resp
	}

	to, unicast := unicastTo(req, false)
	if unicast && !s.onSegment(p.Link, to, req.MAC) {
		resp.Reason = ReasonOffSegment
		return resp
	}

	d := s.decide(ctx, req)
	if !d.Answer {
		switch resp.Reason = d.Reason; resp.Reason {
		case ReasonUnknown, ReasonFenced, ReasonDeclined:
		default: // the server's own reasons are not the host's to give
			resp.Reason = ReasonDeclined
		}
		if resp.Reason == ReasonUnknown && s.Discoverer != nil {
			s.Discoverer.Discovered(ctx, req)
		}
		return resp
	}

	file := d.BootFile
	if file != "" {
		if err := checkFile(file); err != nil {
			resp.Reason, resp.Err = ReasonError, fmt.Errorf("proxydhcp: boot file from handler: %w", err)
			return resp
		}
	} else {
		var ok bool
		if file, ok = s.bootFile(req); !ok {
			resp.Reason = ReasonNoBootFile
			return resp
		}
		if s.chains(req) && s.Binder != nil {
			if file, resp.token, err = s.bind(ctx, req, file, to, unicast); err != nil {
				resp.Reason, resp.Err = ReasonError, err
				return resp
			}
		}
	}

	resp.Reply = appendReply(buf[:0], req, file, ack)
	resp.Dest = s.dest(req)
	resp.NoUUID = d.NoUUID
	resp.Delay = s.ReplyDelay[req.Arch]
	return resp
}

// bind is the chain URL of an answer to iPXE with a Binder: with the Binder's token when
// the answer goes unicast to the requester at to, and no file at all when it does not.
func (s *Server) bind(ctx context.Context, req *Request, file string, to netip.Addr, unicast bool) (string, string, error) {
	if !unicast {
		return "", "", nil
	}
	if to.Is6() && to.IsLinkLocalUnicast() {
		to = netip.Addr{}
	}
	tok, err := s.Binder.Bind(ctx, req.MAC, to)
	if err != nil {
		return "", "", fmt.Errorf("proxydhcp: binder: %w", err)
	}
	return file + "?" + BindParam + "=" + url.QueryEscape(tok), tok, nil
}

func (s *Server) decide(ctx context.Context, req *Request) Decision {
	if s.Handler == nil {
		return Silence(ReasonDeclined)
	}
	if s.Fence != nil {
		if _, active := s.Fence.Active(); !active {
			return Silence(ReasonFenced)
		}
	}
	if t := s.HandlerTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	return s.Handler.ServeDHCP(ctx, req)
}

func usableServer(a netip.Addr) bool {
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() && a != broadcast4
}

// chains reports whether req gets the chain URL: it comes from iPXE, and, with UpgradeIPXE
// while the chain is https (HTTPSPort), one that can fetch it. An iPXE whose option 175
// lacks HTTPS is then answered as the firmware it runs in: with its arch's boot file over
// TFTP, an iPXE build that speaks https and then asks for the chain itself.
func (s *Server) chains(req *Request) bool {
	return req.IPXE && !(s.UpgradeIPXE && s.HTTPSPort != 0 && req.NoHTTPS)
}

// bootFile looks req up in the current table.
func (s *Server) bootFile(req *Request) (string, bool) {
	t := s.table()
	if s.chains(req) {
		return s.chainURL(req.Server.String(), t.chainPath()), true
	}
	f, ok := t.ByArch[req.Arch]
	if !ok || f == "" {
		return "", false
	}
	if req.Kind == KindHTTP {
		return s.filesURL(req.Server.String(), t.filesPath()+f), true
	}
	return f, true
}

// urlHost is the boot HTTP server's URL for path on host (an IPv4 address or a bracketed
// IPv6 one).
func (s *Server) urlHost(host, path string) string {
	if s.HTTPPort != 0 && s.HTTPPort != 80 {
		host += ":" + strconv.Itoa(s.HTTPPort)
	}
	return "http://" + host + path
}

// filesURL is the URL of an iPXE build for UEFI HTTP boot on host: over https on HTTPSPort
// with HTTPBootTLS.
func (s *Server) filesURL(host, path string) string {
	if !s.HTTPBootTLS {
		return s.urlHost(host, path)
	}
	return s.chainURL(host, path)
}

// chainURL is the URL of iPXE's chain script on host: over https on HTTPSPort when set.
func (s *Server) chainURL(host, path string) string {
	if s.HTTPSPort == 0 {
		return s.urlHost(host, path)
	}
	if s.HTTPSPort != 443 {
		host += ":" + strconv.Itoa(s.HTTPSPort)
	}
	return "https://" + host + path
}

// dest is where the reply to req goes (RFC 2131 section 4.1; PXE boot server: the source).
func (s *Server) dest(req *Request) netip.AddrPort {
	cport := uint16(s.ClientPort)
	if cport == 0 {
		cport = ClientPort
	}
	if req.Port == PortBoot {
		if req.Source.IsValid() && !req.Source.Addr().IsUnspecified() {
			return req.Source
		}
		if req.Source.Port() != 0 {
			cport = req.Source.Port()
		}
		return netip.AddrPortFrom(broadcast4, cport)
	}
	switch {
	case req.Relay.IsValid():
		return netip.AddrPortFrom(req.Relay, ServerPort)
	case req.ClientIP.IsValid():
		return netip.AddrPortFrom(req.ClientIP, cport)
	default:
		return netip.AddrPortFrom(broadcast4, cport)
	}
}

// relayAllowed reports whether a request relayed by r is answered (Server.Relays).
func (s *Server) relayAllowed(r netip.Addr) bool {
	if s.Relays == nil {
		return true
	}
	r = r.Unmap()
	for _, a := range s.Relays {
		if a.Unmap() == r {
			return true
		}
	}
	return false
}
