// Command storm is the boot storm: N simulated machines (internal/simmachine) start within a
// spread of seconds against one boot server and each does what a machine does on a
// provisioning network: proxy DHCP, TFTP of a 1 MiB iPXE build, iPXE's own DHCP, the chain and
// boot scripts over HTTP, kernel and initrd, and then, as the ramdisk would, a 32 MiB deploy
// image streamed from bc.cache with its digest checked. It prints the completion time, each
// stage's p50 and p99 (time from the machine's power-on to the stage's end), the failures,
// and the CPU time and peak memory (VmHWM) of the server processes.
//
// Two targets:
//
//   - agent: the storm runs the control plane in process over HTTP, writes a TOML config and
//     starts the siteagent binary (-agent-bin) as a separate process, optionally inside a
//     network namespace (-agent-netns); with -inproc the agent runs in this process instead,
//     and -cpuprofile writes a pprof CPU profile of the storm.
//   - peer: dnsmasq (proxy DHCP + TFTP) and nginx serve the files this program writes with
//     -gen; -peer-pids names their processes. With DHCP the machines stop at once: dnsmasq
//     2.90 answers the simulated DISCOVER with a broadcast proxy offer that names no boot
//     file and carries no PXE menu (option 43), and internal/simmachine reads only a unicast
//     offer naming the boot file, as siteboot's proxydhcp sends it. So run.sh runs the peer
//     with -no-dhcp: every other stage, against dnsmasq's TFTP and nginx.
//
// bench/storm/run.sh runs both and is the command to quote.
package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"log"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
	"github.com/bettercompute/siteboot/examples/siteagent/controlplane"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/simmachine"
	"github.com/bettercompute/siteboot/sitelink"
)

const (
	siteID   = "site-storm"
	nodeID   = "agent-storm"
	buildMiB = 1
)

// file is one generated file: the same bytes on every run (seeded), so that the peer's copy
// written by -gen and the digests the storm checks agree.
type file struct {
	name string
	size int
	data []byte
	sha  string
	crc  uint32 // CRC-32C (Castagnoli)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcHex is the file's CRC-32C as simmachine's Fetched.Sum gives it.
func (f file) crcHex() string { return fmt.Sprintf("%08x", f.crc) }

func genFile(name string, size int, seed uint64) file {
	r := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 's', 't', 'o', 'r', 'm'})
	b := make([]byte, size)
	r.Read(b)
	s := sha256.Sum256(b)
	return file{name: name, size: size, data: b, sha: hex.EncodeToString(s[:]), crc: crc32.Checksum(b, castagnoli)}
}

type files struct{ build, kernel, initrd, deploy file }

func newFiles(deployMiB int) files {
	return files{
		build:  genFile("ipxe.efi", buildMiB<<20, 1),
		kernel: genFile("vmlinuz", 1<<20, 2),
		initrd: genFile("initrd.img", 1<<20, 3),
		deploy: genFile("deploy.raw", deployMiB<<20, 4),
	}
}

func main() { os.Exit(run()) }

