package e2e_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/bettercompute/siteboot/internal/testpeer"
)

const (
	siteID = "site-e2e"
	// leaseTTL and heartbeat are short so a failover takes seconds; the session timeout
	// leaves room for a loaded machine's late heartbeat.
	leaseTTL       = 4 * time.Second
	heartbeat      = 500 * time.Millisecond
	sessionTimeout = 2 * time.Second
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

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "siteboot-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// siteagentBinary builds examples/siteagent once.
func siteagentBinary(t *testing.T) string {
	t.Helper()
	gocmd := testpeer.LookPath(t, "go", "golang-go")
	buildOnce.Do(func() {
		agentBin = filepath.Join(binDir, "siteagent")
		cmd := exec.Command(gocmd, "build", "-o", agentBin, "github.com/bettercompute/siteboot/examples/siteagent")
		buildOut, buildErr = cmd.CombinedOutput()
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
		if _, err := os.Stat(file); err != nil {
			testpeer.Unavailable(t, "no %s: install the Debian package %s", file, pkg)
		}
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
	keys     assertion.StaticKeys
	verifier *assertion.Verifier
	kernel   string // sha256 of the ramdisk kernel
	initrd   string
	dnsmasq  *testpeer.Process
	tftpRoot string
	capture  string
	tcpdump  *testpeer.Process

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

// newLab builds a segment with hosts hosts (host 0 runs dnsmasq).
func newLab(t *testing.T, hosts int) *lab {
	t.Helper()
	requirePeers(t)
	kernel, initrd := testpeer.Ramdisk(t)
	siteagentBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	l := &lab{t: t, dir: t.TempDir(), seg: testpeer.NewSegment(t, hosts), kernel: sha256Hex(kernel), initrd: sha256Hex(initrd)}
	br := l.seg.Bridge
	l.tftpRoot = filepath.Join(l.dir, "tftp")
	if err := os.MkdirAll(l.tftpRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"undionly.kpxe", "ipxe.efi"} {
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
		Netns: br, ReadyLog: "listening on",
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
	l.plane.Interval = 250 * time.Millisecond
	l.plane.SessionTimeout = sessionTimeout
	l.serve(ctx, controlPort, l.plane.Handler())
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

	// The site's DHCP server: addresses only, and router advertisements so iPXE does not
	// wait for IPv6.
	h := l.seg.Hosts[0]
	h.Run(t, "ip", "-6", "addr", "add", "2001:db8::10/64", "dev", h.Iface, "nodad")
	l.dnsmasq = testpeer.Start(t, testpeer.Cmd{
		Path: "dnsmasq",
		Args: []string{
			"--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root", "--group=root",
			"--interface=" + h.Iface, "--bind-interfaces", "--no-ping", "--log-dhcp", "--log-facility=-",
			"--dhcp-range=192.0.2.100,192.0.2.199,255.255.255.0,10m",
			"--enable-ra", "--dhcp-range=::,constructor:" + h.Iface + ",ra-only",
			"--dhcp-leasefile=" + filepath.Join(l.dir, "dnsmasq.leases"),
			"--pid-file=" + filepath.Join(l.dir, "dnsmasq.pid"),
		},
		Netns: h.Netns, ReadyLog: `DHCP, IP range`,
	})
	return l
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
	conf := fmt.Sprintf(`site_id  = %q
node_id  = %q
data_dir = %q
key_file = %q

[log]
format = "text"
level  = "debug"

[boot]
proxy_dhcp = true
interface  = %q
server_ip  = %q
tftp       = true
tftp_root  = %q
cmdline    = "console=ttyS0 panic=-1"

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
heartbeat = %q
timeout   = "2s"

[metrics]
listen = "127.0.0.1:9464"
`, siteID, node, dir, keyFile, h.Iface, h.IP, l.tftpRoot,
		bridgeURL(originPort, "/images/vmlinuz"), l.kernel, bridgeURL(originPort, "/images/initrd.cpio"), l.initrd,
		leaseTTL.String(), bridgeURL(controlPort, ""), heartbeat.String())
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
	l.plane.Prepare(node, []agent.Entry{{
		MAC: m.mac, UUID: m.uuid.String(), Arch: arch, Workflow: m.workflow(), TokenRef: m.tokenRef(),
		NotAfter: time.Now().Add(time.Hour),
	}})
	l.waitReady(node)
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

// waitActive waits until a is the site's active boot server.
func (l *lab) waitActive(a *labAgent) {
	l.t.Helper()
	if !waitFor(30*time.Second, a.active) {
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
