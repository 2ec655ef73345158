package secureboot_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

// TestMain checks that no goroutine outlives the tests; testpeer's one forking goroutine
// (which starts QEMU tied to the test binary) lives as long as the process by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/bettercompute/siteboot/internal/testpeer.forkLoop"))
}

var (
	t0      = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mac     = hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x00, 0x31}
	server  = netip.MustParseAddr("127.0.0.1")
	grant   = strings.Repeat("ab", 16)
	kernel  = strings.Repeat("1", 64)
	initrd  = strings.Repeat("2", 64)
	cache   = "http://127.0.0.1:8080/cache"
	fakeSh  = []byte("MZ fake shim, not signed")
	fakeGr  = []byte("MZ fake grub, not signed")
	keyRE   = regexp.MustCompile(`set siteboot_key='([0-9a-f]{32})'`)
	secrets = []string{"bc.token=", "bc.assertion="}
)

// decider is a Decider that answers what answer says and records what it was asked.
type decider struct {
	mu      sync.Mutex
	queries []ipxe.Query
	answer  func(ctx context.Context, q ipxe.Query) ipxe.Answer
}

func (d *decider) Decide(ctx context.Context, q ipxe.Query) ipxe.Answer {
	d.mu.Lock()
	d.queries = append(d.queries, q)
	f := d.answer
	d.mu.Unlock()
	return f(ctx, q)
}

func (d *decider) asked() []ipxe.Query {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ipxe.Query(nil), d.queries...)
}

func (d *decider) set(f func(ctx context.Context, q ipxe.Query) ipxe.Answer) {
	d.mu.Lock()
	d.answer = f
	d.mu.Unlock()
}

// bootAnswer is the decision of ipxe's handler for a machine with a live entry: the kernel
// and initrd under the machine's grant on the cache's HTTP URL.
func bootAnswer(_ context.Context, q ipxe.Query) ipxe.Answer {
	return ipxe.Answer{
		Kind: ipxe.AnswerBoot, Status: http.StatusOK, Query: q,
		Kernel: cache + "/t/" + grant + "/" + kernel, Initrds: []string{cache + "/t/" + grant + "/" + initrd},
		Params:  []ipxe.Param{{Name: "bc.token", Value: "TOKEN"}, {Name: "bc.assertion", Value: "ASSERTION"}},
		Cmdline: []string{"console=ttyS0"},
	}
}

func hasSecret(body string) bool {
	for _, s := range secrets {
		if strings.Contains(body, s) {
			return true
		}
	}
	return false
}

// harness is a Chain over fake shim and GRUB files, on a fake clock, served by a tftpd on
// loopback whose transfers it binds.
type harness struct {
	clk    *clocktest.Fake
	nonces *bootbind.Nonces
	d      *decider
	chain  *secureboot.Chain
	tftp   *tftpdtest.Server
	shim   string
	grub   string
}

func chainFiles(t testing.TB, shim, grub []byte) (string, string) {
	dir := t.TempDir()
	s, g := filepath.Join(dir, "shimx64.efi.signed"), filepath.Join(dir, "grubnetx64.efi.signed")
	for p, b := range map[string][]byte{s: shim, g: grub} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s, g
}

