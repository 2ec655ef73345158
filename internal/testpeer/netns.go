package testpeer

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	nsSeq           atomic.Int64
	removeStaleOnce sync.Once
)

// nsPrefix starts the name of every namespace this package makes: sbPID-N, PID being the
// test binary's.
const nsPrefix = "sb"

var nsNameRE = regexp.MustCompile(`^` + nsPrefix + `([0-9]+)-[0-9]+$`)

// RemoveStale deletes the namespaces this package made for test binaries that no longer
// run (a run killed by its timeout or by SIGKILL never reaches its clean-up), and with them
// the bridges, veths and taps inside them. A namespace's name carries the PID of the test
// binary that made it; one whose process is gone, or is a zombie, is stale. NewNetns calls
// it once per test binary, so the next run clears what a killed one left. It returns the
// names it deleted.
func RemoveStale() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("testpeer: ip netns list: %w: %s", err, out)
	}
	var removed []string
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // "NAME" or "NAME (id: N)"
		if len(f) == 0 {
			continue
		}
		m := nsNameRE.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || processLives(pid) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "delete", f[0]).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns delete %s: %w: %s", f[0], err, bytes.TrimSpace(out)))
			continue
		}
		removed = append(removed, f[0])
	}
	return removed, errors.Join(errs...)
}

// processLives reports whether pid names a process that has not exited (a zombie has).
func processLives(pid int) bool {
	if pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "PID (COMM) STATE ...": COMM may hold spaces and parentheses; the state follows the
	// last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X':
		return false
	}
	return true
}

// Netns is a network namespace made for one test.
type Netns struct {
	name string
}

// NewNetns makes a network namespace with its loopback up and deletes it at cleanup. It needs
// Linux, root and iproute2's ip.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	if !namespaces {
		Unavailable(t, "network namespaces need Linux")
	}
	RequireRoot(t)
	LookPath(t, "ip", "iproute2")
	removeStaleOnce.Do(func() {
		if _, err := RemoveStale(); err != nil {
			t.Logf("testpeer: removing namespaces of earlier runs: %v", err)
		}
	})
	n := &Netns{name: fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), nsSeq.Add(1))}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Fatalf("testpeer: ip netns add %s: %v\n%s", n.name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", n.name).CombinedOutput(); err != nil {
			t.Errorf("testpeer: ip netns delete %s: %v\n%s", n.name, err, out)
		}
	})
	n.Run(t, "ip", "link", "set", "lo", "up")
	return n
}

// Name is the namespace's name, as `ip netns` knows it.
func (n *Netns) Name() string { return n.name }

// Do runs f on an OS thread that has entered the namespace. Sockets f opens belong to the
// namespace for their whole life, so a server can be bound in Do and served outside it.
// Goroutines f starts run outside the namespace.
func (n *Netns) Do(f func() error) error { return n.do(f) }

// Run runs a command inside the namespace and returns its combined output, failing the test
// if it fails.
func (n *Netns) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("testpeer: in %s: %s %s: %v\n%s", n.name, name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Command returns an unstarted command that runs inside the namespace.
func (n *Netns) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...)
}

// Segment is an isolated Ethernet segment: a bridge br0 (192.0.2.1/24) in its own namespace,
// and hosts in namespaces of their own, each joined to the bridge by a veth.
type Segment struct {
	Bridge *Netns
	Hosts  []*Host
}

// Host is one namespace on a Segment, with its interface Iface at IP/24.
type Host struct {
	*Netns
	IP    netip.Addr
	Iface string
}

// SegmentPrefix is the address range segments use (TEST-NET-1, RFC 5737).
var SegmentPrefix = netip.MustParsePrefix("192.0.2.0/24")

// BridgeIP is the bridge's own address on a segment.
var BridgeIP = netip.MustParseAddr("192.0.2.1")

// BridgeMAC is the bridge's own MAC on a segment, and RoutedBridgeMAC that of a routed
// segment's bridge (locally administered): set, so that ports joining never change it.
const (
	BridgeMAC       = "02:5b:00:00:00:01"
	RoutedBridgeMAC = "02:5b:00:00:00:02"
)

// HostIP returns the address of host i on a segment: 192.0.2.(10+i).
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}) }

