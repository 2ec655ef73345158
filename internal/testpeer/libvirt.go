package testpeer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// libvirtUser runs a private libvirtd: nobody's session daemon keeps all its state in the
// test's folder, touching nothing of the machine's own libvirt.
const libvirtUser = 65534

// Libvirtd is a private, unprivileged libvirtd (a session daemon run as nobody) whose
// sockets, logs, domains and NVRAM files live in a folder of the test's.
type Libvirtd struct {
	// URI is the daemon's libvirt URI (qemu+unix:///session?socket=...).
	URI string
	// Emulator is the path to give a domain's <emulator>: QEMU (qemu-system-x86_64),
	// killed once the test binary is gone (libvirt starts QEMU detached).
	Emulator string
	// Files is a folder nobody (the daemon, its QEMU) may read and write: a domain's
	// disks, directories and serial log go there.
	Files string
}

// StartLibvirtd starts a private libvirtd and stops it at cleanup, after destroying the
// domains it runs. It needs root (to start the daemon as nobody), libvirt-daemon,
// libvirt-daemon-driver-qemu, libvirt-clients and qemu-system-x86; it skips (fails when
// Required) naming what is missing.
func StartLibvirtd(t testing.TB) *Libvirtd {
	t.Helper()
	RequireRoot(t)
	libvirtd := LookPath(t, "libvirtd", "libvirt-daemon")
	virsh := LookPath(t, "virsh", "libvirt-clients")
	qemu := LookPath(t, "qemu-system-x86_64", "qemu-system-x86")
	setpriv := LookPath(t, "setpriv", "util-linux")
	Glob(t, "/usr/lib/*/libvirt/connection-driver/libvirt_driver_qemu.so", "libvirt-daemon-driver-qemu")
	// A folder nobody can enter (t.TempDir's parents are private to root).
	dir, err := os.MkdirTemp("", "siteboot-libvirt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run, home, files := filepath.Join(dir, "run"), filepath.Join(dir, "home"), filepath.Join(dir, "files")
	for _, d := range []string{run, home, files} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, libvirtUser, libvirtUser); err != nil {
			t.Fatal(err)
		}
	}
	// QEMU writes a domain's serial log itself: through virtlogd (the default), a domain
	// started again at once may find the log still held by its last run ("Device or
	// resource busy"), and the session daemon would start a virtlogd that outlives the test.
	conf := filepath.Join(home, ".config", "libvirt")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(conf), conf} {
		if err := os.Chown(d, libvirtUser, libvirtUser); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(conf, "qemu.conf"), []byte("stdio_handler = \"file\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "qemu.sh")
	body := fmt.Sprintf("#!/bin/sh\n(while [ -d /proc/%d ] && [ -d /proc/$$ ]; do sleep 0.5; done; kill -9 $$ 2>/dev/null) </dev/null >/dev/null 2>&1 &\nexec %s \"$@\"\n", os.Getpid(), qemu)
	if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Libvirtd{URI: "qemu+unix:///session?socket=" + filepath.Join(run, "libvirt", "libvirt-sock"), Emulator: wrapper, Files: files}
	uid := fmt.Sprint(libvirtUser)
	Start(t, Cmd{
		Path: setpriv,
		// setpriv sets the parent-death signal itself: changing the uid clears the one
		// Start set.
		Args: []string{"--reuid=" + uid, "--regid=" + uid, "--clear-groups", "--pdeathsig", "KILL", "--",
			"/usr/bin/env", "HOME=" + home, "XDG_RUNTIME_DIR=" + run, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
			"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), libvirtd, "--timeout", "0"},
		Dir: dir,
		ReadyFunc: func() error {
			if out, err := l.virsh(virsh, 5*time.Second, "version"); err != nil {
				return fmt.Errorf("virsh version: %v: %s", err, out)
			}
			return nil
		},
		ReadyTimeout: 30 * time.Second,
	})
	// Before the daemon stops (cleanups run last-registered first): every running domain.
	t.Cleanup(func() {
		out, _ := l.virsh(virsh, 30*time.Second, "list", "--name")
		for _, name := range strings.Fields(out) {
			_, _ = l.virsh(virsh, 30*time.Second, "destroy", name)
		}
	})
	return l
}

func (l *Libvirtd) virsh(virsh string, limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, virsh, append([]string{"-c", l.URI}, args...)...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := StartTied(c); err != nil {
		return "", err
	}
	err := c.Wait()
	return strings.TrimSpace(out.String()), err
}

// Virsh runs virsh against the daemon and returns its output, failing the test on error.
func (l *Libvirtd) Virsh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := l.virsh("virsh", 60*time.Second, args...)
	if err != nil {
		t.Fatalf("virsh %v: %v\n%s", args, err, out)
	}
	return out
}

// WriteFile writes a file into Files, owned by nobody, and returns its path.
func (l *Libvirtd) WriteFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(l.Files, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, libvirtUser, libvirtUser); err != nil {
		t.Fatal(err)
	}
	return p
}
