package testpeer

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// RequireEnv is the environment variable that turns skips for missing peers into failures.
const RequireEnv = "SITEBOOT_REQUIRE_PEERS"

// HideEnv is the environment variable that makes peers look missing, as on a machine where
// they are not installed. With HideEnv=1 every peer does: LookPath, File, Glob, Ramdisk and
// every helper that starts a peer skip (fail when Required) without looking. With a
// comma-separated list only the peers it names do, by program, file or Debian package
// (SITEBOOT_HIDE_PEERS=isc-dhcp-client,qemu-system-x86_64).
const HideEnv = "SITEBOOT_HIDE_PEERS"

// Required reports whether missing peers must fail tests instead of skipping them.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// hiddenName reports whether HideEnv hides a peer known by any of names.
func hiddenName(names ...string) bool {
	v := os.Getenv(HideEnv)
	if v == "1" {
		return true
	}
	for h := range strings.SplitSeq(v, ",") {
		if h = strings.TrimSpace(h); h != "" && slices.Contains(names, h) {
			return true
		}
	}
	return false
}

// Unavailable skips t with reason, or fails it when peers are required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (%s=1, so this fails instead of skipping)", msg, RequireEnv)
	}
	t.Skip(msg)
}

// hidden skips (fails when Required) when HideEnv hides what was asked for or its Debian
// packages (debPkgs, separated by spaces), naming it.
func hidden(t testing.TB, what, debPkgs string) {
	t.Helper()
	if hiddenName(append(strings.Fields(debPkgs), what, filepath.Base(what))...) {
		Unavailable(t, "%s hidden by %s=%s: it is in the Debian package %s", what, HideEnv, os.Getenv(HideEnv), debPkgs)
	}
}

// LookPath returns the path of prog, or skips (fails when Required) naming debPkg, the Debian
// package that provides it.
func LookPath(t testing.TB, prog, debPkg string) string {
	t.Helper()
	hidden(t, prog, debPkg)
	p, err := exec.LookPath(prog)
	if err != nil {
		Unavailable(t, "%s not found: install the Debian package %s", prog, debPkg)
	}
	return p
}

// File returns path when a file (firmware, a ROM, a library) is there, or skips (fails when
// Required) naming debPkg, the Debian package that provides it.
func File(t testing.TB, path, debPkg string) string {
	t.Helper()
	hidden(t, path, debPkg)
	if _, err := os.Stat(path); err != nil {
		Unavailable(t, "no %s: install the Debian package %s", path, debPkg)
	}
	return path
}

// Glob returns the files matching pattern, or skips (fails when Required) naming debPkg,
// the Debian package that provides them, when none does.
func Glob(t testing.TB, pattern, debPkg string) []string {
	t.Helper()
	hidden(t, pattern, debPkg)
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		Unavailable(t, "nothing matches %s: install the Debian package %s", pattern, debPkg)
	}
	return m
}

// RequireRoot skips (fails when Required) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root (network namespaces, tap devices or mounts)")
	}
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago for network "tcp" or
// "udp". Another process may take it before the caller binds it; callers that can bind
// port 0 themselves should.
func FreePort(t testing.TB, network string) int {
	t.Helper()
	switch network {
	case "tcp":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testpeer: free tcp port: %v", err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	case "udp":
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testpeer: free udp port: %v", err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	t.Fatalf("testpeer: FreePort network %q: want tcp or udp", network)
	return 0
}
