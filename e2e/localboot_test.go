package e2e_test

import (
	"regexp"
	"testing"
	"time"

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
	l.plane.PrepareRamdisk(a.name, []sitelink.ProxyDhcpEntry{{
		MAC: m.mac, UUID: m.entrySpelling().String(), Arch: sitelink.ArchBIOS, Workflow: m.workflow(), TokenRef: m.tokenRef(),
		NotAfter: time.Now().Add(time.Hour), LocalBoot: true,
	}})
	l.waitReady(a.name)
	l.powerOn(m, bootOpts{localDisk: true})
	serial, _ := m.wait(bootTimeout, func(serial []byte) bool { return localDiskRE.Match(serial) })
	if !localDiskRE.Match(serial) {
		l.diagnose()
		t.Fatalf("the local disk never booted\nserial:\n%s", tail(serial, 3000))
	}
	if !m.kernel.IsZero() {
		t.Errorf("a kernel started; want the local disk")
	}
	mt := a.metrics()
	if local, script := mt.sum("siteboot_boot_answers_total", `answer="local"`), mt.sum("siteboot_boot_answers_total", `answer="script"`); local < 1 || script != 0 {
		t.Errorf("answers counted: local %v, ramdisk script %v; want the local answer only", local, script)
	}
}
