package ipxe_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxe"
)

// qemuMachine is a QEMU machine whose NIC ROM is Debian's iPXE (QEMU's default virtio-net
// ROM), on QEMU's user-mode network, which hands out srv's /boot/chain.ipxe as the boot
// file. 10.0.2.2 inside is the host's loopback, so no root is needed.
type qemuMachine struct {
	p      *testpeer.Process
	serial string
	mu     sync.Mutex
	log    []string // "METHOD PATH STATUS" of every request, in order
}

func (m *qemuMachine) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// qemuNonce is the boot nonce the machine's DHCP answer (QEMU's bootfile) names in its chain
// URL, as the reference agent's proxy DHCP does.
const qemuNonce = "qemu-boot-nonce_0123456789abcdef"

// startQEMU serves h on loopback, recording requests, and boots a machine against it.
// after, when set, runs after each request with its path and status.
//
// QEMU's user-mode network NATs the guest: its connections reach the server from the
// host's loopback, not from the 10.0.2.15 iPXE reports. The server here restores the
// guest's address, as a host behind a NAT that knows its clients' addresses would, so the
// handler's rule that the query's IP is the connection's holds as on a real segment.
func startQEMU(t *testing.T, h http.Handler, mac hwid.MAC, uuid hwid.UUID, after func(path string, status int)) *qemuMachine {
	t.Helper()
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	testpeer.File(t, "/usr/lib/ipxe/qemu/efi-virtio.rom", "ipxe-qemu") // QEMU's default virtio-net ROM
	m := &qemuMachine{serial: filepath.Join(t.TempDir(), "serial.log")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && ap.Addr().IsLoopback() {
			r.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr("10.0.2.15"), ap.Port()).String()
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		m.mu.Lock()
		m.log = append(m.log, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status))
		m.mu.Unlock()
		if r.URL.RawQuery != "" {
			t.Logf("%s?%s: %d", r.URL.Path, r.URL.RawQuery, rec.status)
		}
		if after != nil {
			after(r.URL.Path, rec.status)
		}
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	m.p = testpeer.Start(t, testpeer.Cmd{
		Path: qemu,
		Args: []string{
			"-accel", "tcg", "-M", "pc", "-m", "512", "-nodefaults", "-display", "none",
			"-machine", "graphics=off", "-serial", "file:" + m.serial, "-no-reboot",
			"-uuid", uuid.String(),
			"-netdev", "user,id=n0,bootfile=http://10.0.2.2:" + port + ipxe.PathChain + "?n=" + qemuNonce,
			"-device", "virtio-net-pci,netdev=n0,mac=" + mac.String() + ",bootindex=1",
			"-boot", "n",
		},
	})
	t.Cleanup(m.p.Stop)
	return m
}

