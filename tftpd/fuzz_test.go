package tftpd

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func addSeeds(f *testing.F) {
	paths, err := filepath.Glob("testdata/requests/*.bin")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds in testdata/requests: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseRequest: what parses encodes back to the same request, and the parsed fields keep
// their invariants; a name that cleanName accepts is a valid path with no backslash.
func FuzzParseRequest(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRequest(b)
		if err != nil {
			return
		}
		again, err := parseRequest(r.marshal())
		if err != nil {
			t.Fatalf("re-parse of %q: %v", r.marshal(), err)
		}
		if diff := cmp.Diff(r, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
		if r.Op != opRRQ && r.Op != opWRQ || r.Filename == "" || strings.IndexByte(r.Filename, 0) >= 0 ||
			r.Mode == "" || r.Mode != strings.ToLower(r.Mode) && isASCII(r.Mode) || len(r.Options) > maxOptions {
			t.Fatalf("invariants broken: %+v", r)
		}
		seen := map[string]bool{}
		for _, o := range r.Options {
			if o.Name == "" || seen[o.Name] || strings.ContainsAny(o.Name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
				t.Fatalf("option names: %+v", r.Options)
			}
			seen[o.Name] = true
		}
		if p, err := cleanName(r.Filename, DefaultMaxNameLen); err == nil {
			if !fs.ValidPath(p) || strings.Contains(p, `\`) || p == "." || len(p) > DefaultMaxNameLen {
				t.Fatalf("cleanName(%q) = %q", r.Filename, p)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// recordConn is a PacketConn that records what is written to it.
type recordConn struct {
	net.PacketConn
	mu     sync.Mutex
	writes [][]byte
}

func (r *recordConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, append([]byte(nil), b...))
	return len(b), nil
}

// FuzzAdmit feeds any datagram to the admission of the listening socket. It never panics;
// what it admits is a transfer with only blksize, tsize and windowsize granted, within
// bounds; what it answers is one ERROR packet with one of the generic messages.
func FuzzAdmit(f *testing.F) {
	addSeeds(f)
	fsys := fstest.MapFS{"ipxe.efi": {Data: []byte("x")}, "boot/ipxe.efi": {Data: []byte("y")}, "dir/f": {Data: nil}}
	generic := map[string]bool{msgNotFound: true, msgAccess: true, msgReadOnly: true, msgOctetOnly: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &Server{FS: fsys, MaxBlockSize: 8192}
		s.mu.Lock()
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		s.mu.Unlock()
		rc := &recordConn{}
		var admitted []uint64
		l := &listener{PacketConn: rc, srv: s, admitted: func(id uint64) { admitted = append(admitted, id) }}
		s.admit(l, b, &net.UDPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 1234}, netip.Addr{})
		if len(admitted) == 0 {
			for _, w := range rc.writes {
				if len(w) < 5 || binary.BigEndian.Uint16(w) != opERROR || w[len(w)-1] != 0 || !generic[string(w[4:len(w)-1])] {
					t.Fatalf("answer %q is not an ERROR with a generic message", w)
				}
			}
			if len(rc.writes) > 1 || s.Stats().Active != 0 {
				t.Fatalf("%d answers, %d active for a refused request", len(rc.writes), s.Stats().Active)
			}
			return
		}
		if len(rc.writes) != 0 || len(admitted) != 1 {
			t.Fatalf("an admitted request was also answered (%q), or admitted %d times", rc.writes, len(admitted))
		}
		s.mu.Lock()
		tr := s.pending[admitted[0]]
		s.mu.Unlock()
		if tr == nil || tr.blksize < 512 || tr.blksize > 8192 || tr.window < 1 || tr.window > DefaultMaxWindow {
			t.Fatalf("admitted %+v", tr)
		}
		for _, o := range tr.options {
			n, ok := parseDecimal(o.Value)
			switch {
			case o.Name == "blksize" && ok && n >= 512 && n <= 8192:
			case o.Name == "tsize" && ok && n <= 1:
			case o.Name == "windowsize" && ok && n >= 1 && n <= DefaultMaxWindow:
			default:
				t.Fatalf("granted option %+v", o)
			}
		}
		if c := s.Stats(); c.Active != 1 {
			t.Fatalf("admitted with %d active", c.Active)
		}
		s.finish()
		if c := s.Stats(); c.Active != 0 {
			t.Fatalf("finish left %d active", c.Active)
		}
	})
}

func TestSeedsParse(t *testing.T) {
	for _, name := range []string{"curl", "atftp", "tftp-hpa", "ovmf-first", "ovmf-retry"} {
		b, err := os.ReadFile(filepath.Join("testdata/requests", name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := parseRequest(b)
		if err != nil || r.Op != opRRQ || r.Mode != "octet" {
			t.Errorf("%s: %+v, %v", name, r, err)
		}
		if !bytes.Equal(r.marshal(), b) {
			t.Errorf("%s: marshal %q, want %q", name, r.marshal(), b)
		}
	}
}
