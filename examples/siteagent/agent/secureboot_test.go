package agent_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
)

// requireChain skips (or fails under SITEBOOT_REQUIRE_PEERS=1) without Debian's signed
// shim and GRUB, which the agent serves as they are.
func requireChain(t *testing.T) (shim, grub []byte) {
	t.Helper()
	var err error
	if shim, err = os.ReadFile(testpeer.File(t, agent.DefaultShim, "shim-signed")); err != nil {
		t.Fatal(err)
	}
	if grub, err = os.ReadFile(testpeer.File(t, agent.DefaultGRUB, "grub-efi-amd64-signed")); err != nil {
		t.Fatal(err)
	}
	return shim, grub
}

// firmwareDHCP asks the agent's proxy DHCP on port 4011 as EDK2 does (no iPXE user class)
// for mac, PXE or HTTP boot, and returns the answer's boot file ("" without an answer).
func firmwareDHCP(t *testing.T, a *running, mac hwid.MAC, class string, arch iana.Arch) string {
	t.Helper()
	f, err := askPXE(a, mac, class, arch)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const (
	edk2PXE  = "PXEClient:Arch:00007:UNDI:003000"
	edk2HTTP = "HTTPClient:Arch:00016:UNDI:003000"
)

// errTFTPNotFound is a TFTP error 1 from the server.
var errTFTPNotFound = errors.New("tftp: file not found")

// tftpGet reads name from the agent's TFTP server as a client at the address from would:
// RFC 1350 without options, 512-byte blocks, each acknowledged.
func tftpGet(t *testing.T, a *running, from, name string) ([]byte, error) {
	t.Helper()
	server := netip.MustParseAddrPort(a.Addrs()["tftp"])
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(from), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rrq := append([]byte{0, 1}, name...)
	rrq = append(append(rrq, 0), "octet\x00"...)
	if _, err := conn.WriteToUDPAddrPort(rrq, server); err != nil {
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

var keyRE = regexp.MustCompile(`set siteboot_key='([0-9a-f]{32})'`)

// grubConfig fetches the machine's configuration over TFTP from from, asking again while the
// agent answers its short wait (the answer being made).
func grubConfig(t *testing.T, a *running, from, query string) (string, error) {
	t.Helper()
	for range 50 {
		b, err := tftpGet(t, a, from, "boot/grub.cfg?"+query)
		if err != nil || !strings.Contains(string(b), "# siteboot: not ready yet") {
			return string(b), err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the configuration was never ready")
	return "", nil
}

func secureBootConfig(h *harness, t *testing.T) *agent.Config {
	cfg := h.config(t.TempDir())
	cfg.Boot.SecureBoot = true
	return cfg
}

// TestSecureBootPXE (S1 on the signed chain): proxy DHCP names shim under a boot nonce in
// its 4011 answer to the machine's firmware; the first address that fetches under the nonce
// is the machine; its key file gives it a boot key that only that address's transfer
// activates; the machine's configuration, for that key, is /boot/ipxe's answer in GRUB's
// words, with the kernel and initrd over TFTP from the cache under the entry's grant.
// Another address asking the key file, a guessed key, no key, and the key over HTTP or over
// TFTP from another address get no configuration; each is counted.
func TestSecureBootPXE(t *testing.T) {
	shim, grub := requireChain(t)
	h := newHarness(t)
	a, _ := h.start(t, secureBootConfig(h, t), h.plane.Link())
	e := entry(31, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	mac := e.MAC.String()

	file := firmwareDHCP(t, a, e.MAC, edk2PXE, iana.EFI_X86_64)
	nonce, ok := strings.CutSuffix(strings.TrimPrefix(file, "sb/"), "/shimx64.efi")
	if !ok || len(nonce) != 32 {
		t.Fatalf("4011 answer names %q, want sb/NONCE/shimx64.efi", file)
	}
	if b, err := tftpGet(t, a, "127.0.0.1", "sb/0123456789abcdef0123456789abcdef/shimx64.efi"); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("shim under a nonce never handed out: %d bytes, %v", len(b), err)
	}
	// The key file before anyone fetched under the MAC's nonce: nothing to bind a key to.
	if _, err := tftpGet(t, a, "127.0.0.1", "sb/key?mac="+mac); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("key file before shim was fetched: %v", err)
	}
	// tftpd reports a transfer once its last ACK is in, after the client has all of it: the
	// nonce is bound to its fetcher from then on.
	if got, err := tftpGet(t, a, "127.0.0.1", file); err != nil || !bytes.Equal(got, shim) {
		t.Fatalf("%s: %d bytes, %v; want the signed shim as Debian ships it", file, len(got), err)
	}
	waitFor(t, "the nonce bound to its fetcher", func() bool { return a.Stats()["sb_nonce_fetches"] == 1 })
	for name, want := range map[string][]byte{"sb/grubx64.efi": grub, "sb/shimx64.efi": shim} {
		got, err := tftpGet(t, a, "127.0.0.1", name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, %v; want the signed file as Debian ships it", name, len(got), err)
		}
	}

	// Another host asks the machine's key file: it gets a key, which is never activated.
	other, err := tftpGet(t, a, "127.0.0.2", "sb/key?mac="+mac)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other host's key dropped", func() bool { return a.Stats()["sb_keys_dropped"] == 1 })
	// The machine's own.
	b, err := tftpGet(t, a, "127.0.0.1", "sb/key?mac="+mac)
	if err != nil {
		t.Fatal(err)
	}
	k := keyRE.FindStringSubmatch(string(b))
	if k == nil {
		t.Fatalf("key file:\n%s", b)
	}
	key := k[1]
	waitFor(t, "the machine's key activated", func() bool { return a.Stats()["sb_keys_activated"] == 1 })

	issued := a.Stats()["assertions_issued"]
	for _, q := range []string{
		"mac=" + mac,
		"mac=" + mac + "&n=" + keyRE.FindStringSubmatch(string(other))[1],
		"mac=" + mac + "&n=0123456789abcdef0123456789abcdef",
	} {
		if body, err := grubConfig(t, a, "127.0.0.1", q); !errors.Is(err, errTFTPNotFound) || hasSecret(body) {
			t.Errorf("%s: %v\n%s", q, err, body)
		}
	}
	if st, body := getFrom(t, "127.0.0.2", a.HTTPBase()+"/boot/grub.cfg?mac="+mac+"&n="+key, http.MethodGet); st != http.StatusNotFound || hasSecret(body) {
		t.Errorf("the key over HTTP from another address: status %d\n%s", st, body)
	}
	// tftpd tells the agent who asks (tftpd.PeerFS): the key over TFTP from another address.
	if body, err := grubConfig(t, a, "127.0.0.2", "mac="+mac+"&n="+key); !errors.Is(err, errTFTPNotFound) || hasSecret(body) {
		t.Errorf("the key over TFTP from another address: %v\n%s", err, body)
	}
	if st := a.Stats(); st["assertions_issued"] != issued || st["sb_unbound_no-nonce"] != 1 || st["sb_unbound_unknown-nonce"] != 2 || st["sb_unbound_nonce-other-address"] != 2 {
		t.Errorf("refusals: %d assertions; no-nonce %d, unknown %d, other-address %d", st["assertions_issued"]-issued,
			st["sb_unbound_no-nonce"], st["sb_unbound_unknown-nonce"], st["sb_unbound_nonce-other-address"])
	}

	cfg, err := grubConfig(t, a, "127.0.0.1", "mac="+mac+"&n="+key)
	if err != nil {
		t.Fatal(err)
	}
	grant := regexp.MustCompile(`linux '\(tftp,127\.0\.0\.1\)/cache/t/([^/]+)/` + h.kernel + `'`).FindStringSubmatch(cfg)
	if grant == nil || !strings.Contains(cfg, "'bc.token="+h.plane.TokenFor(e.Workflow, e.TokenRef)+"'") ||
		!strings.Contains(cfg, "'bc.assertion=") || !strings.Contains(cfg, "initrd '(tftp,127.0.0.1)/cache/t/"+grant[1]+"/"+h.initrd+"'") {
		t.Fatalf("the machine's configuration:\n%s", cfg)
	}
	for sha, want := range map[string]int{h.kernel: 64 << 10, h.initrd: 128 << 10} {
		b, err := tftpGet(t, a, "127.0.0.1", "cache/t/"+grant[1]+"/"+sha)
		if err != nil || len(b) != want || sum(b) != sha {
			t.Errorf("cache image %s over TFTP: %d bytes, %v", sha[:8], len(b), err)
		}
	}
	if _, err := tftpGet(t, a, "127.0.0.1", "cache/t/nogrant/"+h.kernel); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("cache image without its grant over TFTP: %v", err)
	}
	if st, body := getFrom(t, "127.0.0.1", a.HTTPBase()+"/boot/grub.cfg?mac="+mac+"&n="+key, http.MethodGet); st != http.StatusOK || !hasSecret(body) {
		t.Errorf("the key over HTTP from the machine's address: status %d\n%s", st, body)
	}
	// The iPXE path is as before: no nonce of this answer opens /boot/ipxe.
	if st, _ := getFrom(t, "127.0.0.1", a.HTTPBase()+"/boot/ipxe?mac="+mac+"&n="+nonce, http.MethodGet); st != http.StatusOK {
		t.Errorf("/boot/ipxe with the shim's nonce: status %d", st)
	}
}

// TestSecureBootHTTP: UEFI HTTP boot is named a RAM disk under a nonce; its GET from the
// first address gets a FAT image (read back with mtools) holding shim as the removable-media
// loader, GRUB beside it and a configuration with a fresh boot key for the machine; HEAD
// tells the size and mints nothing; another address fetching the same nonce gets 404; the
// key opens the machine's configuration for the address that fetched the image.
func TestSecureBootHTTP(t *testing.T) {
	shim, grub := requireChain(t)
	mtype := testpeer.LookPath(t, "mtype", "mtools")
	fsck := testpeer.LookPath(t, "fsck.fat", "dosfstools")
	h := newHarness(t)
	a, _ := h.start(t, secureBootConfig(h, t), h.plane.Link())
	e := entry(32, h.clk.Now().Add(2*time.Hour))
	h.prepare(t, a, e)
	url := firmwareDHCP(t, a, e.MAC, edk2HTTP, iana.Arch(16))
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(a.HTTPBase()) + `/sb/[0-9a-f]{32}/boot\.img$`).MatchString(url) {
		t.Fatalf("HTTP boot answer names %q", url)
	}
	st, _ := getFrom(t, "127.0.0.1", url, http.MethodHead)
	if st != http.StatusOK || a.Stats()["sb_keys_issued"] != 0 {
		t.Fatalf("HEAD: status %d, %d keys", st, a.Stats()["sb_keys_issued"])
	}
	st, img := getFrom(t, "127.0.0.1", url, http.MethodGet)
	if st != http.StatusOK {
		t.Fatalf("GET: status %d", st)
	}
	if st, body := getFrom(t, "127.0.0.2", url, http.MethodGet); st != http.StatusNotFound || len(body) > 100 {
		t.Errorf("the RAM disk from another address: status %d, %d bytes", st, len(body))
	}
	path := filepath.Join(t.TempDir(), "boot.img")
	if err := os.WriteFile(path, []byte(img), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(fsck, "-n", path).CombinedOutput(); err != nil {
		t.Errorf("fsck.fat -n: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		out, err := exec.Command(mtype, "-i", path, "::"+name).Output()
		if err != nil {
			t.Fatalf("mtype %s: %v", name, err)
		}
		return out
	}
	if !bytes.Equal(read("EFI/BOOT/BOOTX64.EFI"), shim) || !bytes.Equal(read("EFI/BOOT/grubx64.efi"), grub) {
		t.Error("the image's shim or GRUB differs from the signed files")
	}
	cfg := string(read("grub/grub.cfg"))
	key := regexp.MustCompile(`&n=([0-9a-f]{32})"`).FindStringSubmatch(cfg)
	if key == nil || !strings.Contains(cfg, "net_bootp\n") || !strings.Contains(cfg, "?mac="+e.MAC.String()+"&") {
		t.Fatalf("the image's configuration:\n%s", cfg)
	}
	body, err := grubConfig(t, a, "127.0.0.1", "mac="+e.MAC.String()+"&n="+key[1])
	if err != nil || !hasSecret(body) {
		t.Fatalf("the machine's configuration with the image's key: %v\n%s", err, body)
	}
	if st := a.Stats(); st["sb_images"] != 1 || st["sb_fetch_other_address"] != 1 || st["sb_answers_http"] != 1 {
		t.Errorf("images %d, other address %d, answers %d", st["sb_images"], st["sb_fetch_other_address"], st["sb_answers_http"])
	}
}

// TestSecureBootChainOnFirstUse: an agent that can serve the signed chain, but whose site
// does not boot through it by default, reads shim and GRUB (and builds the RAM disk they go
// into) when a machine first asks, not at start; then it keeps what it read. Built at start,
// the chain held 9.5 MB of a storm's agent that no Secure Boot machine ever asked.
func TestSecureBootChainOnFirstUse(t *testing.T) {
	shim, grub := requireChain(t)
	dir := t.TempDir()
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.Shim, cfg.Boot.GRUB = filepath.Join(dir, "shimx64.efi.signed"), filepath.Join(dir, "grubnetx64.efi.signed")
	for path, b := range map[string][]byte{cfg.Boot.Shim: shim, cfg.Boot.GRUB: grub} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := h.start(t, cfg, h.plane.Link())
	yes := true
	e := entry(38, h.clk.Now().Add(time.Hour))
	e.SecureBoot = &yes
	h.prepare(t, a, e)

	// What the files hold from now on is what the first machine gets.
	later := append(append([]byte{}, shim...), "after the start"...)
	if err := os.WriteFile(cfg.Boot.Shim, later, 0o644); err != nil {
		t.Fatal(err)
	}
	file := firmwareDHCP(t, a, e.MAC, edk2PXE, iana.EFI_X86_64)
	if !strings.HasPrefix(file, "sb/") {
		t.Fatalf("4011 answer names %q, want sb/NONCE/shimx64.efi", file)
	}
	if got, err := tftpGet(t, a, "127.0.0.1", file); err != nil || !bytes.Equal(got, later) {
		t.Fatalf("%s: %d bytes, %v; want the %d bytes the file held when the machine asked", file, len(got), err, len(later))
	}
	if err := os.WriteFile(cfg.Boot.Shim, shim, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := tftpGet(t, a, "127.0.0.1", "sb/shimx64.efi"); err != nil || !bytes.Equal(got, later) {
		t.Errorf("a second fetch: %d bytes, %v; want the %d bytes read for the first", len(got), err, len(later))
	}
	if got, err := tftpGet(t, a, "127.0.0.1", "sb/grubx64.efi"); err != nil || !bytes.Equal(got, grub) {
		t.Errorf("sb/grubx64.efi: %d bytes, %v; want the signed GRUB", len(got), err)
	}
}

// TestSecureBootChoice: the entry's secure_boot overrides the site's default; an agent that
// cannot serve the chain (its files missing) is silent to a machine that asks for it,
// counted, rather than naming the unsigned iPXE.
func TestSecureBootChoice(t *testing.T) {
	requireChain(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.Shim = filepath.Join(t.TempDir(), "missing.efi")
	a, _ := h.start(t, cfg, h.plane.Link())
	yes, no := true, false
	sb, plain := entry(33, h.clk.Now().Add(time.Hour)), entry(34, h.clk.Now().Add(time.Hour))
	sb.SecureBoot = &yes
	h.prepare(t, a, sb, plain)
	if f := firmwareDHCP(t, a, sb.MAC, edk2PXE, iana.EFI_X86_64); f != "" {
		t.Errorf("without the chain's files, a Secure Boot entry was named %q", f)
	}
	if f := firmwareDHCP(t, a, plain.MAC, edk2PXE, iana.EFI_X86_64); f != "ipxe.efi" {
		t.Errorf("plain entry: %q, want ipxe.efi", f)
	}
	if n := a.Stats()["sb_refused_unavailable"]; n != 1 {
		t.Errorf("sb_refused_unavailable = %d", n)
	}

	h2 := newHarness(t)
	a2, _ := h2.start(t, secureBootConfig(h2, t), h2.plane.Link())
	plain.SecureBoot = &no
	bios := entry(35, h2.clk.Now().Add(time.Hour))
	bios.Arch = sitelink.ArchBIOS
	h2.prepare(t, a2, plain, bios)
	if f := firmwareDHCP(t, a2, plain.MAC, edk2PXE, iana.EFI_X86_64); f != "ipxe.efi" {
		t.Errorf("secure_boot = false under the site's default: %q, want ipxe.efi", f)
	}
	if f := firmwareDHCP(t, a2, bios.MAC, "PXEClient:Arch:00000:UNDI:002001", iana.INTEL_X86PC); f != "undionly.kpxe" {
		t.Errorf("a BIOS entry under the site's default: %q, want undionly.kpxe", f)
	}
}

// TestSecureBootEntryRules: an entry may ask for the signed chain only for an x86-64 UEFI
// machine booting the ramdisk; secure_boot survives the entries file.
func TestSecureBootEntryRules(t *testing.T) {
	yes := true
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	bios := entry(36, now.Add(time.Hour))
	bios.Arch, bios.SecureBoot = sitelink.ArchBIOS, &yes
	iso := entry(37, now.Add(time.Hour))
	iso.SecureBoot, iso.SanbootSHA256 = &yes, strings.Repeat("ab", 32)
	for _, e := range []sitelink.ProxyDhcpEntry{bios, iso} {
		if err := e.Validate(); !errors.Is(err, sitelink.ErrBadEntry) {
			t.Errorf("%+v: Validate() = %v, want ErrBadEntry", e, err)
		}
	}
	path := filepath.Join(t.TempDir(), agent.EntriesFileName)
	s, err := sitelink.OpenEntryStore(path, clocktest.New(now))
	if err != nil {
		t.Fatal(err)
	}
	ok := entry(38, now.Add(time.Hour))
	ok.SecureBoot = &yes
	if err := s.Put(ok); err != nil {
		t.Fatal(err)
	}
	again, err := sitelink.OpenEntryStore(path, clocktest.New(now))
	if err != nil {
		t.Fatal(err)
	}
	if e, found := again.Lookup(ok.MAC); !found || e.SecureBoot == nil || !*e.SecureBoot {
		t.Errorf("after reopening: %+v, %v", e, found)
	}
}
