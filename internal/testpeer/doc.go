// Package testpeer is how siteboot's tests work with real programs: it finds a program or
// skips naming the Debian package that provides it, starts a process and waits until it is
// ready, stops it by its PID at cleanup, makes network namespaces, bridges, veths and taps on
// 192.0.2.0/24 (and a second segment behind a router on 198.51.100.0/24) and deletes them
// at cleanup, and hands out free loopback ports.
//
// # Skipping and requiring
//
// A test that needs a program or root skips with a clear reason when it is missing. With
// SITEBOOT_REQUIRE_PEERS=1 in the environment (CI sets it after installing every peer) the
// same test fails instead, so a missing install step can never hide behind a skip.
//
// With SITEBOOT_HIDE_PEERS=1 every peer looks missing (LookPath, File, Glob, Ramdisk and the
// emulators skip without looking), as on a machine where none is installed: CI runs the
// tests so before it installs the peers, to prove that a fresh machine passes them. A
// comma-separated list instead hides the peers it names, by program, file or Debian
// package, as on a machine where only some are installed. A test
// that needs a peer asks for it before it starts anything of its own (a server, a
// goroutine), so that its skip leaves nothing behind for a leak check to find. Root is not
// hidden: a test that needs root and no peer runs as root either way.
//
// # Systems
//
// The package builds on every system the library does. Network namespaces are Linux's:
// elsewhere NewNetns skips and Netns.Do returns an error wrapping errors.ErrUnsupported. The
// parent-death signal (see Cleanup) is Linux's too; elsewhere a process outlives a test
// binary that dies without its clean-up. On Windows, Stop ends a process at once (there is
// no SIGTERM and no process group).
//
// # Cleanup
//
// Everything this package starts or makes is undone through t.Cleanup: processes are stopped
// by PID (SIGTERM, then SIGKILL), namespaces are deleted with `ip netns delete`, which also
// removes the bridges, veths and taps inside them. No process is found or stopped by name.
//
// A test binary that dies without its clean-up (killed by its timeout or by SIGKILL) leaves
// nothing running: every process Start makes gets SIGKILL from the kernel when the binary
// dies (the parent-death signal, sent from one thread that lives as long as the binary), so
// the programs it starts must stay in the foreground (QEMU without -daemonize, dnsmasq with
// --no-daemon). Its namespaces, named sbPID-N after the binary's PID, are deleted by the
// next test binary's first NewNetns (RemoveStale), and only once that PID no longer runs.
package testpeer
