package tftpd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Outcome says how a request ended.
type Outcome string

// Outcomes reported in Transfer.
const (
	OutcomeOK       Outcome = "ok"        // every block acknowledged
	OutcomeNotFound Outcome = "not-found" // answered error 1
	OutcomeDenied   Outcome = "denied"    // answered error 2: name, file type or root refused
	OutcomeRefused  Outcome = "refused"   // write request or a mode other than octet
	OutcomeAborted  Outcome = "aborted"   // the client sent an error (EDK2 does after the OACK), or the socket failed
	OutcomeTimeout  Outcome = "timeout"   // the client stopped acknowledging
	OutcomeFailed   Outcome = "failed"    // reading the file failed
	OutcomeShutdown Outcome = "shutdown"  // Close, or Shutdown whose context ended
)

// Transfer describes one request and what came of it, for the host's OnTransfer hook.
type Transfer struct {
	Requested string         // the filename as the client sent it (any bytes but NUL)
	File      string         // the path under the root; empty when the name was refused
	Peer      netip.AddrPort // the client
	Size      int64          // the file's size; -1 when no file was opened
	Bytes     int64          // file bytes handed to the network
	BlockSize int            // negotiated block size; 0 when refused
	Start     time.Time      // when the request was read
	Duration  time.Duration  // from the request to the end of the transfer
	Outcome   Outcome
	Err       error // the detail (nil for OutcomeOK); never sent to the client
}

// transfer is an admitted request between admit and the end of serveTransfer.
type transfer struct {
	requested string
	name      string
	peer      netip.AddrPort
	file      fs.File
	size      int64
	blksize   int
	start     time.Time
}

// Messages on the wire: generic on purpose.
const (
	msgNotFound  = "file not found"
	msgAccess    = "access violation"
	msgReadOnly  = "read-only server"
	msgOctetOnly = "octet mode only"
)

// Errors whose text pin/tftp puts on the wire when a transfer stops on our side.
var (
	errWireRead     = errors.New("read error")
	errWireShutdown = errors.New("server shutting down")
	errWireUnknown  = errors.New("transfer aborted")
)

// admit decides what to do with one datagram read on a listening socket. It answers
// refusals itself and returns the request to hand on to pin/tftp, rewritten (filename a
// transfer id, options already granted), or nil.
func (s *Server) admit(l *listener, b []byte, from *net.UDPAddr) (out []byte, id uint64) {
	s.c.requests.Add(1)
	peer := unmapped(from)
	log := s.logger()
	defer func() {
		if r := recover(); r != nil {
			s.c.droppedMalformed.Add(1)
			log.Error("tftpd: request handling panicked", "peer", peer, "panic", fmt.Sprint(r))
			out, id = nil, 0
		}
	}()
	req, err := parseRequest(b)
	if err != nil {
		s.c.droppedMalformed.Add(1)
		log.Debug("tftpd: datagram dropped", "peer", peer, "err", err)
		return nil, 0
	}
	start := s.now()
	refuse := func(code uint16, msg string, outcome Outcome, name string, err error) {
		l.reply(from, code, msg)
		log.Info("tftpd: request refused", "peer", peer, "file", req.Filename, "outcome", string(outcome), "err", err)
		s.report(Transfer{Requested: req.Filename, File: name, Peer: peer, Size: -1, Start: start, Outcome: outcome, Err: err})
	}
	if req.Op == opWRQ {
		s.c.refusedWrite.Add(1)
		refuse(codeAccess, msgReadOnly, OutcomeRefused, "", ErrWriteRefused)
		return nil, 0
	}
	if req.Mode != "octet" {
		s.c.refusedMode.Add(1)
		refuse(codeUndefined, msgOctetOnly, OutcomeRefused, "", fmt.Errorf("%w: mode %q", ErrMode, req.Mode))
		return nil, 0
	}
	name, err := cleanName(req.Filename, s.maxNameLen())
	if err != nil {
		s.c.denied.Add(1)
		refuse(codeAccess, msgAccess, OutcomeDenied, "", err)
		return nil, 0
	}

	ip := peer.Addr()
	if ok, busy := s.reserve(ip); !ok {
		if busy {
			s.c.droppedBusy.Add(1)
			log.Debug("tftpd: request dropped: transfer limit", "peer", peer, "file", name)
		} else {
			s.c.droppedSource.Add(1)
			log.Debug("tftpd: request dropped: per-source limit", "peer", peer, "file", name)
		}
		return nil, 0
	}
	f, size, err := s.open(name)
	if err != nil {
		s.release(ip)
		if errors.Is(err, ErrNotFound) {
			s.c.notFound.Add(1)
			refuse(codeNotFound, msgNotFound, OutcomeNotFound, name, err)
		} else {
			s.c.denied.Add(1)
			refuse(codeAccess, msgAccess, OutcomeDenied, name, err)
		}
		return nil, 0
	}

	fwd := request{Op: opRRQ, Mode: "octet"}
	blksize := 512
	if v, ok := req.option("blksize"); ok {
		if n, ok := parseDecimal(v); ok && n >= 512 {
			blksize = int(min(n, int64(s.maxBlockSize())))
			fwd.Options = append(fwd.Options, option{"blksize", strconv.Itoa(blksize)})
		}
	}
	if v, ok := req.option("tsize"); ok {
		if _, ok := parseDecimal(v); ok {
			fwd.Options = append(fwd.Options, option{"tsize", strconv.FormatInt(size, 10)})
		}
	}
	t := &transfer{requested: req.Filename, name: name, peer: peer, file: f, size: size, blksize: blksize, start: start}
	s.mu.Lock()
	s.nextID++
	id = s.nextID
	s.pending[id] = t
	s.mu.Unlock()
	fwd.Filename = strconv.FormatUint(id, 10)
	return fwd.marshal(), id
}