// run is the program; it returns the exit status, after its deferred clean-up has run.
func run() int {
	var (
		target     = flag.String("target", "agent", "agent or peer")
		n          = flag.Int("n", 1000, "machines")
		spread     = flag.Duration("spread", 10*time.Second, "all machines power on within this time")
		limit      = flag.Duration("timeout", 5*time.Minute, "the whole storm ends after this")
		deployMiB  = flag.Int("deploy-mib", 32, "size of the deploy image")
		server     = flag.String("server", "127.0.0.2", "the boot server's address: DHCP goes to it, offers name it, HTTP is on it")
		dhcpPort   = flag.Int("dhcp-port", 67, "the proxy DHCP port")
		tftpAddr   = flag.String("tftp", "127.0.0.1:6969", "where TFTP requests go")
		httpPort   = flag.Int("http-port", 8080, "the boot server's HTTP port")
		clients    = flag.String("clients", "127.1.0.1", "first machine address")
		clientIPs  = flag.Int("client-ips", 0, "distinct machine addresses (0: one per machine); machines beyond share them on further source ports")
		clientPort = flag.Int("client-port", 68, "the machines' DHCP port (the first, when they share addresses)")
		agentBin   = flag.String("agent-bin", "", "target agent: the siteagent binary")
		agentNetns = flag.String("agent-netns", "", "target agent: run it inside this network namespace (ip netns exec)")
		planeAddr  = flag.String("plane", "127.0.0.1:0", "target agent: where the control plane and the image origin listen")
		inproc     = flag.Bool("inproc", false, "target agent: run the agent in this process")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the storm (with -inproc: the agent's)")
		memprofile = flag.String("memprofile", "", "write a heap profile of this process (with -inproc: the agent's) -memprofile-at into the storm")
		memAt      = flag.Duration("memprofile-at", 8*time.Second, "when -memprofile is taken, from the first power-on")
		work       = flag.String("work", "", "working directory (default a temporary one)")
		gen        = flag.String("gen", "", "write the peer's files (tftp/, www/) under this directory and exit")
		peerPIDs   = flag.String("peer-pids", "", "target peer: comma-separated PIDs of the server processes (their children count too)")
		verbose    = flag.Bool("v", false, "log the agent at info level and machine events")
		noDHCP     = flag.Bool("no-dhcp", false, "skip DHCP: each machine is told the boot file and chain URL a proxy offer would name")
		tftpMax    = flag.Int("tftp-max-transfers", 0, "target agent: boot.tftp_max_transfers (0: the agent's default, 64)")
		timeline   = flag.String("timeline", "", "target agent: boot.timeline, on or off (empty: the key is not written, the agent's default)")
	)
	flag.Parse()
	log.SetFlags(0)
	fs := newFiles(*deployMiB)
	srv := netip.MustParseAddr(*server)
	httpBase := "http://" + netip.AddrPortFrom(srv, uint16(*httpPort)).String()

	if *gen != "" {
		if err := writePeerFiles(*gen, fs, httpBase); err != nil {
			log.Fatal(err)
		}
		return 0
	}
	dir := *work
	if dir == "" {
		d, err := os.MkdirTemp("", "storm-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	sigctx, sigstop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer sigstop()
	ctx, cancel := context.WithTimeout(sigctx, *limit+2*time.Minute)
	defer cancel()

	var pids []int
	switch *target {
	case "agent":
		stop, pid, err := startAgent(ctx, agentSetup{
			dir: dir, files: fs, n: *n, server: srv, dhcpPort: *dhcpPort, tftp: *tftpAddr, httpPort: *httpPort,
			httpBase: httpBase, bin: *agentBin, netns: *agentNetns, planeAddr: *planeAddr, inproc: *inproc,
			clientPort: *clientPort, verbose: *verbose, tftpMax: *tftpMax, timeline: *timeline,
		})
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		if pid != 0 {
			pids = []int{pid}
		}
	case "peer":
		for _, s := range strings.Split(*peerPIDs, ",") {
			if s == "" {
				continue
			}
			p, err := strconv.Atoi(s)
			if err != nil {
				log.Fatalf("-peer-pids: %v", err)
			}
			pids = append(pids, p)
		}
	default:
		log.Fatalf("-target: agent or peer, not %q", *target)
	}

	first := netip.MustParseAddr(*clients)
	k := *clientIPs
	if k <= 0 || k > *n {
		k = *n
	}
	st := &storm{
		files: fs, dhcp: netip.AddrPortFrom(srv, uint16(*dhcpPort)), tftp: netip.MustParseAddrPort(*tftpAddr),
		first: first, ips: k, clientPort: *clientPort, verbose: *verbose, isAgent: *target == "agent",
	}
	if *noDHCP {
		chain := httpBase + "/boot/chain.ipxe"
		st.offer = func(ipxe bool) (netip.Addr, string) {
			if ipxe {
				return srv, chain
			}
			return srv, fs.build.name
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Print(err)
			return 1
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *memprofile != "" {
		t := time.AfterFunc(*memAt, func() {
			f, err := os.Create(*memprofile)
			if err != nil {
				log.Print(err)
				return
			}
			defer f.Close()
			runtime.GC() // the profile's in-use figures are as of the last GC
			pprof.WriteHeapProfile(f)
		})
		defer t.Stop()
	}
	procs := expand(pids)
	before, selfBefore := cpuOf(procs), cpuOf([]int{os.Getpid()})
	beforeEach := map[int]float64{}
	for _, p := range procs {
		beforeEach[p] = cpuOf([]int{p})
	}
	sctx, scancel := context.WithTimeout(ctx, *limit)
	defer scancel()
	t0 := time.Now()
	outs := st.run(sctx, *n, *spread)
	elapsed := time.Since(t0)
	after := cpuOf(expand(pids)) // nginx workers and dnsmasq's TFTP children may come and go
	self := cpuOf([]int{os.Getpid()}) - selfBefore
	report(os.Stdout, *target, *n, *spread, fs, outs, elapsed, after-before, procs, pids)
	for _, p := range procs {
		fmt.Printf("  pid %d (%s): CPU %.2f s, peak RSS %.1f MiB; at the end %s\n", p, procField(p, "Name:"), cpuOf([]int{p})-beforeEach[p], peakRSS([]int{p}), rssNow(p))
	}
	if agentStats != nil {
		var keys []string
		st := agentStats()
		for k := range st {
			if strings.HasPrefix(k, "tftp_") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		fmt.Print("agent      ")
		for _, k := range keys {
			fmt.Printf(" %s %d", k, st[k])
		}
		fmt.Println()
	}
	if *noDHCP {
		fmt.Println("(no DHCP: -no-dhcp told each machine its boot file and chain URL; the dhcp and ipxe stages took no time)")
	}
	what := "the simulated machines"
	switch {
	case *inproc:
		what += ", the control plane, the image origin and the agent"
	case *target == "agent":
		what += ", the control plane and the image origin"
	}
	fmt.Printf("storm       CPU %.2f s in this process (%s)\n", self, what)
	for _, o := range outs {
		if o.err != nil {
			return 1
		}
	}
	return 0
}

// metricsPort is the agent's /metrics port, at the boot server's address.
const metricsPort = 9464

// scrapeTFTP reads the agent's TFTP counters from its /metrics, each keyed by its metric's
// name and label value: siteboot_tftp_transfers_total{outcome="ok"} is tftp_transfers_ok
// (the in-process agent's Stats name some of them otherwise: tftp_completed). None when
// the scrape fails.
func scrapeTFTP(url string) map[string]uint64 {
	out := map[string]uint64{}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "siteboot_tftp_")
		if !ok {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			continue
		}
		// name{label="x"} becomes name_x.
		base, labels, _ := strings.Cut(name, "{")
		name = strings.TrimSuffix(base, "_total")
		if _, l, ok := strings.Cut(strings.TrimSuffix(labels, "}"), "="); ok {
			name += "_" + strings.Trim(l, `"`)
		}
		out["tftp_"+name] = uint64(v)
	}
	return out
}

// agentStats is the agent's counters (its Stats in process, its /metrics otherwise; nil
// for the peer): the storm prints its TFTP ones, which say why a machine's TFTP read had no
// answer.
var agentStats func() map[string]uint64

// writePeerFiles writes what dnsmasq and nginx serve: the iPXE build in tftp/, and in www/
// the chain script, the boot script (static: no assertion, no token), the kernel, initrd and
// the deploy image at /cache/SHA256 (so bc.cache + digest is its URL, as with the agent).
func writePeerFiles(dir string, fs files, httpBase string) error {
	put := func(rel string, b []byte) error {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	}
	chain := "#!ipxe\nchain " + httpBase + "/boot/ipxe?mac=${net0/mac:uristring}\n"
	script := "#!ipxe\nkernel " + httpBase + "/images/" + fs.kernel.name + " bc.cache=" + httpBase + "/cache/ console=ttyS0,115200n8 quiet\n" +
		"initrd " + httpBase + "/images/" + fs.initrd.name + "\nboot\n"
	for rel, b := range map[string][]byte{
		"tftp/" + fs.build.name:        fs.build.data,
		"www/boot/chain.ipxe":          []byte(chain),
		"www/boot/ipxe":                []byte(script),
		"www/images/" + fs.kernel.name: fs.kernel.data,
		"www/images/" + fs.initrd.name: fs.initrd.data,
		"www/cache/" + fs.deploy.sha:   fs.deploy.data,
	} {
		if err := put(rel, b); err != nil {
			return err
		}
	}
	return nil
}

type agentSetup struct {
	dir             string
	files           files
	n               int
	server          netip.Addr
	dhcpPort        int
	tftp            string
	httpPort        int
	httpBase        string
	bin, netns      string
	planeAddr       string
	inproc, verbose bool
	clientPort      int
	tftpMax         int    // boot.tftp_max_transfers
	timeline        string // boot.timeline: "on", "off" or "" (not written)
}

func machineMAC(i int) hwid.MAC { return hwid.MAC{0x52, 0x54, 0x00, 0x5c, byte(i >> 8), byte(i)} }
func machineUUID(i int) hwid.UUID {
	u := hwid.UUID{0x4c, 0x4c, 0x45, 0x44, 0x00, 0x53, 0x10, 0x35, 0x80, 0x54}
	u[14], u[15] = byte(i>>8), byte(i)
	return u
}

// startAgent runs the control plane and the image origin here, and the agent as a process
// (or in process), and waits until the agent holds the lease, has every entry and has pulled
// and verified the kernel, initrd and deploy image. It returns how to stop it and its PID.
func startAgent(ctx context.Context, s agentSetup) (func(), int, error) {
	logger := slog.New(slog.DiscardHandler)
	if s.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fail := func(err error) (func(), int, error) { stop(); return nil, 0, err }

	ln, err := net.Listen("tcp", s.planeAddr)
	if err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	for _, f := range []file{s.files.kernel, s.files.initrd, s.files.deploy} {
		data := f.data
		mux.HandleFunc("GET /images/"+f.name, func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(data)))
		})
	}
	plane := controlplane.New(logger.With("part", "control-plane"))
	plane.TTL = 15 * time.Second
	plane.Interval = time.Second
	plane.SessionTimeout = 10 * time.Second
	mux.Handle("/", plane.InsecureHandler()) // the agent runs with control.insecure (plain http on loopback)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	stops = append(stops, func() { hs.Close() })
	base := "http://" + ln.Addr().String()
	pctx, pcancel := context.WithCancel(ctx)
	go plane.Run(pctx)
	stops = append(stops, pcancel)

	plane.Enroll(siteID, nodeID)
	plane.SetImages(siteID, []sitelink.CacheImage{{URL: base + "/images/" + s.files.deploy.name, SHA256: s.files.deploy.sha, Format: "raw"}})
	entries := make([]sitelink.ProxyDhcpEntry, 0, s.n+1)
	for i := 0; i <= s.n; i++ { // 0 is the readiness probe, never a storm machine
		entries = append(entries, sitelink.ProxyDhcpEntry{
			MAC: machineMAC(i), UUID: machineUUID(i).String(), Arch: sitelink.ArchX86UEFI,
			Workflow: fmt.Sprintf("wf-%04d", i), NotAfter: time.Now().Add(2 * time.Hour), TokenRef: fmt.Sprintf("tok-%04d", i),
		})
	}
	plane.PrepareRamdisk(nodeID, entries)

	tftpRoot := filepath.Join(s.dir, "tftp")
	if err := os.MkdirAll(tftpRoot, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(tftpRoot, s.files.build.name), s.files.build.data, 0o644); err != nil {
		return fail(err)
	}
	dataDir := filepath.Join(s.dir, "agent")
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fail(err)
	}
	srvIP := s.server.String()
	var timelineKey string
	switch s.timeline {
	case "":
	case "on", "off":
		// The agent's switch for its boot events and timeline (every component's Events).
		timelineKey = fmt.Sprintf("timeline = %v\n", s.timeline == "on")
	default:
		return fail(fmt.Errorf("-timeline: on or off, not %q", s.timeline))
	}
	cfgText := fmt.Sprintf(`site_id = %q
node_id = %q
data_dir = %q

[log]
format = "text"
level = %q

[boot]
proxy_dhcp = true
dhcp_listen = %q
pxe_listen = %q
server_ip = %q
tftp = true
tftp_listen = %q
tftp_root = %q
tftp_max_transfers = %d
http_listen = %q
http_base = %q
%scmdline = "console=ttyS0,115200n8 quiet"
cache_url = %q
# The image origin runs in this process, on the namespace's loopback.
allowed_source_networks = ["127.0.0.0/8"]

[boot.kernel]
url = %q
sha256 = %q
format = "kernel"

[boot.initrd]
url = %q
sha256 = %q
format = "initrd"

[lease]
ttl = "15s"

[control]
url = %q
# The control plane runs in this process over plain HTTP on the namespace's loopback.
insecure = true
heartbeat = "2s"
timeout = "10s"

[metrics]
listen = %q
`, siteID, nodeID, dataDir, map[bool]string{true: "info", false: "warn"}[s.verbose],
		netip.AddrPortFrom(s.server, uint16(s.dhcpPort)).String(), srvIP+":4011", srvIP, s.tftp, tftpRoot, s.tftpMax,
		netip.AddrPortFrom(s.server, uint16(s.httpPort)).String(), s.httpBase, timelineKey, s.httpBase+"/cache",
		base+"/images/"+s.files.kernel.name, s.files.kernel.sha, base+"/images/"+s.files.initrd.name, s.files.initrd.sha, base,
		netip.AddrPortFrom(s.server, metricsPort).String())
	cfgPath := filepath.Join(s.dir, "agent.toml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		return fail(err)
	}

	pid := 0
	if s.inproc {
		f, err := configfile.Load(cfgPath)
		if err != nil {
			return fail(err)
		}
		cfg := &f.Agent
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		actx, acancel := context.WithCancel(ctx)
		a, err := agent.New(actx, cfg, &sitelink.Client{Base: base}, agent.Options{
			Logger: logger.With("part", "agent"), Signer: key, DHCPClientPort: s.clientPort,
		})
		if err != nil {
			acancel()
			return fail(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(actx) }()
		stops = append(stops, func() { acancel(); <-done })
		agentStats = a.Stats
	} else {
		if s.clientPort != 68 {
			return fail(errors.New("the siteagent binary answers port 68: -client-port 68, or -inproc"))
		}
		name, args := s.bin, []string{"-config", cfgPath}
		if s.netns != "" {
			name, args = "ip", append([]string{"netns", "exec", s.netns, s.bin}, args...)
		}
		cmd := exec.Command(name, args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		pid = cmd.Process.Pid // ip netns exec execs the agent: the same PID
		metricsURL := "http://" + netip.AddrPortFrom(s.server, metricsPort).String() + "/metrics"
		agentStats = func() map[string]uint64 { return scrapeTFTP(metricsURL) }
		stops = append(stops, func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}

	// Ready: every image verified in the cache, and the probe machine (MAC 0, never a storm
	// machine) boots to its script: the agent serves a script only to a MAC it answered by
	// proxy DHCP, under the boot nonce of that answer, so the probe goes through DHCP as the
	// machines do (lease held, entries applied).
	probe := func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		scripted := false
		ip := netip.MustParseAddr("127.0.99.1")
		// From its own address, as the machines: the agent takes a script's IP from the
		// connection.
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip.AsSlice()}, Timeout: 5 * time.Second}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
		defer hc.CloseIdleConnections()
		m := &simmachine.Machine{
			Name: "probe", MAC: machineMAC(0), UUID: machineUUID(0), IP: ip, HTTP: hc,
			ClientPort: s.clientPort, DHCPServers: []netip.AddrPort{netip.AddrPortFrom(s.server, uint16(s.dhcpPort))},
			TFTPAddr:    func(netip.Addr) netip.AddrPort { return netip.MustParseAddrPort(s.tftp) },
			DHCPTimeout: time.Second, DHCPAttempts: 1, MaxReboots: 1,
			OnStage: func(_ *simmachine.Machine, st simmachine.Stage, _ string) {
				if st == simmachine.StageScript {
					scripted = true
				}
			},
		}
		_, err := m.Boot(pctx)
		if scripted {
			return nil
		}
		if err == nil {
			err = errors.New("booted without a script stage")
		}
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ready := 0
		for _, im := range plane.Images(nodeID) {
			if im.State == "ready" {
				ready++
			}
		}
		var perr error
		if ready >= 3 {
			if perr = probe(); perr == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("agent not ready within 60 s: images %+v, probe %v", plane.Images(nodeID), perr))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return stop, pid, nil
}

// storm is one run of machines against one server.
type storm struct {
	files      files
	dhcp       netip.AddrPort
	tftp       netip.AddrPort
	first      netip.Addr
	ips        int
	clientPort int
	verbose    bool
	isAgent    bool
	offer      func(ipxe bool) (netip.Addr, string) // -no-dhcp

	done, failed atomic.Int64
}

// outcome is one machine's boot.
type outcome struct {
	i      int
	stages map[string]time.Duration
	err    error
	events []string // what the machine saw (retries, aborts: a few), printed when it failed
}

// stageNames are the stages reported, in order: simmachine's, and the deploy image.
var stageNames = []string{"dhcp", "tftp", "ipxe", "chain", "script", "kernel", "deploy"}

func (st *storm) run(ctx context.Context, n int, spread time.Duration) []outcome {
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		for {
			select {
			case <-finished:
				return
			case <-tick.C:
				log.Printf("storm: +%.0fs %d of %d done, %d failed", time.Since(t0).Seconds(), st.done.Load(), n, st.failed.Load())
			}
		}
	}()
	for i := 1; i <= n; i++ {
		// Power-on times spread evenly over the spread.
		at := t0.Add(spread * time.Duration(i-1) / time.Duration(n))
		wg.Go(func() {
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			outs[i-1] = st.machine(ctx, i)
			st.done.Add(1)
			if outs[i-1].err != nil {
				st.failed.Add(1)
			}
		})
	}
	wg.Wait()
	return outs
}

