package testpeer

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The ramdisk real-firmware tests boot: Debian's kernel and an initramfs whose /init prints
// the kernel command line between CmdlineMarkers and powers off.
var ramdisk struct {
	once           sync.Once
	kernel, initrd []byte
	err            string // why there is none: a missing peer
}

// Ramdisk returns Debian's kernel (/boot/vmlinuz-*, package linux-image-amd64) and an
// initramfs built from busybox-static whose /init mounts /proc, prints the kernel command line
// to the console as "SITEBOOT-CMDLINE:...:END" (see Cmdline) and powers off. It skips (fails
// when Required) without a kernel or a static busybox. Both are built once per process.
func Ramdisk(t testing.TB) (kernel, initrd []byte) {
	t.Helper()
	hidden(t, "the ramdisk's kernel and busybox", "linux-image-amd64 busybox-static")
	r := &ramdisk
	r.once.Do(func() {
		kernels, _ := filepath.Glob("/boot/vmlinuz-*")
		if len(kernels) == 0 {
			r.err = "no kernel in /boot: install the Debian package linux-image-amd64"
			return
		}
		k, err := os.ReadFile(kernels[len(kernels)-1])
		if err != nil {
			r.err = fmt.Sprintf("cannot read %s: %v", kernels[len(kernels)-1], err)
			return
		}
		bbPath, err := exec.LookPath("busybox")
		if err != nil {
			r.err = "busybox not found: install the Debian package busybox-static"
			return
		}
		f, err := elf.Open(bbPath)
		if err != nil {
			r.err = fmt.Sprintf("%s: %v", bbPath, err)
			return
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				r.err = bbPath + " is dynamically linked: install the Debian package busybox-static"
			}
		}
		f.Close()
		if r.err != "" {
			return
		}
		bb, err := os.ReadFile(bbPath)
		if err != nil {
			r.err = err.Error()
			return
		}
		r.kernel = k
		r.initrd = RamdiskInitrd(bb)
	})
	if r.err != "" {
		Unavailable(t, "%s", r.err)
	}
	return r.kernel, r.initrd
}

// RamdiskInitrd returns the initramfs Ramdisk boots, with busybox as its /bin/busybox: a
// static busybox for the architecture of the kernel it goes with (the arm64 e2e tests pass
// Debian's arm64 busybox-static).
func RamdiskInitrd(busybox []byte) []byte {
	return NewcArchive([]CpioFile{
		{Name: "bin", Mode: 040755},
		{Name: "dev", Mode: 040755},
		{Name: "dev/console", Mode: 020600, RdevMajor: 5, RdevMinor: 1},
		{Name: "proc", Mode: 040755},
		{Name: "bin/busybox", Mode: 0100755, Data: busybox},
		{Name: "init", Mode: 0100755, Data: []byte(initScript)},
	})
}

// initScript is the ramdisk's /init. The console's UART sends what init writes from a
// buffer, after the write returns, and a power-off does not wait for it: without the pause
// a slow (TCG, loaded) machine powers off with the line still unsent.
const initScript = `#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox echo "SITEBOOT-CMDLINE:$(/bin/busybox cat /proc/cmdline):END" >/dev/console
/bin/busybox sleep 2
/bin/busybox poweroff -f
`

var cmdlineRE = regexp.MustCompile(`SITEBOOT-CMDLINE:(.*):END`)

// Cmdline finds the kernel command line a Ramdisk printed in a serial log and returns its
// words; ok is false when it is not (yet) there.
func Cmdline(serial []byte) (words []string, ok bool) {
	m := cmdlineRE.FindSubmatch(serial)
	if m == nil {
		return nil, false
	}
	return strings.Fields(string(m[1])), true
}

// CpioFile is one entry of an initramfs.
type CpioFile struct {
	Name                 string
	Mode                 int // type and permission bits, e.g. 0100755 for an executable
	RdevMajor, RdevMinor int // for device nodes
	Data                 []byte
}

// NewcArchive writes a cpio archive in the "newc" format the Linux kernel unpacks as its
// initramfs.
func NewcArchive(files []CpioFile) []byte {
	var b bytes.Buffer
	pad := func() {
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	write := func(ino int, f CpioFile) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, f.Mode, 0, 0, 1, 0, len(f.Data), 0, 0, f.RdevMajor, f.RdevMinor, len(f.Name)+1, 0)
		b.WriteString(f.Name)
		b.WriteByte(0)
		pad()
		b.Write(f.Data)
		pad()
	}
	for i, f := range files {
		write(i+1, f)
	}
	write(len(files)+1, CpioFile{Name: "TRAILER!!!"})
	return b.Bytes()
}
