package tftpdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
	"github.com/pin/tftp/v3"
)

// Server is a tftpd.Server serving on a socket of 127.0.0.1.
type Server struct {
	*tftpd.Server
	// Addr is the listening address ("127.0.0.1:PORT").
	Addr string

	served chan error
	err    error // what Serve returned, when not tftpd.ErrServerClosed
	closed bool
}

// NewServer starts srv (a new one over fsys when srv is nil) on a fresh loopback port.
// Close it when done.
func NewServer(fsys fs.FS, srv *tftpd.Server) (*Server, error) {
	if srv == nil {
		srv = &tftpd.Server{FS: fsys}
	}
	if err := srv.Validate(); err != nil {
		return nil, err
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv.Addr = conn.LocalAddr().String()
	s := &Server{Server: srv, Addr: srv.Addr, served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(conn) }()
	return s, nil
}

// Close shuts the server down, like [net/http/httptest.Server.Close]: it lets running
// transfers finish for up to 10 seconds, aborts the rest, and returns once Serve has
// returned and no goroutine of the server is left. Calling it again does nothing. Err
// tells whether Serve failed.
func (s *Server) Close() {
	if s.closed {
		return
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.Shutdown(ctx) != nil {
		s.Server.Close()
	}
	if err := <-s.served; !errors.Is(err, tftpd.ErrServerClosed) {
		s.err = err
	}
}

// Err returns, after Close, what Serve returned when that was anything but
// tftpd.ErrServerClosed (reading the socket failed), and nil otherwise.
func (s *Server) Err() error { return s.err }

// Fetch reads name from the TFTP server at addr in octet mode, asking for blksize (0 for
// none) and tsize, as network-booting firmware does. It returns the file and the size the
// server announced (-1 when it announced none).
func Fetch(addr, name string, blksize int) ([]byte, int64, error) {
	c, err := tftp.NewClient(addr)
	if err != nil {
		return nil, -1, err
	}
	c.SetTimeout(2 * time.Second)
	if blksize > 0 {
		c.SetBlockSize(blksize)
	}
	c.RequestTSize(true)
	wt, err := c.Receive(name, "octet")
	if err != nil {
		return nil, -1, fmt.Errorf("tftpdtest: fetch %q: %w", name, err)
	}
	size := int64(-1)
	if n, ok := wt.(tftp.IncomingTransfer).Size(); ok {
		size = n
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, size, fmt.Errorf("tftpdtest: fetch %q: %w", name, err)
	}
	return buf.Bytes(), size, nil
}
