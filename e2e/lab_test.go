package e2e_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

const (
	siteID = "site-e2e"
	// The lease's timings. On a loaded 2-core machine (TCG guests, other builds) heartbeats
	// are late or fail for seconds at a time; the holder's fence ends TTL - 1 s (the fence's
	// margin) after the last heartbeat a renewal answered, so the TTL is the production
	// default (lease.DefaultTTL): fenced by accident only after some 14 heartbeats in a row
	// failed. The session timeout lets five heartbeats go late before the controller counts
	// an agent as gone (which only delays a renewal, never fences the holder). A failover
	// then takes sessionTimeout + leaseTTL after the holder dies, plus at most two ticks and
	// a heartbeat with its answer (see TestE2E_TwoAgentsFailover).
	leaseTTL       = 15 * time.Second
	heartbeat      = time.Second
	controlTimeout = 3 * time.Second // one heartbeat request
	sessionTimeout = 5 * time.Second
	tickInterval   = 500 * time.Millisecond
	// ipxeRoot holds Debian's iPXE builds. Some of its files are symbolic links out of the
	// folder (ipxe.efi -> /boot/ipxe.efi), which the agent's TFTP and /boot/files/ refuse
	// to follow: each lab copies the builds into a TFTP root of its own.
	ipxeRoot = "/usr/lib/ipxe"
	// Ports on the bridge namespace's address for the test's own servers.
	controlPort = 8081
	originPort  = 8082
)

var (
	// binDir holds the agent binary, built once by the first test that needs it.
	binDir    string
	buildOnce sync.Once
	agentBin  string
	buildErr  error
	buildOut  []byte
)

// binDirPrefix names the folder of the agent binary: binDirPrefix + PID + "-" + random.
const binDirPrefix = "siteboot-e2e-"

func TestMain(m *testing.M) {
	removeStaleBinDirs()
	var err error
	if binDir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", binDirPrefix, os.Getpid())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// removeStaleBinDirs deletes the agent binaries of earlier runs whose test binary no longer
// runs (a run killed by its timeout never reaches the RemoveAll above). Their namespaces go
// with testpeer's RemoveStale; their processes died with them.
func removeStaleBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), binDirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		os.RemoveAll(d)
	}
}

// siteagentBinary builds examples/siteagent once.
func siteagentBinary(t *testing.T) string {
	t.Helper()
	gocmd := testpeer.LookPath(t, "go", "golang-go")
	buildOnce.Do(func() {
		agentBin = filepath.Join(binDir, "siteagent")
		cmd := exec.Command(gocmd, "build", "-o", agentBin, "github.com/bettercompute/siteboot/examples/siteagent")
		// The build dies with the test binary too.
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if buildErr = testpeer.StartTied(cmd); buildErr == nil {
			buildErr = cmd.Wait()
		}
		buildOut = out.Bytes()
	})
	if buildErr != nil {
		t.Fatalf("go build siteagent: %v\n%s", buildErr, buildOut)
	}
	return agentBin
}