func addAddr(a netip.Addr, k int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(k)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (st *storm) machine(ctx context.Context, i int) outcome {
	o := outcome{i: i, stages: map[string]time.Duration{}}
	ip := addAddr(st.first, (i-1)%st.ips)
	port := st.clientPort + (i-1)/st.ips
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip.AsSlice()}, Timeout: 10 * time.Second}
	hc := &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 2}}
	defer hc.CloseIdleConnections()
	m := &simmachine.Machine{
		Name: fmt.Sprintf("m%04d", i), MAC: machineMAC(i), UUID: machineUUID(i), IP: ip, ClientPort: port,
		DHCPServers: []netip.AddrPort{st.dhcp},
		TFTPAddr:    func(netip.Addr) netip.AddrPort { return st.tftp },
		HTTP:        hc, DHCPTimeout: time.Second, DHCPAttempts: 4,
		// As EDK2's PXE: a TFTP server that drops requests beyond its transfer limit counts on
		// the firmware asking again (PXEBC_MTFTP_TIMEOUT 4 s, PXEBC_MTFTP_RETRIES 6); the reads
		// ask what OVMF asks (simmachine's defaults: tsize, blksize 1468, windowsize 4).
		TFTPTimeout: simmachine.EDK2TFTPTimeout, TFTPRetries: simmachine.EDK2TFTPRetries,
		Offer: st.offer,
		// CRC-32C of every file, not SHA-256: the thousand machines share the host's two
		// cores with the servers measured (the sums are as strict for the purpose).
		Digest: func() hash.Hash { return crc32.New(castagnoli) },
	}
	start := time.Now()
	// Boot runs on this goroutine and reports its events from it.
	m.OnEvent = func(m *simmachine.Machine, msg string) {
		if st.verbose {
			log.Printf("%s: %s", m.Name, msg)
		}
		o.events = append(o.events, fmt.Sprintf("+%.3fs %s", time.Since(start).Seconds(), msg))
	}
	res, err := m.Boot(ctx)
	if res != nil {
		for s, d := range res.Stages {
			o.stages[string(s)] = d
		}
	}
	if err != nil {
		o.err = err
		return o
	}
	switch {
	case res.Build.Sum != st.files.build.crcHex() || res.Build.Bytes != int64(st.files.build.size):
		o.err = errors.New("iPXE build digest mismatch")
	case res.Kernel.Sum != st.files.kernel.crcHex() || res.Kernel.Bytes != int64(st.files.kernel.size):
		o.err = errors.New("kernel digest mismatch")
	case len(res.Initrds) != 1 || res.Initrds[0].Sum != st.files.initrd.crcHex() || res.Initrds[0].Bytes != int64(st.files.initrd.size):
		o.err = errors.New("initrd digest mismatch")
	case res.Param("bc.cache") == "":
		o.err = errors.New("no bc.cache in the script")
	case st.isAgent && res.Param("bc.assertion") == "":
		o.err = errors.New("no bc.assertion in the script")
	}
	if o.err != nil {
		return o
	}
	// The ramdisk: stream the deploy image from bc.cache and check its digest.
	if o.err = fetchDeploy(ctx, hc, res.Param("bc.cache")+st.files.deploy.sha, st.files.deploy); o.err == nil {
		o.stages["deploy"] = time.Since(start)
	}
	return o
}