func newHarness(t testing.TB, shim, grub []byte, tweak ...func(*secureboot.Config)) *harness {
	t.Helper()
	h := &harness{clk: clocktest.New(t0), d: &decider{answer: bootAnswer}}
	h.shim, h.grub = chainFiles(t, shim, grub)
	h.nonces = bootbind.NewNonces(bootbind.Config{Clock: h.clk})
	cfg := secureboot.Config{
		Shim: h.shim, GRUB: h.grub, Server: server, HTTPPort: 8080,
		Nonces: h.nonces, Decider: h.d, CacheURLs: []string{cache},
		Cache: fstest.MapFS{
			"t/" + grant + "/" + kernel: {Data: []byte("the kernel")},
			"t/" + grant + "/" + initrd: {Data: []byte("the initrd")},
		},
		Root:  fstest.MapFS{"ipxe.efi": {Data: []byte("MZ ipxe")}},
		Clock: h.clk,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	c, err := secureboot.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.chain = c
	t.Cleanup(func() { c.Close() })
	return h
}

// serveTFTP serves the chain's FS over tftpd on 127.0.0.1, its transfers reported to the
// chain.
func (h *harness) serveTFTP(t *testing.T) { h.serveFS(t, h.chain.FS()) }

// serveFS serves fsys over tftpd on 127.0.0.1, its transfers reported to the chain.
func (h *harness) serveFS(t *testing.T, fsys fs.FS) {
	t.Helper()
	srv, err := tftpdtest.NewServer(nil, &tftpd.Server{FS: fsys, OnTransfer: h.chain.OnTransfer})
	if err != nil {
		t.Fatal(err)
	}
	h.tftp = srv
	t.Cleanup(srv.Close)
}

// dhcp asks the chain's proxy DHCP answer as EDK2 does on port 4011 (PXE) or 67 (HTTP boot),
// from 127.0.0.1.
func (h *harness) dhcp(t *testing.T, kind proxydhcp.Kind, port proxydhcp.Port) string {
	t.Helper()
	d := h.chain.AnswerDHCP(&proxydhcp.Request{
		MAC: mac, Kind: kind, Arch: hwid.ArchX86_64EFI, HasArch: true, Port: port,
		Source: netip.MustParseAddrPort("127.0.0.1:68"), Server: server,
	})
	if !d.Answer {
		t.Fatalf("no answer: %+v", d)
	}
	return d.BootFile
}

// errTFTPNotFound is a TFTP error 1 from the server.
var errTFTPNotFound = errors.New("tftp: file not found")

// tftpGet reads name from the harness's TFTP server as a client at the address from would:
// RFC 1350 without options, 512-byte blocks, each acknowledged.
func (h *harness) tftpGet(t *testing.T, from, name string) ([]byte, error) {
	t.Helper()
	srv := netip.MustParseAddrPort(h.tftp.Addr)
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(from), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rrq := append([]byte{0, 1}, name...)
	rrq = append(append(rrq, 0), "octet\x00"...)
	if _, err := conn.WriteToUDPAddrPort(rrq, srv); err != nil {
		t.Fatal(err)
	}
	var out []byte
	buf := make([]byte, 4+512)
	for block := uint16(1); ; block++ {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, peer, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nil, err
		}
		switch op := binary.BigEndian.Uint16(buf); {
		case op == 5 && binary.BigEndian.Uint16(buf[2:]) == 1:
			return nil, errTFTPNotFound
		case op == 5:
			return nil, errors.New("tftp error " + string(buf[4:n]))
		case op != 3 || binary.BigEndian.Uint16(buf[2:]) != block:
			return nil, errors.New("tftp: unexpected packet")
		}
		out = append(out, buf[4:n]...)
		if _, err := conn.WriteToUDPAddrPort([]byte{0, 4, byte(block >> 8), byte(block)}, peer); err != nil {
			return nil, err
		}
		if n < 4+512 {
			return out, nil
		}
	}
}

// waitFor polls cond: tftpd reports a transfer after its last acknowledgement, which the
// client sent before it returned.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requireChain skips (or fails under SITEBOOT_REQUIRE_PEERS=1) without Debian's signed
// shim and GRUB.
func requireChain(t *testing.T) (shim, grub []byte) {
	t.Helper()
	var err error
	if shim, err = os.ReadFile(testpeer.File(t, secureboot.DefaultShim, "shim-signed")); err != nil {
		t.Fatal(err)
	}
	if grub, err = os.ReadFile(testpeer.File(t, secureboot.DefaultGRUB, "grub-efi-amd64-signed")); err != nil {
		t.Fatal(err)
	}
	return shim, grub
}

// regexpKey finds the key in the RAM disk's configuration.
var regexpKey = regexp.MustCompile(`&n=([0-9a-f]{32})"`)

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