// NewSegment makes a segment with the given number of hosts (at most 200) and deletes it at
// cleanup.
func NewSegment(t testing.TB, hosts int) *Segment {
	t.Helper()
	if hosts < 0 || hosts > 200 {
		t.Fatalf("testpeer: NewSegment(%d): want 0 to 200 hosts", hosts)
	}
	s := &Segment{Bridge: NewNetns(t)}
	br := s.Bridge
	br.Run(t, "ip", "link", "add", "br0", "type", "bridge")
	// A bridge takes the lowest MAC of its ports unless it was given one: a machine's tap
	// with a lower MAC would then change it, and every host whose neighbour entry still
	// names the old one loses the bridge's address until that entry is probed again (some
	// 15-45 s; the old MAC is a port's, whose frames from other ports the bridge drops).
	br.Run(t, "ip", "link", "set", "br0", "address", BridgeMAC)
	br.Run(t, "ip", "addr", "add", BridgeIP.String()+"/24", "dev", "br0")
	br.Run(t, "ip", "link", "set", "br0", "up")
	for i := range hosts {
		h := &Host{Netns: NewNetns(t), IP: HostIP(i), Iface: "eth0"}
		port := fmt.Sprintf("vh%d", i)
		br.Run(t, "ip", "link", "add", port, "type", "veth", "peer", "name", h.Iface, "netns", h.Name())
		br.Run(t, "ip", "link", "set", port, "master", "br0", "up")
		h.Run(t, "ip", "addr", "add", h.IP.String()+"/24", "dev", h.Iface)
		h.Run(t, "ip", "link", "set", h.Iface, "up")
		s.Hosts = append(s.Hosts, h)
	}
	return s
}

// AddTap makes a tap device on br0 in the bridge's namespace, for a QEMU machine started in
// that namespace, and returns its name.
func (s *Segment) AddTap(t testing.TB, name string) string {
	t.Helper()
	s.Bridge.Run(t, "ip", "tuntap", "add", "dev", name, "mode", "tap")
	s.Bridge.Run(t, "ip", "link", "set", name, "master", "br0", "up")
	return name
}

// RoutedPrefix is the address range of a segment behind a router (TEST-NET-2, RFC 5737).
var RoutedPrefix = netip.MustParsePrefix("198.51.100.0/24")

// RouterUplinkIP is a router's address on the first segment, and RouterIP its address on
// the segment behind it (the address a DHCP relay there puts in giaddr).
var (
	RouterUplinkIP = netip.MustParseAddr("192.0.2.254")
	RouterIP       = netip.MustParseAddr("198.51.100.1")
)

// RoutedSegment is a second Ethernet segment behind a router: one namespace that forwards
// between its uplink eth0 (RouterUplinkIP/24, a veth on the first segment's bridge) and a
// bridge br1 (RouterIP/24) for the machines' taps, which the QEMU machines of that segment
// run in. Every host of the first segment, and its bridge namespace, routes RoutedPrefix
// through the router.
type RoutedSegment struct {
	Router *Netns
}

// AddRouted makes a RoutedSegment behind s. It is deleted with the namespaces at cleanup.
func (s *Segment) AddRouted(t testing.TB) *RoutedSegment {
	t.Helper()
	LookPath(t, "sysctl", "procps")
	r := &RoutedSegment{Router: NewNetns(t)}
	ns := r.Router
	s.Bridge.Run(t, "ip", "link", "add", "vrt", "type", "veth", "peer", "name", "eth0", "netns", ns.Name())
	s.Bridge.Run(t, "ip", "link", "set", "vrt", "master", "br0", "up")
	ns.Run(t, "ip", "addr", "add", RouterUplinkIP.String()+"/24", "dev", "eth0")
	ns.Run(t, "ip", "link", "set", "eth0", "up")
	ns.Run(t, "ip", "link", "add", "br1", "type", "bridge")
	ns.Run(t, "ip", "link", "set", "br1", "address", RoutedBridgeMAC) // as br0's, see NewSegment
	ns.Run(t, "ip", "addr", "add", RouterIP.String()+"/24", "dev", "br1")
	ns.Run(t, "ip", "link", "set", "br1", "up")
	ns.Run(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	for _, h := range append([]*Netns{s.Bridge}, hostsNetns(s.Hosts)...) {
		h.Run(t, "ip", "route", "add", RoutedPrefix.String(), "via", RouterUplinkIP.String())
	}
	return r
}

func hostsNetns(hs []*Host) []*Netns {
	out := make([]*Netns, len(hs))
	for i, h := range hs {
		out[i] = h.Netns
	}
	return out
}

// AddTap makes a tap device on br1 in the router's namespace, for a QEMU machine started in
// that namespace, and returns its name.
func (r *RoutedSegment) AddTap(t testing.TB, name string) string {
	t.Helper()
	r.Router.Run(t, "ip", "tuntap", "add", "dev", name, "mode", "tap")
	r.Router.Run(t, "ip", "link", "set", name, "master", "br1", "up")
	return name
}
