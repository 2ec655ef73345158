package ipmitest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bmc/ipmi"
	"github.com/bettercompute/siteboot/internal/testpeer"
)

// VirtualBMCArchive is OpenStack's virtualbmc (Apache-2.0), kept in testdata: the Python
// package index is not reachable from CI, and its dependencies come from Debian.
const VirtualBMCArchive = "virtualbmc-3.3.0.tar.gz"

// The account and domain StartVirtualBMC configures.
const (
	VirtualBMCUser   = "admin"
	VirtualBMCPass   = "password"
	VirtualBMCDomain = "siteboot-vbmc"
	// VirtualBMCUUID is the domain's SMBIOS UUID.
	VirtualBMCUUID = "27946b59-9e44-4fa7-8e91-f3527a1ef094"
)

// nobody runs the private libvirtd: an unprivileged session daemon keeps all its state in
// the test's folder, touching nothing of the machine's own libvirt.
const nobodyID = "65534"

// VirtualBMC is virtualbmc's BMC (virtualbmc.vbmc.VirtualBMC, what vbmcd runs for each
// domain) in front of a real QEMU (TCG) domain of a private libvirtd.
type VirtualBMC struct {
	Addr string
	Port int
	// URI is the libvirt URI of the private daemon.
	URI  string
	Proc *testpeer.Process
}

