package tftpd_test

import (
	"io/fs"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

// ownFS serves "own" only to owner, and records who asked for what.
type ownFS struct {
	fstest.MapFS
	owner netip.Addr

	mu    sync.Mutex
	asked []netip.AddrPort
}

func (f *ownFS) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	f.mu.Lock()
	f.asked = append(f.asked, peer)
	f.mu.Unlock()
	if name == "own" && peer.Addr() != f.owner {
		return nil, fs.ErrNotExist
	}
	return f.MapFS.Open(name)
}

// TestPeerFS: an FS that is a PeerFS is opened with the read request's source, so a host can
// serve a file only to the address it belongs to: the owner gets it, another address gets
// "file not found"; files that do not depend on the asker are served to both.
func TestPeerFS(t *testing.T) {
	data := payload(700, 9)
	fsys := &ownFS{MapFS: fstest.MapFS{"own": {Data: data}, "shared": {Data: data}}, owner: netip.MustParseAddr("127.0.0.2")}
	addr := serve(t, &tftpd.Server{FS: fsys}, "127.0.0.1")

	owner, other := newRawClient(t, "127.0.0.2"), newRawClient(t, "127.0.0.3")
	owner.send(addr, rrq("own", "octet"))
	first, tid := owner.recvFrom(5*time.Second, 0)
	if got := owner.download(first, tid, 512); string(got) != string(data) {
		t.Fatalf("the owner got %d bytes of own, want %d", len(got), len(data))
	}
	other.send(addr, rrq("own", "octet"))
	if b, _ := other.recvFrom(5*time.Second, 0); opcode(b) != 5 {
		t.Errorf("another address asking own: opcode %d, want an error", opcode(b))
	} else if code, msg := errorOf(t, b); code != 1 {
		t.Errorf("another address asking own: error %d %q, want 1 (file not found)", code, msg)
	}
	other.send(addr, rrq("shared", "octet"))
	first, tid = other.recvFrom(5*time.Second, 0)
	if got := other.download(first, tid, 512); string(got) != string(data) {
		t.Errorf("another address got %d bytes of shared, want %d", len(got), len(data))
	}

	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if len(fsys.asked) != 3 || fsys.asked[0].Addr() != fsys.owner || fsys.asked[0].Port() != uint16(owner.conn.LocalAddr().(*net.UDPAddr).Port) ||
		fsys.asked[1].Addr() != netip.MustParseAddr("127.0.0.3") {
		t.Errorf("OpenFrom was told %v; want the owner's address and port, then the other's twice", fsys.asked)
	}
}
