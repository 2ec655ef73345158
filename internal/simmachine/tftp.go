package simmachine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// What EDK2's PXE asks of a TFTP server (NetworkPkg/UefiPxeBcDxe: PXEBC_MTFTP_TIMEOUT,
// PXEBC_MTFTP_RETRIES; the options of its TFTP reads as OVMF sends them).
const (
	EDK2TFTPTimeout   = 4 * time.Second // wait for a datagram before sending the last one again
	EDK2TFTPRetries   = 6               // sends again before the read fails
	EDK2TFTPBlockSize = 1468
	EDK2TFTPWindow    = 4
)

// TFTP opcodes and the error code EDK2 aborts its size request with.
const (
	tftpRRQ   = 1
	tftpDATA  = 3
	tftpACK   = 4
	tftpERROR = 5
	tftpOACK  = 6

	codeOptionRefused = 8
)

// errTFTPTimeout: no answer after the retries.
var errTFTPTimeout = errors.New("simmachine: tftp: no answer")

// tftpClient reads a file as EDK2's PXE does (Mtftp4Dxe): first a request "tsize 0 blksize
// 1468 windowsize 4" whose option acknowledgement gives the file's size, answered with an
// error 8 (the size was all it wanted); then, from the same port, the read itself with
// "blksize 1468 windowsize 4", acknowledging the last block of each window (and at once the
// block before a gap: a block out of order), sending its last datagram again after each
// timeout without an answer, up to retries times.
type tftpClient struct {
	conn    *net.UDPConn
	server  netip.AddrPort // the listening address; the transfer answers from another port
	timeout time.Duration
	retries int
	blksize int
	window  int
	buf     []byte
	stale   netip.AddrPort // the aborted size request's transfer: what it still sends is ignored
	set     time.Time      // the socket's read deadline
}

// deadlineSlack is how much earlier than asked a wait may end: the socket's deadline is
// moved only when it is that much short of the one asked, not at every datagram.
const deadlineSlack = 50 * time.Millisecond

// tftpResult is what a read gave.
type tftpResult struct {
	size    int64 // from the size request's tsize; -1 when the server gave none
	bytes   int64
	blksize int // negotiated
	window  int // negotiated
}

func (m *Machine) tftpGet(ctx context.Context, server netip.Addr, file string) (Fetched, error) {
	addr := netip.AddrPortFrom(server, 69)
	if m.TFTPAddr != nil {
		addr = m.TFTPAddr(server)
	}
	// From the machine's own address, as firmware sends: the server's per-source limit
	// counts machines, not the host the simulation runs on.
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(m.IP, 0)))
	if err != nil {
		return Fetched{}, fmt.Errorf("simmachine: tftp socket: %w", err)
	}
	defer conn.Close()
	c := &tftpClient{
		conn: conn, server: addr, timeout: m.TFTPTimeout, retries: m.TFTPRetries,
		blksize: orInt(m.TFTPBlockSize, EDK2TFTPBlockSize), window: orInt(m.TFTPWindow, EDK2TFTPWindow),
	}
	// Room for a block of the size asked and a byte more (a longer datagram breaks the
	// digest), not for any datagram: a storm holds a thousand of these.
	c.buf = make([]byte, max(c.blksize+5, 2048))
	if c.timeout == 0 {
		c.timeout = time.Second
	}
	if c.retries == 0 {
		c.retries = 5
	}
	h := m.newDigest()
	res, err := c.get(ctx, file, h, func(format string, args ...any) { m.event(format, args...) })
	if err != nil {
		return Fetched{}, fmt.Errorf("simmachine: tftp %s: %w", file, err)
	}
	if res.size >= 0 && res.size != res.bytes {
		return Fetched{}, fmt.Errorf("simmachine: tftp %s: tsize said %d bytes, the read gave %d", file, res.size, res.bytes)
	}
	return m.fetched("tftp://"+server.String()+"/"+file, h, res.bytes), nil
}

func orInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func rrqPacket(file string, opts ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, tftpRRQ)
	b = append(append(b, file...), 0)
	b = append(b, "octet\x00"...)
	for _, o := range opts {
		b = append(append(b, o...), 0)
	}
	return b
}

func ackPacket(block uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tftpACK), block)
}

func errorPacket(code uint16, msg string) []byte {
	b := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tftpERROR), code)
	return append(append(b, msg...), 0)
}

// get runs both requests, summing the file in h.
func (c *tftpClient) get(ctx context.Context, file string, h hash.Hash, event func(string, ...any)) (tftpResult, error) {
	res := tftpResult{size: -1}
	bs, ws := strconv.Itoa(c.blksize), strconv.Itoa(c.window)

	// The size request.
	pkt, from, err := c.ask(ctx, rrqPacket(file, "tsize", "0", "blksize", bs, "windowsize", ws), c.server, event)
	if err != nil {
		return res, err
	}
	switch op := binary.BigEndian.Uint16(pkt); op {
	case tftpOACK:
		opts := parseOptions(pkt[2:])
		if v, ok := opts["tsize"]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				res.size = n
			}
		}
		c.conn.WriteToUDPAddrPort(errorPacket(codeOptionRefused, "User aborted the transfer"), from)
		c.stale = from
	case tftpERROR:
		return res, tftpError(pkt)
	default:
		// No option support: the server started the file. EDK2 would take its size from
		// the read; stop this one.
		c.conn.WriteToUDPAddrPort(errorPacket(codeOptionRefused, "User aborted the transfer"), from)
		c.stale = from
	}

	// The read.
	pkt, from, err = c.ask(ctx, rrqPacket(file, "blksize", bs, "windowsize", ws), c.server, event)
	if err != nil {
		return res, err
	}
	res.blksize, res.window = 512, 1
	var first []byte
	switch op := binary.BigEndian.Uint16(pkt); op {
	case tftpOACK:
		opts := parseOptions(pkt[2:])
		if v, ok := opts["blksize"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 8 || n > c.blksize {
				return res, fmt.Errorf("OACK blksize %q: not within what was asked", v)
			}
			res.blksize = n
		}
		if v, ok := opts["windowsize"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > c.window {
				return res, fmt.Errorf("OACK windowsize %q: not within what was asked", v)
			}
			res.window = n
		}
		// ACK 0, sent again after each timeout until block 1 comes.
		first, _, err = c.ask(ctx, ackPacket(0), from, event)
		if err != nil {
			return res, err
		}
	case tftpERROR:
		return res, tftpError(pkt)
	case tftpDATA:
		first = pkt
	}
	n, err := c.receive(ctx, first, from, res.blksize, res.window, h, event)
	res.bytes = n
	return res, err
}

// ask sends pkt to to until a datagram comes back from the server's address (from to
// itself when to is a transfer's port rather than the listening one: EDK2 hears only the
// port it acknowledges), sending it again after each timeout, and returns the datagram
// and its sender.
func (c *tftpClient) ask(ctx context.Context, pkt []byte, to netip.AddrPort, event func(string, ...any)) ([]byte, netip.AddrPort, error) {
	for try := 0; try <= c.retries; try++ {
		if try > 0 {
			event("tftp: no answer to %s within %v, sending it again (%d of %d)", describe(pkt), c.timeout, try, c.retries)
		}
		if _, err := c.conn.WriteToUDPAddrPort(pkt, to); err != nil {
			return nil, netip.AddrPort{}, err
		}
		var only netip.AddrPort
		if to != c.server {
			only = to
		}
		b, from, err := c.recv(ctx, time.Now().Add(c.timeout), only)
		if err == nil {
			return b, from, nil
		}
		if !errors.Is(err, errTFTPTimeout) {
			return nil, netip.AddrPort{}, err
		}
	}
	return nil, netip.AddrPort{}, errTFTPTimeout
}