// wait returns the serial output once done says so, the machine exits (it rebooted: QEMU
// runs with -no-reboot), the firmware runs out of boot devices, or 3 minutes pass.
func (m *qemuMachine) wait(done func(serial []byte) bool) (serial []byte, exited bool) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		serial, _ = os.ReadFile(m.serial)
		if done(serial) || bytes.Contains(serial, []byte("No bootable device")) || time.Now().After(deadline) {
			return serial, false
		}
		select {
		case <-m.p.Done():
			serial, _ = os.ReadFile(m.serial)
			return serial, true
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestQEMU_RealIPXEBootsRamdisk: the real iPXE runs the chain script (its
// ${netX/mac:hexhyp}, ${uuid} and ${netX/ip}), meets a 503 while the discovery token is not
// ready and asks again on its own (Retry-After), runs the boot script, and boots Debian's
// kernel with a busybox initramfs that prints /proc/cmdline: the kernel must see exactly
// the parameters the handler rendered.
func TestQEMU_RealIPXEBootsRamdisk(t *testing.T) {
	kernel, initrd := testpeer.Ramdisk(t)

	mac := hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x00, 0x01}
	uuid, _ := hwid.ParseUUID("4c4c4544-0031-1020-8030-b1c04f504e32")
	host := newFakeHost()
	host.entries = map[hwid.MAC]ipxe.Entry{mac: {MAC: mac, Workflow: "wf_qemu", NotAfter: t0.Add(time.Hour)}}
	host.tokenErr = fmt.Errorf("secret not fetched yet: %w", ipxe.ErrNotReady)
	cfg := host.config()
	cfg.Kernel = "/test/vmlinuz"
	cfg.Initrds = []string{"/test/initrd.cpio"}
	cfg.Cmdline = "console=ttyS0 panic=-1"
	cfg.TokenWait = time.Second
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/boot/", h)
	mux.HandleFunc("/test/vmlinuz", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "vmlinuz", t0, bytes.NewReader(kernel))
	})
	mux.HandleFunc("/test/initrd.cpio", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "initrd.cpio", t0, bytes.NewReader(initrd))
	})
	m := startQEMU(t, mux, mac, uuid, func(path string, status int) {
		if path == ipxe.PathBoot && status == http.StatusServiceUnavailable {
			host.mu.Lock()
			host.tokenErr = nil // ready by the time the machine asks again
			host.mu.Unlock()
		}
	})
	marker := regexp.MustCompile(`SITEBOOT-CMDLINE:(.*):END`)
	got, _ := m.wait(marker.Match)
	m.p.Stop()
	log := m.requests()
	found := marker.FindSubmatch(got)
	if found == nil {
		t.Fatalf("the ramdisk never printed its command line; requests %q\nserial:\n%s", log, tail(got, 3000))
	}

	// The requests, in order: the chain script, a 503 while the token was not ready, the
	// same URL again after Retry-After, then the kernel and initrd the script named.
	var gets []string
	for _, l := range log {
		if !strings.HasPrefix(l, "HEAD") {
			gets = append(gets, l)
		}
	}
	wantPrefix := []string{"GET /boot/chain.ipxe 200", "GET /boot/ipxe 503", "GET /boot/ipxe 200"}
	if len(gets) < 5 || !slices.Equal(gets[:3], wantPrefix) ||
		!slices.Contains(gets[3:], "GET /test/vmlinuz 200") || !slices.Contains(gets[3:], "GET /test/initrd.cpio 200") {
		t.Errorf("requests %q, want %q then the kernel and initrd", log, wantPrefix)
	}

	// What iPXE itself said about the machine reached the assertion.
	host.mu.Lock()
	claims := slices.Clone(host.claims)
	host.mu.Unlock()
	if len(claims) != 1 {
		t.Fatalf("%d assertions signed, want 1", len(claims))
	}
	c := claims[0]
	if c.MAC != mac || c.IP.String() != "10.0.2.15" || !hwid.SameMachine(c.UUID, uuid) {
		t.Errorf("claims MAC %s IP %s UUID %s; want %s 10.0.2.15 a spelling of %s", c.MAC, c.IP, c.UUID, mac, uuid)
	}
	// The boot nonce of the DHCP answer reached the host on every ask, the one iPXE made
	// again on its own after the 503 too.
	host.mu.Lock()
	queries := slices.Clone(host.queries)
	host.mu.Unlock()
	for _, q := range queries {
		if q.Nonce != qemuNonce || q.IP.String() != "10.0.2.15" {
			t.Errorf("the host saw nonce %q, ip %s; want %q, 10.0.2.15", q.Nonce, q.IP, qemuNonce)
		}
	}
	if len(queries) != 2 {
		t.Errorf("the host was asked %d times, want 2 (the 503, then the script)", len(queries))
	}

	// The kernel saw exactly the rendered parameters, word for word.
	words, err := linuxArgs(strings.TrimSpace(string(found[1])))
	if err != nil {
		t.Fatal(err)
	}
	assertion := ""
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, ipxe.ParamAssertion+"="); ok {
			assertion = v
		}
	}
	want := []string{
		"initrd=initrd0", "bc.gateway=https://gw.example.net", "bc.joinkey=jk_1",
		"bc.token=bcjt_01k5w.c2VjcmV0-wf_qemu", "bc.assertion=" + assertion,
		"bc.cache=" + host.cacheURL, "console=ttyS0", "panic=-1",
	}
	if !slices.Equal(words, want) {
		t.Errorf("kernel command line\n got %q\nwant %q", words, want)
	}
	if dc := decodeClaims(t, words); dc.MAC != mac {
		t.Errorf("assertion on the command line is not the one signed: %+v", dc)
	}
	if cnt := h.Stats(); cnt.TokenWaits != 1 || cnt.Scripts != 1 || cnt.Chains != 1 {
		t.Errorf("counters %+v", cnt)
	}
}