func fetchDeploy(ctx context.Context, hc *http.Client, u string, want file) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("deploy image: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("deploy image: HTTP %d", resp.StatusCode)
	}
	// Length and CRC-32C against the known image: as strict for a benchmark's purpose and
	// far cheaper for the storm's own CPU than SHA-256 or a byte compare (the agent verified
	// the image's SHA-256 when it pulled it).
	h := crc32.New(castagnoli)
	n, err := io.CopyBuffer(h, resp.Body, make([]byte, 256<<10))
	if err != nil {
		return fmt.Errorf("deploy image: %w", err)
	}
	if n != int64(len(want.data)) || h.Sum32() != want.crc {
		return fmt.Errorf("deploy image: %d bytes, CRC-32C %08x; want %d bytes, %08x", n, h.Sum32(), len(want.data), want.crc)
	}
	return nil
}

// expand adds the children (and theirs) of each PID, read from /proc/PID/task/*/children.
func expand(pids []int) []int {
	var out []int
	seen := map[int]bool{}
	var walk func(p int)
	walk = func(p int) {
		if seen[p] {
			return
		}
		seen[p] = true
		out = append(out, p)
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					walk(c)
				}
			}
		}
	}
	for _, p := range pids {
		walk(p)
	}
	return out
}

// cpuOf sums utime+stime of the processes (and their reaped children), in seconds.
func cpuOf(pids []int) float64 {
	var ticks float64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// Fields from 3 on: utime is 14, stime 15, cutime 16, cstime 17.
		for _, k := range []int{14, 15, 16, 17} {
			v, _ := strconv.ParseFloat(f[k-3], 64)
			ticks += v
		}
	}
	return ticks / 100 // USER_HZ
}

