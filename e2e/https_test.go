package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
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

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// bootCA is an RSA CA and a boot certificate it issued, written as PEM files: what iPXE
// verifies (RSA signatures; the Ed25519 site CA of the control link is not for iPXE).
type bootCA struct {
	cert              *x509.Certificate
	key               *rsa.PrivateKey
	caFile            string
	leafFile, keyFile string
}

// newBootCA makes a CA named name in dir and a boot certificate from it for ip and the
// addresses more (an agent's IPv6 boot address).
func newBootCA(t *testing.T, dir, name string, ip net.IP, more ...net.IP) *bootCA {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &bootCA{key: key}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	leafKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		IPAddresses: append([]net.IP{ip}, more...), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca.cert, &leafKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
	ca.caFile, ca.leafFile, ca.keyFile = base+"-ca.pem", base+"-boot.pem", base+"-boot.key"
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{ca.caFile, "CERTIFICATE", der}, {ca.leafFile, "CERTIFICATE", leafDER}, {ca.keyFile, "PRIVATE KEY", pkcs8}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca
}

// bootTLSKeys are the [boot] keys of an agent serving boot over https with ca's
// certificate, refusing plain HTTP.
func (ca *bootCA) bootTLSKeys() string {
	return fmt.Sprintf("tls_cert = %q\ntls_key = %q\ntls_ca = %q\nplain_http = false\n", ca.leafFile, ca.keyFile, ca.caFile)
}

// fullCapture captures every byte of every packet on the lab's bridge (the lab's own
// capture keeps 600 bytes a packet), until the test ends or the returned stop is called.
func fullCapture(l *lab) (path string, stop func()) {
	path = filepath.Join(l.dir, "segment-full.pcap")
	p := testpeer.Start(l.t, testpeer.Cmd{
		Path: "tcpdump", Args: []string{"-i", "br0", "-n", "-U", "-Z", "root", "-s", "0", "-w", path},
		Netns: l.seg.Bridge, ReadyLog: "listening on",
	})
	return path, p.Stop
}

