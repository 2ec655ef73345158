package testpeer

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

var nsSeq atomic.Int64

// Netns is a network namespace made for one test.
type Netns struct {
	name string
}

// NewNetns makes a network namespace with its loopback up and deletes it at cleanup. It needs
// root and iproute2's ip.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	RequireRoot(t)
	LookPath(t, "ip", "iproute2")
	n := &Netns{name: fmt.Sprintf("sb%d-%d", os.Getpid(), nsSeq.Add(1))}
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
func (n *Netns) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it leaves with this goroutine instead of going back
		// to the scheduler inside another namespace.
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+n.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("testpeer: open namespace %s: %w", n.name, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("testpeer: enter namespace %s: %w", n.name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

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