// peakRSS sums VmHWM over the processes, in MiB.
func peakRSS(pids []int) float64 {
	var kb float64
	for _, p := range pids {
		x, _ := strconv.ParseFloat(strings.TrimSuffix(procField(p, "VmHWM:"), " kB"), 64) // 0 when gone
		kb += x
	}
	return kb / 1024
}

// procField is a field of /proc/PID/status, trimmed.
func procField(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// rssNow says what the resident memory of pid is made of now: anonymous (heap, stacks),
// file-backed (the binary's pages and mapped files) and shared memory.
func rssNow(pid int) string {
	return fmt.Sprintf("RssAnon %s, RssFile %s, RssShmem %s, %s threads", procField(pid, "RssAnon:"), procField(pid, "RssFile:"), procField(pid, "RssShmem:"), procField(pid, "Threads:"))
}

var addrRE = regexp.MustCompile(`[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(:[0-9]+)?`)

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	k := int(p*float64(len(ds))+0.5) - 1
	return ds[max(0, min(k, len(ds)-1))]
}

func report(w io.Writer, target string, n int, spread time.Duration, fs files, outs []outcome, elapsed time.Duration, cpu float64, procs, pids []int) {
	failed := 0
	reasons := map[string]int{}
	for _, o := range outs {
		if o.err != nil {
			failed++
			reasons[addrRE.ReplaceAllString(o.err.Error(), "ADDR")]++
		}
	}
	fmt.Fprintf(w, "storm %s: %d machines powered on within %v; each: DHCP, TFTP %d MiB, iPXE DHCP, chain, script, kernel+initrd 2 MiB, deploy %d MiB\n",
		target, n, spread, buildMiB, fs.deploy.size>>20)
	fmt.Fprintf(w, "completion  %.1f s (first power-on to last machine done)\n", elapsed.Seconds())
	fmt.Fprintf(w, "failures    %d\n", failed)
	for r, c := range reasons {
		fmt.Fprintf(w, "  %4d  %s\n", c, r)
	}
	shown := 0
	for _, o := range outs {
		if o.err == nil || shown == 3 {
			continue
		}
		shown++
		fmt.Fprintf(w, "  machine %d (from power-on): %s\n", o.i, strings.Join(append(o.events, "failed: "+o.err.Error()), "; "))
	}
	fmt.Fprintf(w, "%-8s %9s %9s   (time from power-on to the stage's end)\n", "stage", "p50", "p99")
	for _, s := range stageNames {
		var ds []time.Duration
		for _, o := range outs {
			if d, ok := o.stages[s]; ok {
				ds = append(ds, d)
			}
		}
		fmt.Fprintf(w, "%-8s %8.3fs %8.3fs   (%d machines)\n", s, percentile(ds, 0.5).Seconds(), percentile(ds, 0.99).Seconds(), len(ds))
	}
	if len(pids) > 0 {
		fmt.Fprintf(w, "server      CPU %.2f s during the storm (%.0f%% of one core), peak RSS %.1f MiB (VmHWM summed over PIDs %v)\n",
			cpu, 100*cpu/elapsed.Seconds(), peakRSS(procs), procs)
	}
}