// machineTraffic writes the packets of capture that the test's own servers on the bridge
// address (control plane, image origin) neither sent nor received: the segment as the
// machines and the agents use it for booting. In the lab, the agents' link and image pulls
// cross the same bridge; at a site they are the agent's uplink.
func machineTraffic(t *testing.T, capture string) []byte {
	t.Helper()
	out := capture + ".boot"
	if b, err := exec.Command("tcpdump", "-r", capture, "-w", out, "not host "+testpeer.BridgeIP.String()).CombinedOutput(); err != nil {
		t.Fatalf("tcpdump -r %s: %v\n%s", capture, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestE2E_HTTPS: OVMF's PXE loads the agent's own snponly build over TFTP, patched to trust
// the boot CA; iPXE then fetches the chain script, the machine's script, the kernel and the
// initrd over https from the agent, and the ramdisk's assertion verifies. The segment's
// capture holds none of the secrets handed out (discovery token, grant, assertion, image
// bytes), while it does hold the iPXE build that went over TFTP in clear. A plain request
// to the agent, which refuses plain HTTP, is refused.
func TestE2E_HTTPS(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	capture, stopCapture := fullCapture(l)
	agentIP := l.seg.Hosts[1].IP
	ca := newBootCA(t, l.dir, "boot CA", net.IP(agentIP.AsSlice()))
	l.tftpRoot = "" // the agent's own builds
	l.bootExtra = ca.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("https", fwUEFIPXE, 41)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	before := a.metrics()
	l.powerOn(m, bootOpts{})
	words := m.waitCmdline(t)
	m.logSlow(t, time.Minute)
	t.Logf("%s: power-on to kernel %v over https, to the ramdisk's command line %v", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond), timeSince(m.start))

	l.checkBootedHTTPS(m, words, a, a.host.IP, before, capture, stopCapture, ipxebin.SnponlyX8664)
}

// checkBootedHTTPS checks a boot of m through a, at its boot address at, over https, with
// the iPXE build named build (ipxebin) loaded over TFTP: the assertion on the command line
// verifies, the token is the entry's, the cache URL is an https grant of a's cache under at,
// whose kernel and initrd it served, a plain request is refused and counted, and the
// segment's capture (stopped here) holds none of the secrets handed out, while it holds the
// build's bytes, which crossed in clear. before are a's metrics from before the power-on.
// It returns the verified assertion.
func (l *lab) checkBootedHTTPS(m *machine, words []string, a *labAgent, at netip.Addr, before metrics, capture string, stopCapture func(), build string) assertion.Assertion {
	t := l.t
	t.Helper()
	ctx := context.Background()
	text := param(words, "bc.assertion")
	as, err := l.verifier.Verify(ctx, text, assertion.Join{Site: siteID, MACs: m.nics, UUID: m.uuid})
	if err != nil {
		t.Fatalf("the assertion on the command line is refused: %v\ncommand line: %q", err, words)
	}
	token := param(words, "bc.token")
	if want := l.plane.TokenFor(m.workflow(), m.tokenRef()); want == "" || token != want {
		t.Errorf("bc.token %q, want the token minted for the entry %q", token, want)
	}
	cacheURL := param(words, "bc.cache")
	host := at.String()
	if at.Is6() {
		host = "[" + host + "]"
	}
	grant, ok := strings.CutPrefix(cacheURL, "https://"+host+"/cache/t/")
	grant, _, _ = strings.Cut(grant, "/")
	if !ok || len(grant) < 16 {
		t.Fatalf("bc.cache %q, want an https grant of the agent's cache under %s", cacheURL, host)
	}
	after := a.metrics()
	if served := after.sum("siteboot_cache_served_total") - before.sum("siteboot_cache_served_total"); served < 2 {
		t.Errorf("the cache served %v requests during the boot, want the kernel and the initrd", served)
	}
	if n := after.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n < 1 {
		t.Errorf("%v TFTP transfers completed, want the iPXE build", n)
	}

	// A plain request, from the bridge to the agent's IPv4 address: refused, and counted.
	if code, body := get(l.seg.Bridge, "http://"+a.host.IP.String()+"/boot/chain.ipxe"); code != http.StatusForbidden || !strings.Contains(body, "https") {
		t.Errorf("plain chain request: %d %q, want 403 naming https", code, body)
	}
	if n := a.metrics().sum("siteboot_boot_plain_http_refused_total"); n != 1 {
		t.Errorf("plain refusals counted: %v, want 1", n)
	}

	time.Sleep(500 * time.Millisecond) // tcpdump -U writes each packet as it comes; let the last ones land
	stopCapture()
	bin, err := fs.ReadFile(ipxebin.Embedded(), build)
	if err != nil {
		t.Fatal(err)
	}
	// The control: the iPXE build went over TFTP in clear, so its bytes are in the capture.
	// Of undionly.kpxe, bytes of its prefix: the rest was packed again to trust the CA.
	control := bin[len(bin)/2 : len(bin)/2+64]
	if build == ipxebin.UndionlyKPXE {
		control = bin[1024 : 1024+64]
	}
	l.checkNoSecrets(capture, at, control, token, text, grant)
	return as
}

// checkNoSecrets greps the boot traffic of capture (machineTraffic) for each secret handed
// to the machine (its discovery token, its assertion, its cache grant, and 64 bytes from
// the middle of the kernel and of the initrd) and fails on any found in clear. control is
// bytes that did cross the segment in clear: found, it shows the capture holds the
// payloads at all. It also wants packets to the agent's port 443.
func (l *lab) checkNoSecrets(capture string, agentIP netip.Addr, control []byte, token, assertionText, grant string) {
	t := l.t
	t.Helper()
	seg := machineTraffic(t, capture)
	if !bytes.Contains(seg, control) {
		t.Fatalf("the capture (%d bytes) lacks bytes that crossed the segment in clear: it does not hold the boot's payloads", len(seg))
	}
	kernel, initrd := l.kernelImage, l.initrdImage
	if kernel == nil {
		kernel, initrd = testpeer.Ramdisk(t)
	}
	secrets := map[string][]byte{
		"discovery token": []byte(token), "assertion": []byte(assertionText), "grant": []byte(grant),
		"kernel bytes": kernel[len(kernel)/2 : len(kernel)/2+64], "initrd bytes": initrd[len(initrd)/2 : len(initrd)/2+64],
	}
	for name, s := range secrets {
		if len(s) < 16 {
			t.Errorf("the %s (%q) is too short to look for", name, s)
		} else if bytes.Contains(seg, s) {
			t.Errorf("the segment's capture holds the %s in clear", name)
		}
	}
	n := countPackets(t, capture, "tcp and dst port 443 and dst host "+agentIP.String())
	t.Logf("capture: %d bytes of boot traffic, %d packets to the agent's port 443; none of %d secrets in clear", len(seg), n, len(secrets))
	if n == 0 {
		t.Error("no packet to the agent's port 443: the boot did not go over https")
	}
}

// countPackets counts the packets of capture that match filter.
func countPackets(t *testing.T, capture, filter string) int {
	t.Helper()
	out, err := exec.Command("tcpdump", "-r", capture, "-n", filter).Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s: %v", capture, err)
	}
	return bytes.Count(out, []byte("\n"))
}

// ipxeErrorRE is an error iPXE prints with its error page's URL.
var ipxeErrorRE = regexp.MustCompile(`[^\n]*https?://ipxe\.org/[0-9a-f]{8}[^\n]*`)

// TestE2E_HTTPSOtherCA: iPXE trusting one CA (the site's own build in tftp_root, patched with
// ipxebin) is served a boot certificate from another: it refuses the connection and the boot
// stops with iPXE's error on the serial console; the agent serves the machine no script.
func TestE2E_HTTPSOtherCA(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	agentIP := l.seg.Hosts[1].IP
	trusted := newBootCA(t, l.dir, "trusted CA", net.IP(agentIP.AsSlice()))
	served := newBootCA(t, l.dir, "other CA", net.IP(agentIP.AsSlice()))
	build, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.SnponlyX8664)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := ipxebin.WithTrust(build, trusted.cert)
	if err != nil {
		t.Fatal(err)
	}
	// The site's own build, under the name proxy DHCP's default table gives x86-64 UEFI.
	if err := os.WriteFile(filepath.Join(l.tftpRoot, "ipxe.efi"), patched, 0o644); err != nil {
		t.Fatal(err)
	}
	l.bootExtra = served.bootTLSKeys()
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("https-other-ca", fwUEFIPXE, 42)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{})
	serial, exited := m.wait(bootTimeout, func(b []byte) bool {
		i := bytes.Index(b, []byte("chain.ipxe"))
		return i >= 0 && ipxeErrorRE.Match(b[i:])
	})
	i := bytes.Index(serial, []byte("chain.ipxe"))
	if i < 0 || !ipxeErrorRE.Match(serial[i:]) {
		t.Fatalf("no iPXE error after the https chain (QEMU exited %v):\n%s", exited, tail(serial, 3000))
	}
	t.Logf("iPXE on the serial console: %s", bytes.TrimSpace(ipxeErrorRE.Find(serial[i:])))
	if !m.kernel.IsZero() {
		t.Error("a kernel started")
	}
	if n := a.metrics().sum("siteboot_boot_answers_total"); n != 0 {
		t.Errorf("the agent answered %v /boot/ requests, want none: iPXE must refuse the handshake", n)
	}
}