// requirePeers skips (or fails under SITEBOOT_REQUIRE_PEERS=1) without what every scenario
// needs.
func requirePeers(t *testing.T) {
	t.Helper()
	testpeer.RequireRoot(t)
	testpeer.LookPath(t, "ip", "iproute2")
	testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	testpeer.LookPath(t, "dnsmasq", "dnsmasq")
	testpeer.LookPath(t, "tcpdump", "tcpdump")
	for file, pkg := range map[string]string{
		ipxeRoot + "/undionly.kpxe":         "ipxe",
		ipxeRoot + "/ipxe.efi":              "ipxe",
		"/usr/lib/ipxe/qemu/efi-virtio.rom": "ipxe-qemu",
	} {
		testpeer.File(t, file, pkg)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		testpeer.Unavailable(t, "no /dev/net/tun for the machines' taps")
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// lab is one isolated segment: dnsmasq on host 0 as the site's DHCP server, agents on the
// next hosts, the control plane and the image origin served by the test on the bridge
// namespace's address, a packet capture on the bridge, and the machines on taps.
type lab struct {
	t        *testing.T
	dir      string
	seg      *testpeer.Segment
	plane    *controlplane.Plane
	ca       *sitetlstest.CA // the site's CA, made at start: the control link is mutual TLS
	caFile   string
	keys     assertion.StaticKeys
	verifier *assertion.Verifier
	kernel   string // sha256 of the ramdisk kernel
	initrd   string
	dnsmasq  *testpeer.Process
	tftpRoot string
	capture  string
	tcpdump  *testpeer.Process

	// The second segment, behind a router with dnsmasq as its DHCP relay (addRelay).
	routed        *testpeer.RoutedSegment
	relay         *testpeer.Process
	routedCapture string
	routedTcpdump *testpeer.Process

	// bootExtra are more [boot] keys for the agents startAgent runs (IPv6: ipv6_test.go),
	// as TOML lines; the host's index replaces {i}.
	bootExtra string
	// kernelURL is where the agents pull the ramdisk kernel (sha256 kernel) from; "" means
	// the origin's /images/vmlinuz (secureboot_test.go serves a modified one).
	kernelURL string
	// initrdURL is where the agents pull the ramdisk initrd (sha256 initrd) from; "" means
	// the origin's /images/initrd.cpio (arm64_test.go serves arm64 ones).
	initrdURL string
	// cmdline is the site's kernel command line for the agents startAgent runs; "" means
	// labCmdline.
	cmdline string
	// kernelImage and initrdImage are the bytes of the ramdisk the agents serve, when not
	// testpeer.Ramdisk's (arm64_test.go), for checkNoSecrets.
	kernelImage, initrdImage []byte
	// noProxyDHCP runs the agents without proxy DHCP (boot.proxy_dhcp = false): the site's
	// DHCP server names the files, and /boot/ipxe answers an entry's machine without a boot
	// nonce (fallthrough_test.go).
	noProxyDHCP bool
	// ownBuilds runs the agents without tftp_root: TFTP and /boot/files/ serve siteboot's
	// own iPXE builds (package ipxebin), which have the syslog console (console_test.go).
	ownBuilds bool

	mu       sync.Mutex
	taps     int
	machines []*machine
}

type labAgent struct {
	name string
	host *testpeer.Host
	p    *testpeer.Process
	pub  ed25519.PublicKey
}

// newLab builds a segment with hosts hosts (host 0 runs dnsmasq, with dnsmasqArgs added).
func newLab(t *testing.T, hosts int, dnsmasqArgs ...string) *lab {
	t.Helper()
	l := startLab(t, hosts, "undionly.kpxe", "ipxe.efi")

	// The site's DHCP server: addresses only, and router advertisements so iPXE does not
	// wait for IPv6. It also leases addresses on the second segment, to requests a relay
	// there forwards (addRelay); dnsmasq stays in the foreground (--no-daemon), so it dies
	// with the test binary.
	h := l.seg.Hosts[0]
	h.Run(t, "ip", "-6", "addr", "add", "2001:db8::10/64", "dev", h.Iface, "nodad")
	l.dnsmasq = testpeer.Start(t, testpeer.Cmd{
		Path: "dnsmasq",
		Args: append([]string{
			"--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root", "--group=root",
			"--interface=" + h.Iface, "--bind-interfaces", "--no-ping", "--log-dhcp", "--log-facility=-",
			"--dhcp-range=192.0.2.100,192.0.2.199,255.255.255.0,10m",
			"--dhcp-range=set:routed,198.51.100.100,198.51.100.199,255.255.255.0,10m",
			"--dhcp-option=tag:routed,option:router," + testpeer.RouterIP.String(),
			"--enable-ra", "--dhcp-range=::,constructor:" + h.Iface + ",ra-only",
			"--dhcp-leasefile=" + filepath.Join(l.dir, "dnsmasq.leases"),
			"--pid-file=" + filepath.Join(l.dir, "dnsmasq.pid"),
		}, dnsmasqArgs...),
		Netns: h.Netns, ReadyLog: `DHCP, IP range`,
	})
	return l
}

// startLab is what newLab and newLab6 share: the segment of hosts hosts, the TFTP root with
// the iPXE builds named, the capture on the bridge, the image origin and the control plane
// (mutual TLS), all running until the test ends.
func startLab(t *testing.T, hosts int, builds ...string) *lab {
	t.Helper()
	requirePeers(t)
	kernel, initrd := testpeer.Ramdisk(t)
	siteagentBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	l := &lab{t: t, dir: t.TempDir(), seg: testpeer.NewSegment(t, hosts), kernel: sha256Hex(kernel), initrd: sha256Hex(initrd)}
	l.tftpRoot = filepath.Join(l.dir, "tftp")
	if err := os.MkdirAll(l.tftpRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range builds {
		b, err := os.ReadFile(filepath.Join(ipxeRoot, name)) // follows the link
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l.tftpRoot, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The packet capture first, so it sees everything.
	l.capture = filepath.Join(l.dir, "segment.pcap")
	l.tcpdump = testpeer.Start(t, testpeer.Cmd{
		Path: "tcpdump", Args: []string{"-i", "br0", "-n", "-U", "-Z", "root", "-s", "600", "-w", l.capture},
		Netns: l.seg.Bridge, ReadyLog: "listening on",
	})
	t.Cleanup(l.diagnose)

	// The image origin: where the agents pull the ramdisk into their caches from.
	mux := http.NewServeMux()
	for name, data := range map[string][]byte{"vmlinuz": kernel, "initrd.cpio": initrd} {
		mux.HandleFunc("GET /images/"+name, func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
		})
	}
	l.serve(ctx, originPort, mux)

	// The control plane.
	l.plane = controlplane.New(nil)
	l.plane.TTL = leaseTTL
	l.plane.Interval = tickInterval
	l.plane.SessionTimeout = sessionTimeout
	l.serveControlTLS()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.plane.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	l.keys = assertion.StaticKeys{}
	l.verifier = &assertion.Verifier{Keys: l.keys, Leases: l.plane.LeaseChecker(), Replay: &assertion.MemoryReplayCache{}}
	return l
}

// addRelay makes the lab's second segment: a router (testpeer.RoutedSegment) whose bridge
// br1 holds the routed machines' taps, and dnsmasq on it as a DHCP relay (giaddr
// testpeer.RouterIP) forwarding every DHCP request there both to the site's DHCP server and
// to each of the agents. It also sends router advertisements on br1 so iPXE there does not
// wait for IPv6, and captures br1's packets.
func (l *lab) addRelay(agents ...*labAgent) {
	t := l.t
	t.Helper()
	l.routed = l.seg.AddRouted(t)
	r := l.routed.Router
	r.Run(t, "ip", "-6", "addr", "add", "2001:db8:1::1/64", "dev", "br1", "nodad")
	l.routedCapture = filepath.Join(l.dir, "routed.pcap")
	l.routedTcpdump = testpeer.Start(t, testpeer.Cmd{
		Path: "tcpdump", Args: []string{"-i", "br1", "-n", "-U", "-Z", "root", "-s", "600", "-w", l.routedCapture},
		Netns: r, ReadyLog: "listening on",
	})
	gi := testpeer.RouterIP.String()
	args := []string{
		"--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root", "--group=root",
		"--interface=br1", "--log-dhcp", "--log-facility=-",
		"--dhcp-relay=" + gi + "," + l.seg.Hosts[0].IP.String(),
	}
	for _, a := range agents {
		args = append(args, "--dhcp-relay="+gi+","+a.host.IP.String())
	}
	args = append(args,
		"--enable-ra", "--dhcp-range=::,constructor:br1,ra-only",
		"--dhcp-leasefile="+filepath.Join(l.dir, "relay.leases"),
		"--pid-file="+filepath.Join(l.dir, "relay.pid"))
	l.relay = testpeer.Start(t, testpeer.Cmd{Path: "dnsmasq", Args: args, Netns: r, ReadyLog: `DHCP relay`})
}

// serve runs h on the bridge namespace's address until the test ends.
func (l *lab) serve(ctx context.Context, port int, h http.Handler) {
	var ln net.Listener
	if err := l.seg.Bridge.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(testpeer.BridgeIP, uint16(port)).String())
		return err
	}); err != nil {
		l.t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	l.t.Cleanup(func() { srv.Close() })
}

// serveControlTLS makes the lab's site CA and serves the control plane over mutual TLS
// (DESIGN.md G3) on the bridge namespace's address, with a certificate for that address.
func (l *lab) serveControlTLS() {
	t := l.t
	var err error
	if l.ca, err = sitetlstest.NewCA("e2e site CA", nil); err != nil {
		t.Fatal(err)
	}
	l.caFile = filepath.Join(l.dir, "ca.pem")
	server, err := l.ca.Issue(sitetlstest.Request{Hosts: []string{testpeer.BridgeIP.String()}})
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(l.dir, "control.pem"), filepath.Join(l.dir, "control.key")
	if err := l.ca.WriteFile(l.caFile); err != nil {
		t.Fatal(err)
	}
	if err := server.WriteFiles(cert, key); err != nil {
		t.Fatal(err)
	}
	creds, err := sitetls.Load(sitetls.Config{CertFile: cert, KeyFile: key, CAFile: l.caFile})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := l.seg.Bridge.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(testpeer.BridgeIP, controlPort).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := l.plane.TLSServer(creds)
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
}

func bridgeURL(port int, path string) string {
	return "http://" + netip.AddrPortFrom(testpeer.BridgeIP, uint16(port)).String() + path
}

// startAgent enrolls node and runs the siteagent binary on host i of the segment.
func (l *lab) startAgent(node string, i int) *labAgent {
	t := l.t
	t.Helper()
	h := l.seg.Hosts[i]
	dir := filepath.Join(l.dir, node)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// The agent's key, written here so the verifier knows its public half.
	keyFile := filepath.Join(dir, "node.key")
	key, err := agent.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Its site certificate, for that key, from the lab's CA.
	siteCert := filepath.Join(dir, "site.pem")
	cert, err := l.ca.Issue(sitetlstest.Request{Node: sitetls.Identity{Site: siteID, Node: node}, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.WriteFiles(siteCert, ""); err != nil {
		t.Fatal(err)
	}
	kernelURL, initrdURL := bridgeURL(originPort, "/images/vmlinuz"), bridgeURL(originPort, "/images/initrd.cpio")
	if l.kernelURL != "" {
		kernelURL = l.kernelURL
	}
	if l.initrdURL != "" {
		initrdURL = l.initrdURL
	}
	conf := fmt.Sprintf(`site_id  = %q
node_id  = %q
data_dir = %q
key_file = %q

[log]
format = "text"
level  = "debug"

[boot]
proxy_dhcp = %v
interface  = %q
server_ip  = %q
tftp       = true
%scmdline    = %q
%s
[boot.kernel]
url    = %q
sha256 = %q
format = "kernel"

[boot.initrd]
url    = %q
sha256 = %q
format = "initrd"

[boot.params]
gateway = "https://gateway.e2e.example:443"

[lease]
ttl = %q

[control]
url       = %q
cert      = %q
ca        = %q
heartbeat = %q
timeout   = %q

[metrics]
listen = "127.0.0.1:9464"
`, siteID, node, dir, keyFile, !l.noProxyDHCP, h.Iface, h.IP, l.tftpRootLine(), l.siteCmdline(), strings.ReplaceAll(l.bootExtra, "{i}", strconv.Itoa(i)),
		kernelURL, l.kernel, initrdURL, l.initrd,
		leaseTTL.String(), "https://"+strings.TrimPrefix(bridgeURL(controlPort, ""), "http://"), siteCert, l.caFile,
		heartbeat.String(), controlTimeout.String())
	confFile := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	l.plane.Enroll(siteID, node)
	a := &labAgent{name: node, host: h, pub: key.Public().(ed25519.PublicKey)}
	l.keys[node] = assertion.Agent{PublicKey: a.pub, Site: siteID, Role: assertion.RoleSite}
	a.p = testpeer.Start(t, testpeer.Cmd{
		Path: siteagentBinary(t), Args: []string{"-config", confFile},
		Netns: h.Netns, ReadyLog: "site agent running",
	})
	// On failure, the agent's counters while it still runs (its log follows at its stop).
	t.Cleanup(func() {
		if !t.Failed() || a.p.Exited() {
			return
		}
		var series []string
		for k, v := range a.metrics() {
			if v != 0 {
				series = append(series, fmt.Sprintf("%s %v", k, v))
			}
		}
		slices.Sort(series)
		t.Logf("%s's metrics at the end (non-zero):\n%s", a.name, strings.Join(series, "\n"))
	})
	return a
}

// tftpRootLine is the [boot] key naming the lab's TFTP root, or nothing with l.ownBuilds.
func (l *lab) tftpRootLine() string {
	if l.ownBuilds {
		return ""
	}
	return fmt.Sprintf("tftp_root  = %q\n", l.tftpRoot)
}

// labCmdline is the site's kernel command line. It has no_timer_check: under TCG on a
// loaded host, Linux's check that the timer interrupt arrives through the IO-APIC can fail
// and panic the guest before the ramdisk runs (seen here: setup_IO_APIC), which says
// nothing of the boot path.
const labCmdline = "console=ttyS0 panic=-1 no_timer_check"

// siteCmdline is the site's kernel command line the agents hand out: l.cmdline, else
// labCmdline.
func (l *lab) siteCmdline() string {
	if l.cmdline != "" {
		return l.cmdline
	}
	return labCmdline
}

// nsClient is an HTTP client whose connections are made inside ns.
func nsClient(ns *testpeer.Netns) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
				err = ns.Do(func() error {
					var d net.Dialer
					c, err = d.DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		},
	}
}

// get fetches u from inside ns and returns the status and body (0 when unreachable).
func get(ns *testpeer.Netns, u string) (int, string) {
	resp, err := nsClient(ns).Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// explain runs "siteagent explain MAC" in the agent's namespace (its metrics listener's
// default address, 127.0.0.1:9464) and returns its exit status and output.
func (a *labAgent) explain(t *testing.T, mac hwid.MAC) (int, string) {
	t.Helper()
	out, err := a.host.Netns.Command(siteagentBinary(t), "explain", mac.String()).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("siteagent explain: %v\n%s", err, out)
	return 0, ""
}

// metrics are an agent's Prometheus metrics, by series ("name{labels}" or "name").
type metrics map[string]float64

func (a *labAgent) metrics() metrics {
	st, body := get(a.host.Netns, "http://127.0.0.1:9464/metrics")
	m := metrics{}
	if st != http.StatusOK {
		return m
	}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// sum adds every series of name whose labels contain all of the given label pairs.
func (m metrics) sum(name string, labels ...string) float64 {
	var n float64
	for k, v := range m {
		base, lbl, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, want := range labels {
			if !strings.Contains(lbl, want) {
				ok = false
			}
		}
		if ok {
			n += v
		}
	}
	return n
}

func (a *labAgent) active() bool { return a.metrics().sum("siteboot_lease_active") == 1 }

// waitFor polls cond every 100 ms for up to limit.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prepare gives node a boot entry for m and waits until the agent acknowledged it and
// holds the ramdisk in its cache.
func (l *lab) prepare(node string, m *machine, arch string) {
	l.t.Helper()
	l.prepareEntry(node, m, arch, false)
}

// prepareLocal is prepare for an entry that says "boot from the local disk"
// (localboot_test.go, fallthrough_test.go).
func (l *lab) prepareLocal(node string, m *machine, arch string) {
	l.t.Helper()
	l.prepareEntry(node, m, arch, true)
}

func (l *lab) prepareEntry(node string, m *machine, arch string, local bool) {
	l.t.Helper()
	l.plane.PrepareRamdisk(node, []sitelink.ProxyDhcpEntry{{
		MAC: m.mac, UUID: m.entrySpelling().String(), Arch: arch, Workflow: m.workflow(), TokenRef: m.tokenRef(),
		NotAfter: time.Now().Add(time.Hour), LocalBoot: local,
	}})
	l.waitReady(node)
}

// checkLocalOnly checks that a booted m from its local disk: no kernel started, and a
// counted local answers and no ramdisk script.
func (l *lab) checkLocalOnly(a *labAgent, m *machine) {
	l.t.Helper()
	if !m.kernel.IsZero() {
		l.t.Errorf("%s: a kernel started; want the local disk", m.name)
	}
	mt := a.metrics()
	if local, script := mt.sum("siteboot_boot_answers_total", `answer="local"`), mt.sum("siteboot_boot_answers_total", `answer="script"`); local < 1 || script != 0 {
		l.t.Errorf("answers counted: local %v, ramdisk script %v; want the local answer only", local, script)
	}
}

// waitReady waits until node acknowledged every command and reported its images ready.
func (l *lab) waitReady(node string) {
	l.t.Helper()
	if !waitFor(60*time.Second, func() bool {
		if len(l.plane.Pending(node)) > 0 {
			return false
		}
		ready := 0
		for _, im := range l.plane.Images(node) {
			if (im.SHA256 == l.kernel || im.SHA256 == l.initrd) && im.State == "ready" {
				ready++
			}
		}
		return ready == 2
	}) {
		l.t.Fatalf("%s never acknowledged its entries or readied its images: pending %v, images %+v", node, l.plane.Pending(node), l.plane.Images(node))
	}
}

// agentStartWait bounds how long the only agent of a site takes to hold the lease and be
// active: its first heartbeat answered, or, on a loaded machine, one of the heartbeats that
// follow; twice the lease TTL leaves room for a TTL's worth of failed ones.
const agentStartWait = 2 * leaseTTL

// waitActive waits until a is the site's active boot server.
func (l *lab) waitActive(a *labAgent) {
	l.t.Helper()
	if !waitFor(agentStartWait, a.active) {
		rec, _ := l.plane.LeaseRecord(context.Background(), siteID)
		l.t.Fatalf("%s never became the boot server; lease %v", a.name, rec)
	}
}

// diagnose prints, for a failed test, each machine's serial log, the agents' and dnsmasq's
// logs (testpeer prints those at its own clean-up) and the decoded packet trace.
func (l *lab) diagnose() {
	t := l.t
	if !t.Failed() {
		return
	}
	l.mu.Lock()
	machines := l.machines
	l.mu.Unlock()
	for _, m := range machines {
		m.p.Stop()
		serial, _ := os.ReadFile(m.serial)
		t.Logf("serial log of %s (%s, %s, last 8000 bytes):\n%s", m.name, m.fw, m.mac, tail(serial, 8000))
	}
	l.tcpdump.Stop()
	out, err := exec.Command("tcpdump", "-r", l.capture, "-n", "-v", "-tt",
		"udp or icmp or icmp6 or (tcp and tcp[tcpflags] & (tcp-syn|tcp-rst) != 0)").CombinedOutput()
	if err != nil {
		t.Logf("tcpdump -r %s: %v", l.capture, err)
	}
	t.Logf("packet trace of the segment (UDP, ICMP, TCP SYN and RST; last 30000 bytes):\n%s", tail(out, 30000))
	if l.routedTcpdump != nil {
		l.routedTcpdump.Stop()
		out, err := exec.Command("tcpdump", "-r", l.routedCapture, "-n", "-v", "-tt", "udp port 67 or udp port 68 or udp port 4011").CombinedOutput()
		if err != nil {
			t.Logf("tcpdump -r %s: %v", l.routedCapture, err)
		}
		t.Logf("DHCP on the segment behind the relay (last 20000 bytes):\n%s", tail(out, 20000))
	}
	rec, _ := l.plane.LeaseRecord(context.Background(), siteID)
	t.Logf("lease at the end: %v", rec)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// firstPacket returns the time of the first packet of the capture that matches a tcpdump
// filter expression, and false when none does.
func (l *lab) firstPacket(filter string) (time.Time, bool) {
	l.t.Helper()
	out, err := exec.Command("tcpdump", "-r", l.capture, "-n", "-tt", "-c", "1", filter).Output()
	if err != nil {
		l.t.Fatalf("tcpdump -r %s %q: %v", l.capture, filter, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return time.Time{}, false
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		l.t.Fatalf("tcpdump timestamp %q: %v", f[0], err)
	}
	return time.Unix(0, int64(sec*1e9)), true
}

func timeSince(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }
