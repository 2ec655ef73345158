package sendfile

import (
	"io"
	"net"
	"os"
	"sync/atomic"
)

// The sendfile(2) calls made, by how: raw (the range was cached) or told to the scheduler.
var rawCalls, schedCalls atomic.Int64

// Calls returns how many sendfile(2) calls this package's connections have made, raw and
// through the scheduler, since the process started.
func Calls() (raw, scheduled int64) { return rawCalls.Load(), schedCalls.Load() }

// Listener returns ln with each accepted *net.TCPConn wrapped so that its ReadFrom sends
// files as the package doc says; other connections are returned as they are.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		return &conn{tc}, nil
	}
	return c, err
}

// conn is an accepted TCP connection whose ReadFrom sends a file as the package doc says.
type conn struct {
	*net.TCPConn
}

// ReadFrom copies r into the connection: with sendfile(2) when r is a file or a limited
// reader of one, else as net's ReadFrom does.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	remain := int64(-1) // to the end of the file
	src := r
	if lr, ok := r.(*io.LimitedReader); ok {
		if lr.N <= 0 {
			return 0, nil
		}
		remain, src = lr.N, lr.R
	}
	f, ok := src.(*os.File)
	if !ok {
		return c.TCPConn.ReadFrom(r)
	}
	n, err, handled := c.sendFile(f, remain)
	if lr, ok := r.(*io.LimitedReader); ok {
		lr.N -= n
	}
	if !handled {
		return c.TCPConn.ReadFrom(r)
	}
	return n, err
}