// StartVirtualBMC starts a private libvirtd (as nobody, a session daemon whose sockets,
// logs and domains live in a folder of the test's), defines a 64 MiB QEMU domain that
// boots from the network (it has no NIC: its firmware just retries), and serves
// virtualbmc for it on a free loopback port. It needs root (to start the daemon as
// nobody), libvirt-daemon, libvirt-daemon-driver-qemu, libvirt-clients, qemu-system-x86,
// python3-libvirt, python3-pyghmi, python3-pbr and python3-venv; it skips (fails when peers
// are required) naming what is missing.
//
// Every process dies with the test binary: libvirtd and the BMC through testpeer, and the
// QEMU process, which libvirt starts detached, through a wrapper that kills it once the test
// binary is gone.
func StartVirtualBMC(t testing.TB) *VirtualBMC {
	t.Helper()
	testpeer.RequireRoot(t)
	libvirtd := testpeer.LookPath(t, "libvirtd", "libvirt-daemon")
	virsh := testpeer.LookPath(t, "virsh", "libvirt-clients")
	qemu := testpeer.LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	setpriv := testpeer.LookPath(t, "setpriv", "util-linux")
	testpeer.Glob(t, "/usr/lib/*/libvirt/connection-driver/libvirt_driver_qemu.so", "libvirt-daemon-driver-qemu")
	py := testpeer.File(t, "/usr/bin/python3", "python3") // Debian's, whose dist-packages hold its modules
	for mod, deb := range map[string]string{"libvirt": "python3-libvirt", "pyghmi": "python3-pyghmi", "pbr": "python3-pbr", "venv": "python3-venv", "ensurepip": "python3-venv"} {
		testpeer.PythonModule(t, py, mod, deb)
	}
	// A folder nobody can enter (t.TempDir's parents are private to root).
	dir, err := os.MkdirTemp("", "siteboot-vbmc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run, home := filepath.Join(dir, "run"), filepath.Join(dir, "home")
	for _, d := range []string{run, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// The emulator wrapper: QEMU, killed once the test binary is gone.
	wrapper := filepath.Join(dir, "qemu.sh")
	body := fmt.Sprintf("#!/bin/sh\n(while [ -d /proc/%d ] && [ -d /proc/$$ ]; do sleep 0.5; done; kill -9 $$ 2>/dev/null) </dev/null >/dev/null 2>&1 &\nexec %s \"$@\"\n", os.Getpid(), qemu)
	if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	uri := "qemu+unix:///session?socket=" + filepath.Join(run, "libvirt", "libvirt-sock")
	v := &VirtualBMC{URI: uri}
	ready := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if out, err := tied(exec.CommandContext(ctx, virsh, "-c", uri, "version")); err != nil {
			return fmt.Errorf("virsh version: %v: %s", err, out)
		}
		return nil
	}
	testpeer.Start(t, testpeer.Cmd{
		Path: setpriv,
		// setpriv sets the parent-death signal itself: changing the uid clears the one
		// testpeer set.
		Args: []string{"--reuid=" + nobodyID, "--regid=" + nobodyID, "--clear-groups", "--pdeathsig", "KILL", "--",
			"/usr/bin/env", "HOME=" + home, "XDG_RUNTIME_DIR=" + run, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
			"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), libvirtd, "--timeout", "0"},
		Dir:          dir,
		ReadyFunc:    ready,
		ReadyTimeout: 30 * time.Second,
	})
	xml := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(xml, []byte(fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>
  <uuid>%s</uuid>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='network'/></os>
  <devices>
    <emulator>%s</emulator>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
</domain>
`, VirtualBMCDomain, VirtualBMCUUID, wrapper)), 0o644); err != nil {
		t.Fatal(err)
	}
	v.Virsh(t, "define", xml)
	// Before libvirtd stops (cleanups run last-registered first).
	t.Cleanup(func() { _, _ = v.virsh("destroy", VirtualBMCDomain) })

	// virtualbmc, installed as ../shared/peers/README.md says, into a venv of the test's.
	venv := filepath.Join(dir, "venv")
	runOK(t, dir, py, "-m", "venv", "--system-site-packages", venv)
	runOK(t, dir, "tar", "-xzf", archive(t), "-C", dir)
	src := filepath.Join(dir, strings.TrimSuffix(VirtualBMCArchive, ".tar.gz"))
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "-q", "--no-build-isolation", "--no-deps", "--no-index", ".")
	pip.Dir, pip.Env = src, append(os.Environ(), "PBR_VERSION=3.3.0")
	if out, err := tied(pip); err != nil {
		t.Fatalf("installing virtualbmc: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "vbmc.py")
	if err := os.WriteFile(script, []byte(`import sys
from virtualbmc.vbmc import VirtualBMC

b = VirtualBMC(username=sys.argv[1], password=sys.argv[2], port=int(sys.argv[3]),
               address='127.0.0.1', domain_name=sys.argv[4], libvirt_uri=sys.argv[5])
print('listening', flush=True)
b.listen(timeout=30)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	v.Port = testpeer.FreePort(t, "udp")
	v.Addr = "127.0.0.1:" + strconv.Itoa(v.Port)
	v.Proc = testpeer.Start(t, testpeer.Cmd{
		Path:     filepath.Join(venv, "bin", "python"),
		Args:     []string{"-u", script, VirtualBMCUser, VirtualBMCPass, strconv.Itoa(v.Port), VirtualBMCDomain, uri},
		Dir:      dir,
		ReadyLog: "^listening",
	})
	return v
}

func archive(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("ipmitest: cannot locate the package's folder")
	}
	p := filepath.Join(filepath.Dir(file), "testdata", VirtualBMCArchive)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func runOK(t testing.TB, dir, name string, args ...string) {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	if out, err := tied(c); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// tied runs c to its end and returns its combined output, killed if the test binary dies
// first (testpeer.StartTied).
func tied(c *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := testpeer.StartTied(c); err != nil {
		return nil, err
	}
	err := c.Wait()
	return out.Bytes(), err
}

func (v *VirtualBMC) virsh(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tied(exec.CommandContext(ctx, "virsh", append([]string{"-c", v.URI}, args...)...))
	return strings.TrimSpace(string(out)), err
}

// Virsh runs virsh against the private libvirtd and returns its output, failing the test
// on error.
func (v *VirtualBMC) Virsh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := v.virsh(args...)
	if err != nil {
		t.Fatalf("virsh %v: %v\n%s", args, err, out)
	}
	return out
}

// Target is the bmc.Target of the virtual BMC's account.
func (v *VirtualBMC) Target() bmc.Target {
	return bmc.Target{Driver: ipmi.Name, Address: v.Addr, Username: VirtualBMCUser, Password: VirtualBMCPass}
}
