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
	s := &Server{Server: srv, Addr: conn.LocalAddr().String(), served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(conn) }()
	return s, nil
}

// Close shuts the server down, waiting for its transfers, and returns what Serve returned
// when that was anything but tftpd.ErrServerClosed.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Shutdown(ctx)
	if serr := <-s.served; !errors.Is(serr, tftpd.ErrServerClosed) {
		return serr
	}
	return err
}

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
