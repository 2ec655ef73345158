package e2e_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitelink"
)

// localDiskLine is what the boot sector of localDiskImage prints on the serial port.
const localDiskLine = "SITEBOOT-LOCAL-DISK-BOOTED"

var localDiskRE = regexp.MustCompile(localDiskLine)

// localDiskImage is a 1 MiB raw disk whose MBR boot sector (16-bit real mode, loaded at
// 0000:7C00) writes localDiskLine to COM1 (port 0x3F8) and halts: a boot the test can see.
func localDiskImage() []byte {
	code := []byte{
		0xFC,       // cld
		0x31, 0xC0, // xor ax, ax
		0x8E, 0xD8, // mov ds, ax
		0xBE, 0x17, 0x7C, // mov si, 0x7C17 (msg)
		0xBA, 0xF8, 0x03, // mov dx, 0x3F8
		0xAC,       // next: lodsb
		0x84, 0xC0, // test al, al
		0x74, 0x03, // jz done
		0xEE,       // out dx, al
		0xEB, 0xF8, // jmp next
		0xFA,       // done: cli
		0xF4,       // hlt
		0xEB, 0xFE, // jmp $
	}
	img := make([]byte, 1<<20)
	n := copy(img, code)
	copy(img[n:], "\r\n"+localDiskLine+"\r\n\x00")
	img[510], img[511] = 0x55, 0xAA
	return img
}

// waitLocalDisk waits until m's local disk (localDiskImage) booted, and returns m's serial log.
func (l *lab) waitLocalDisk(m *machine) []byte {
	l.t.Helper()
	serial, _ := m.wait(bootTimeout, func(serial []byte) bool { return localDiskRE.Match(serial) })
	if !localDiskRE.Match(serial) {
		l.diagnose()
		l.t.Fatalf("the local disk never booted\nserial:\n%s", tail(serial, 3000))
	}
	return serial
}

// TestE2E_LocalBootBIOS: local boot on purpose (MAAS LP#1642298, Foreman #10207, Sidero
// Metal). A site keeps the network first in the boot order; the machine's entry says "boot
// from the local disk". SeaBIOS's iPXE gets proxy DHCP's answer and the agent's script at
// once, and the script boots drive 0x80 (sanboot --no-describe): the disk's boot sector
// runs, no kernel is fetched, and the agent counts a local answer.
func TestE2E_LocalBootBIOS(t *testing.T) {
	t.Parallel()
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("local", fwBIOS, 4)
	l.prepareLocal(a.name, m, sitelink.ArchBIOS)
	l.powerOn(m, bootOpts{localDisk: true})
	l.waitLocalDisk(m)
	l.checkLocalOnly(a, m)
}

// ownIPXEScriptPort is the test's own HTTP server on the bridge namespace's address, which
// serves TestE2E_LocalBootBIOSOwnIPXE's script.
const ownIPXEScriptPort = 27041

// TestE2E_LocalBootBIOSOwnIPXE: local boot on purpose with siteboot's own BIOS build
// (package ipxebin's undionly.kpxe) rather than QEMU's iPXE ROM. The NIC's ROM (Debian's
// iPXE) is told by the site's DHCP server to fetch a script that chains undionly.kpxe from
// the agent's TFTP unless it already runs iPXE 2.0.0; siteboot's build then configures the
// NIC again (its embedded autoboot), fetches the same script and chains the agent's chain
// script. The agent runs without proxy DHCP (the site's DHCP names everything), so the
// request needs no boot nonce; the entry says "boot from the local disk", and the answer's
// sanboot --no-describe --drive 0x80 runs the disk's boot sector.
func TestE2E_LocalBootBIOSOwnIPXE(t *testing.T) {
	t.Parallel()
	l := newOwnBIOSLab(t, ownIPXEScriptPort)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	m := newMachine("local-own", fwBIOS, 0x95)
	l.prepareLocal(a.name, m, sitelink.ArchBIOS)
	l.powerOn(m, bootOpts{localDisk: true})
	serial := l.waitLocalDisk(m)
	t.Logf("%s: the disk's boot sector ran %v after power-on", m.name, timeSince(m.start))
	if i := ownIPXERE.FindIndex(serial); i == nil || i[0] > localDiskRE.FindIndex(serial)[0] {
		t.Errorf("the serial log never shows siteboot's iPXE (v2.0.0) running before the disk")
	}
	l.checkLocalOnly(a, m)
	mt := a.metrics()
	if n := mt.sum("siteboot_tftp_transfers_total", `outcome="ok"`); n < 1 {
		t.Errorf("%v TFTP transfers completed, want undionly.kpxe", n)
	}
}

// newOwnBIOSLab is a lab whose SeaBIOS machines run siteboot's own undionly.kpxe: the site's
// DHCP server (proxy DHCP off) points QEMU's iPXE ROM at a script served on port, which
// chains the build over the site's TFTP, and the build (iPXE 2.0.0) then chains the agent's
// script.
func newOwnBIOSLab(t *testing.T, port int) *lab { return newOwnBIOSLabScheme(t, port, "http") }

// newOwnBIOSLabScheme is newOwnBIOSLab whose build chains the agent's script over scheme
// ("http" or "https").
func newOwnBIOSLabScheme(t *testing.T, port int, scheme string) *lab {
	agentIP := testpeer.HostIP(1).String()
	l := newLab(t, 2,
		"--dhcp-match=set:ipxe,175",
		"--dhcp-boot=tag:ipxe,"+bridgeURL(port, "/bios.ipxe"))
	b, err := fs.ReadFile(ipxebin.Embedded(), ipxebin.UndionlyKPXE)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.tftpRoot, "undionly.kpxe"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bios.ipxe", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "#!ipxe\niseq ${version} 2.0.0 && goto own ||\nchain tftp://%s/undionly.kpxe\nexit 1\n:own\nchain %s://%s/boot/chain.ipxe\n", agentIP, scheme, agentIP)
	})
	l.serve(context.Background(), port, mux)
	l.noProxyDHCP = true
	return l
}