// describe names a datagram the client sends again: "the size request", "the read request"
// or "ACK n".
func describe(pkt []byte) string {
	switch binary.BigEndian.Uint16(pkt) {
	case tftpRRQ:
		if bytes.Contains(pkt, []byte("\x00tsize\x00")) {
			return "the size request"
		}
		return "the read request"
	case tftpACK:
		return fmt.Sprintf("ACK %d", binary.BigEndian.Uint16(pkt[2:]))
	}
	return fmt.Sprintf("opcode %d", binary.BigEndian.Uint16(pkt))
}

// recv returns the next datagram of at least 4 bytes from the server's address (from only,
// when that is valid), or errTFTPTimeout at deadline.
func (c *tftpClient) recv(ctx context.Context, deadline time.Time, only netip.AddrPort) ([]byte, netip.AddrPort, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, netip.AddrPort{}, err
		}
		if deadline.Before(c.set) || deadline.Sub(c.set) > deadlineSlack {
			c.conn.SetReadDeadline(deadline)
			c.set = deadline
		}
		n, from, err := c.conn.ReadFromUDPAddrPort(c.buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, netip.AddrPort{}, errTFTPTimeout
			}
			return nil, netip.AddrPort{}, err
		}
		if from.Addr().Unmap() != c.server.Addr().Unmap() || from == c.stale || n < 4 || (only.IsValid() && from != only) {
			continue
		}
		return c.buf[:n], from, nil
	}
}

// receive reads the DATA blocks from first on, from the transfer's port tid, into h.
func (c *tftpClient) receive(ctx context.Context, first []byte, tid netip.AddrPort, blksize, window int, h hash.Hash, event func(string, ...any)) (int64, error) {
	var total int64
	expected := uint16(1)
	sinceAck := 0
	last := ackPacket(0) // the datagram sent again on a timeout
	pkt := first
	tries := 0
	for {
		if pkt != nil {
			switch binary.BigEndian.Uint16(pkt) {
			case tftpERROR:
				return total, tftpError(pkt)
			case tftpDATA:
				block := binary.BigEndian.Uint16(pkt[2:])
				if block != expected {
					// Out of order: acknowledge the block before the gap at once.
					last = ackPacket(expected - 1)
					c.conn.WriteToUDPAddrPort(last, tid)
					sinceAck = 0
					break
				}
				tries = 0
				data := pkt[4:]
				h.Write(data)
				total += int64(len(data))
				expected++
				sinceAck++
				done := len(data) < blksize
				if sinceAck == window || done {
					last = ackPacket(block)
					c.conn.WriteToUDPAddrPort(last, tid)
					sinceAck = 0
				}
				if done {
					return total, nil
				}
			}
		}
		b, _, err := c.recv(ctx, time.Now().Add(c.timeout), tid)
		switch {
		case errors.Is(err, errTFTPTimeout):
			if tries++; tries > c.retries {
				return total, errTFTPTimeout
			}
			event("tftp: no block %d within %v, acknowledging block %d again (%d of %d)", expected, c.timeout, binary.BigEndian.Uint16(last[2:]), tries, c.retries)
			c.conn.WriteToUDPAddrPort(last, tid)
			sinceAck = 0
			pkt = nil
		case err != nil:
			return total, err
		default:
			pkt = b
		}
	}
}

// parseOptions reads the name NUL value NUL pairs of an OACK, names in lower case.
func parseOptions(b []byte) map[string]string {
	parts := strings.Split(string(b), "\x00")
	m := map[string]string{}
	for i := 0; i+1 < len(parts); i += 2 {
		m[strings.ToLower(parts[i])] = parts[i+1]
	}
	return m
}

func tftpError(pkt []byte) error {
	code := binary.BigEndian.Uint16(pkt[2:])
	msg, _, _ := strings.Cut(string(pkt[4:]), "\x00")
	return fmt.Errorf("server sent error %d %q", code, msg)
}
