package e2e_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/internal/testpeer"
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

// powerOnHTTPSBoot starts m, an OVMF machine that boots by UEFI HTTP boot only, with cacerts
// as the CAs its HTTPS boot trusts (fw_cfg etc/edk2/https/cacerts), on a new tap of the
// lab's bridge, once a machine slot is free. It is powerOn's UEFI HTTP case with the CA
// enrolled.
func (l *lab) powerOnHTTPSBoot(m *machine, cacerts []byte) {
	t := l.t
	t.Helper()
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	for _, f := range []string{ovmfCode, ovmfVars} {
		testpeer.File(t, f, "ovmf")
	}
	certs := filepath.Join(l.dir, m.name+".cacerts")
	vars := filepath.Join(l.dir, m.name+".vars.fd")
	b, err := os.ReadFile(ovmfVars)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		b    []byte
	}{{certs, cacerts}, {vars, b}} {
		if err := os.WriteFile(f.path, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	machineSlots <- struct{}{}
	l.mu.Lock()
	l.taps++
	tap := l.seg.AddTap(t, fmt.Sprintf("tap%d", l.taps))
	l.mu.Unlock()
	m.serial = filepath.Join(l.dir, m.name+".serial.log")
	args := []string{
		"-accel", "tcg", "-m", "512", "-nodefaults", "-display", "none", "-serial", "file:" + m.serial,
		"-uuid", m.uuid.String(), "-no-reboot", "-M", "q35,graphics=off",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-netdev", "tap,id=n0,ifname=" + tap + ",script=no,downscript=no",
		"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=%s,bootindex=1,romfile=", m.mac),
		"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no",
		"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no",
		"-fw_cfg", "name=etc/edk2/https/cacerts,file=" + certs,
	}
	m.start = time.Now()
	m.p = testpeer.Start(t, testpeer.Cmd{Path: qemu, Args: args, Netns: l.seg.Bridge})
	go func() {
		<-m.p.Done()
		<-machineSlots
	}()
	l.mu.Lock()
	l.machines = append(l.machines, m)
	l.mu.Unlock()
	t.Cleanup(m.p.Stop)
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
	l.powerOnHTTPSBoot(m, efiSignatureList(ca.cert))
	words := m.waitCmdline(t)
	m.logSlow(t, time.Minute)
	t.Logf("%s: power-on to kernel %v, UEFI HTTPS boot then iPXE over https", m.name, m.kernel.Sub(m.start).Round(100*time.Millisecond))
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