// open opens name under the root and checks that it is a regular file.
func (s *Server) open(name string) (fs.File, int64, error) {
	f, err := s.fsys.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, &OpError{Op: "open", Name: name, Err: fmt.Errorf("%w: %w", ErrNotFound, err)}
		}
		return nil, 0, &OpError{Op: "open", Name: name, Err: fmt.Errorf("%w: %w", ErrDenied, err)}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, &OpError{Op: "stat", Name: name, Err: fmt.Errorf("%w: %w", ErrDenied, err)}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, &OpError{Op: "open", Name: name, Err: fmt.Errorf("%w: not a regular file (%v)", ErrDenied, st.Mode().Type())}
	}
	return f, st.Size(), nil
}

// readers pools the buffered readers transfers read their file through, so that a transfer
// of small blocks reads the file in large pieces.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 128<<10) }}

// fileReader is what pin/tftp reads a file from: the error it sees carries no detail (its
// text goes on the wire); the detail stays in err.
type fileReader struct {
	r       io.Reader
	abort   <-chan struct{}
	err     error
	aborted bool
}

func (r *fileReader) Read(p []byte) (int, error) {
	select {
	case <-r.abort:
		r.aborted = true
		return 0, errWireShutdown
	default:
	}
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
		return n, errWireRead
	}
	return n, err
}

// serveTransfer is pin/tftp's read handler: name is the transfer id admit gave.
func (s *Server) serveTransfer(name string, rf io.ReaderFrom) (herr error) {
	id, _ := strconv.ParseUint(name, 10, 64)
	s.mu.Lock()
	t := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if t == nil {
		return errWireUnknown
	}
	s.c.transfers.Add(1)
	br := readers.Get().(*bufio.Reader)
	br.Reset(t.file)
	fr := &fileReader{r: br, abort: s.abort}
	var (
		n   int64
		err error
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", errRecovered, r)
			}
		}()
		n, err = rf.ReadFrom(fr)
	}()
	br.Reset(nil)
	readers.Put(br)
	t.file.Close()
	s.release(t.peer.Addr())

	tr := Transfer{
		Requested: t.requested, File: t.name, Peer: t.peer, Size: t.size, Bytes: n,
		BlockSize: t.blksize, Start: t.start, Duration: s.now().Sub(t.start), Outcome: OutcomeOK,
	}
	s.c.bytes.Add(uint64(n))
	log := s.logger()
	if err == nil {
		s.c.completed.Add(1)
		log.Debug("tftpd: transfer done", "peer", t.peer, "file", t.name, "bytes", n, "blksize", t.blksize, "duration", tr.Duration)
		s.report(tr)
		return nil
	}
	s.c.failed.Add(1)
	var ne net.Error
	switch {
	case fr.aborted:
		tr.Outcome, err = OutcomeShutdown, ErrShutdown
	case fr.err != nil:
		tr.Outcome, err = OutcomeFailed, &OpError{Op: "read file", Name: t.name, Err: fr.err}
	case errors.As(err, &ne) && ne.Timeout():
		tr.Outcome, err = OutcomeTimeout, fmt.Errorf("%w: %w", ErrTimeout, err)
	default:
		tr.Outcome, err = OutcomeAborted, fmt.Errorf("%w: %w", ErrAborted, err)
	}
	if !errors.As(err, new(*OpError)) {
		err = &OpError{Op: "transfer", Name: t.name, Err: err}
	}
	tr.Err = err
	log.Info("tftpd: transfer ended", "peer", t.peer, "file", t.name, "bytes", n, "outcome", string(tr.Outcome), "err", err)
	s.report(tr)
	return errWireUnknown
}