// TestQEMU_RealIPXEFencedGivesUp: against a fenced agent the real iPXE's fetch fails (it
// runs no body of a 503), the chain script backs off for its attempts, gives up and exits
// with a failure, on which the firmware (SeaBIOS here, with no other boot device) moves on
// to its next boot device instead of rebooting into the same network boot, which a site
// whose DHCP names the chain URL would repeat for as long as no agent is active
// (tinkerbell/tinkerbell #984 for the exit's status). It must not keep asking the fenced
// agent: the fenced answer carries no Retry-After.
func TestQEMU_RealIPXEFencedGivesUp(t *testing.T) {
	mac := hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x00, 0x02}
	uuid, _ := hwid.ParseUUID("4c4c4544-0031-1020-8030-b1c04f504e33")
	host := newFakeHost()
	host.active = false
	cfg := host.config()
	cfg.Retry = ipxe.Retry{Attempts: 2, Delay: time.Second}
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := startQEMU(t, h, mac, uuid, nil)
	start := time.Now()
	serial, exited := m.wait(func([]byte) bool { return false })
	log := m.requests()
	want := []string{"GET /boot/chain.ipxe 200", "GET /boot/ipxe 503", "GET /boot/ipxe 503"}
	if !slices.Equal(log, want) || !bytes.Contains(serial, []byte("siteboot: giving up after 2 attempts")) {
		t.Errorf("requests %q, want %q, and the give-up on the console\nserial:\n%s", log, want, tail(serial, 2000))
	}
	// QEMU runs with -no-reboot: a reboot would end it before SeaBIOS says it has nothing
	// left to boot.
	if exited || !bytes.Contains(serial, []byte("No bootable device")) {
		t.Errorf("QEMU exited %v (a reboot ends it); want SeaBIOS to move on to its next boot device and find none\nserial:\n%s", exited, tail(serial, 2000))
	}
	t.Logf("power-on to the firmware moving on: %v", time.Since(start).Round(100*time.Millisecond))
	if c := h.Stats(); c.Fenced != 2 || len(host.discovered) != 0 {
		t.Errorf("counters %+v, discovered %d", c, len(host.discovered))
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestQEMU_RealIPXESanboots: an entry with a sanboot digest waits (503, Retry-After) while
// the ISO is not ready, then the real iPXE runs the sanboot script and boots the ISO it
// reads by HTTP ranges. The ISO is Debian's ipxe.iso, which starts iPXE again: its second
// request for chain.ipxe shows the ISO booted.
func TestQEMU_RealIPXESanboots(t *testing.T) {
	isoPath := testpeer.File(t, "/usr/lib/ipxe/ipxe.iso", "ipxe")
	iso, err := os.ReadFile(isoPath)
	if err != nil {
		t.Fatal(err)
	}
	mac := hwid.MAC{0x52, 0x54, 0x00, 0x5b, 0x00, 0x03}
	uuid, _ := hwid.ParseUUID("4c4c4544-0031-1020-8030-b1c04f504e34")
	host := newFakeHost()
	host.entries = map[hwid.MAC]ipxe.Entry{mac: {MAC: mac, Workflow: "wf_iso", SanbootSHA256: isoA}}
	cfg := host.config()
	cfg.SanbootWait = time.Second
	var ranges sync.Map
	cfg.Cache = sanbootCache{host}
	h, err := ipxe.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/boot/", h)
	mux.HandleFunc("/cache/t/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			ranges.Store(r.Header.Get("Range"), true)
		}
		http.ServeContent(w, r, "x.iso", t0, bytes.NewReader(iso))
	})
	var chains int
	var mu sync.Mutex
	m := startQEMU(t, mux, mac, uuid, func(path string, status int) {
		mu.Lock()
		defer mu.Unlock()
		if path == ipxe.PathBoot && status == http.StatusServiceUnavailable {
			host.mu.Lock()
			host.ready[isoA] = true
			host.mu.Unlock()
		}
		if path == ipxe.PathChain {
			chains++
		}
	})
	_, _ = m.wait(func([]byte) bool {
		mu.Lock()
		defer mu.Unlock()
		return chains >= 2
	})
	m.p.Stop()
	log := m.requests()
	n := 0
	ranges.Range(func(any, any) bool { n++; return true })
	wantPrefix := []string{"GET /boot/chain.ipxe 200", "GET /boot/ipxe 503", "GET /boot/ipxe 200"}
	// After the prefix: range reads of the ISO, then (the booted iPXE ISO starting over) the
	// chain script again. QEMU is stopped a moment after that, so more may follow.
	again := slices.Index(log[min(3, len(log)):], "GET /boot/chain.ipxe 200")
	readISO := again > 0 && slices.ContainsFunc(log[3:3+again], func(l string) bool { return strings.HasPrefix(l, "GET /cache/t/") })
	if len(log) < 4 || !slices.Equal(log[:3], wantPrefix) || !readISO || n == 0 {
		t.Errorf("requests %q (%d distinct ranges); want %q, range reads of the ISO, then chain.ipxe again", log, n, wantPrefix)
	}
	if c := h.Stats(); c.SanbootWaits != 1 || c.Sanboots < 1 || c.TokenFetches != 0 {
		t.Errorf("counters %+v", c)
	}
	// The chain script's ${netX/...}, ${platform} and ${buildarch}: the NIC iPXE booted
	// from, and a BIOS build of iPXE, which the host compares with the entry's arch.
	host.mu.Lock()
	queries := slices.Clone(host.queries)
	host.mu.Unlock()
	if len(queries) == 0 || queries[0].MAC != mac || !queries[0].HasArch || queries[0].Arch != hwid.ArchBIOS {
		t.Errorf("queries the host saw: %+v; want the NIC's MAC %v and arch bios", queries, mac)
	}
}

// sanbootCache is the fake host's cache with a relative grant URL, served by the test.
type sanbootCache struct{ *fakeHost }

func (c sanbootCache) SanbootURL(_ context.Context, e ipxe.Entry) (string, error) {
	return "/cache/t/fedcba9876543210fedcba9876543210/" + e.SanbootSHA256, nil
}
