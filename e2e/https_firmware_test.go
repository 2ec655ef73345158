package e2e_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/sitelink"
)

// efiCertX509 is EFI_CERT_X509_GUID (a5c059a1-94e4-4aa7-87b5-ab155c2bf072) as stored: the
// first three fields little-endian.
var efiCertX509 = []byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}

// efiSignatureList is ca as one EFI_SIGNATURE_LIST of one X.509 EFI_SIGNATURE_DATA (UEFI
// 2.10, 32.4.1): what OVMF reads from fw_cfg etc/edk2/https/cacerts as the CAs its HTTPS
// boot trusts.
func efiSignatureList(ca *x509.Certificate) []byte {
	var b bytes.Buffer
	b.Write(efiCertX509)
	sigSize := 16 + len(ca.Raw) // owner GUID, then the certificate
	binary.Write(&b, binary.LittleEndian, uint32(28+sigSize))
	binary.Write(&b, binary.LittleEndian, uint32(0))
	binary.Write(&b, binary.LittleEndian, uint32(sigSize))
	b.Write(make([]byte, 16)) // the owner: none
	b.Write(ca.Raw)
	return b.Bytes()
}

// TestE2E_HTTPSFirmware: OVMF, with the boot CA enrolled through QEMU's
// etc/edk2/https/cacerts, fetches the agent's snponly build by UEFI HTTP boot over https
// (proxy DHCP names an https URL: firmware_https), and iPXE boots on over https to the
// ramdisk, whose assertion verifies. Nothing of the boot goes over plain HTTP or TFTP.
func TestE2E_HTTPSFirmware(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	capture, stopCapture := fullCapture(l)
	agentIP := l.seg.Hosts[1].IP
	ca := newBootCA(t, l.dir, "boot CA", net.IP(agentIP.AsSlice()))
	l.tftpRoot = ""
	l.bootExtra = ca.bootTLSKeys() + "firmware_https = true\n"
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)

	m := newMachine("https-firmware", fwUEFIHTTP, 43)
	l.prepare(a.name, m, sitelink.ArchX86UEFI)
	l.powerOn(m, bootOpts{httpsCACerts: efiSignatureList(ca.cert)})
	words := m.waitCmdline(t)
	m.logSlow(t, time.Minute)
	t.Logf("%s: power-on to kernel %v, UEFI HTTPS boot then iPXE over https", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond))
	l.checkFirmwareHTTPS(m, words, a, capture, stopCapture)
}

// checkFirmwareHTTPS checks a boot of m through a where the firmware fetched the iPXE build
// over https and iPXE booted on over https: the assertion verifies, the cache URL is an
// https grant, nothing went over TFTP or plain HTTP, and the segment's capture (stopped
// here) holds none of the secrets handed out.
func (l *lab) checkFirmwareHTTPS(m *machine, words []string, a *labAgent, capture string, stopCapture func()) {
	t := l.t
	t.Helper()
	agentIP := a.host.IP
	text := param(words, "bc.assertion")
	if _, err := l.verifier.Verify(context.Background(), text, assertion.Join{Site: siteID, MACs: m.nics, UUID: m.uuid}); err != nil {
		t.Fatalf("the assertion on the command line is refused: %v\ncommand line: %q", err, words)
	}
	if c := param(words, "bc.cache"); !strings.HasPrefix(c, "https://"+agentIP.String()+"/cache/t/") {
		t.Errorf("bc.cache %q, want an https grant of the agent's cache", c)
	}
	after := a.metrics()
	if n := after.sum("siteboot_tftp_transfers_total"); n != 0 {
		t.Errorf("%v TFTP transfers on an HTTPS boot", n)
	}
	if reqs := l.httpRequests(agentIP); len(reqs) != 0 {
		t.Errorf("plain HTTP requests to the agent on the wire: %q", reqs)
	}
	time.Sleep(500 * time.Millisecond) // let tcpdump write the last packets
	stopCapture()
	token := param(words, "bc.token")
	grant, _, _ := strings.Cut(strings.TrimPrefix(param(words, "bc.cache"), "https://"+agentIP.String()+"/cache/t/"), "/")
	// The control: the chain URL proxy DHCP sent in clear (its boot nonce binds it to the
	// machine's address).
	l.checkNoSecrets(capture, agentIP, []byte("https://"+agentIP.String()+"/boot/chain.ipxe?n="), token, text, grant)
}
