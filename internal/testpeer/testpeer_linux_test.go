package testpeer_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// TestUDPAcrossSegment sends a datagram from one host namespace to another over the bridge
// and gets its echo back.
func TestUDPAcrossSegment(t *testing.T) {
	seg := testpeer.NewSegment(t, 2)
	a, b := seg.Hosts[0], seg.Hosts[1]

	var server net.PacketConn
	if err := b.Do(func() (err error) {
		server, err = net.ListenPacket("udp4", b.IP.String()+":9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() {
		buf := make([]byte, 64)
		n, from, err := server.ReadFrom(buf)
		if err == nil {
			server.WriteTo(append([]byte("echo "), buf[:n]...), from)
		}
	}()

	var client net.PacketConn
	if err := a.Do(func() (err error) {
		client, err = net.ListenPacket("udp4", a.IP.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.WriteTo([]byte("hello"), &net.UDPAddr{IP: b.IP.AsSlice(), Port: 9999}); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, from, err := client.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "echo hello" {
		t.Errorf("reply = %q, want %q", got, "echo hello")
	}
	if got := from.(*net.UDPAddr).IP.String(); got != b.IP.String() {
		t.Errorf("reply from %s, want %s", got, b.IP)
	}

	// The same address is unreachable from the test's own namespace: the segment is
	// isolated.
	if out, err := exec.Command("ip", "-o", "addr", "show", "to", b.IP.String()).CombinedOutput(); err == nil && strings.TrimSpace(string(out)) != "" {
		t.Errorf("host address %s visible outside its namespace: %s", b.IP, out)
	}
}

// TestCleanup runs a subtest that starts a process inside a namespace, and checks that after
// it no namespace and no process is left.
func TestCleanup(t *testing.T) {
	sleep := testpeer.LookPath(t, "sleep", "coreutils")
	// What the subtest's NewNetns needs, asked here, so that its skip cannot leave the
	// checks below looking at nothing.
	testpeer.RequireRoot(t)
	testpeer.LookPath(t, "ip", "iproute2")
	var pid int
	var name string
	t.Run("inner", func(t *testing.T) {
		ns := testpeer.NewNetns(t)
		name = ns.Name()
		p := testpeer.Start(t, testpeer.Cmd{Path: sleep, Args: []string{"60"}, Netns: ns})
		pid = p.PID()
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("process %d not running: %v", pid, err)
		}
		if out := ns.Run(t, "ip", "-o", "link", "show", "lo"); !strings.Contains(out, "UP") {
			t.Errorf("loopback not up in %s: %s", name, out)
		}
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after cleanup (kill 0: %v)", pid, err)
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), name) {
		t.Errorf("namespace %s still listed after cleanup:\n%s", name, out)
	}
}

// childEnv makes TestKilledBinaryLeavesNothing's child: the same test binary, run again,
// which builds a segment and starts processes, then waits to be killed.
const childEnv = "SITEBOOT_TESTPEER_KILLED_CHILD"

// TestKilledBinaryLeavesNothing runs this test binary again as a child that makes a segment
// with a tap, starts processes in it (one from a goroutine whose OS thread ends right
// after), and prints their PIDs and the namespaces. The child is then killed with SIGKILL,
// as a test timeout's kill or a crash would end it, so none of its clean-up runs: every
// process it started must still die with it, and the next run's RemoveStale must delete
// the namespaces it left.
func TestKilledBinaryLeavesNothing(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		killedChild(t)
		return
	}
	// What the child needs, asked here: a child that skips ends before it is ready.
	testpeer.RequireRoot(t)
	testpeer.LookPath(t, "ip", "iproute2")
	testpeer.LookPath(t, "sleep", "coreutils")
	testpeer.LookPath(t, "sysctl", "procps")
	// A namespace of this living binary, made first: its NewNetns is also where this
	// binary's own once-only RemoveStale runs, before the child exists.
	live := testpeer.NewNetns(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledBinaryLeavesNothing$", "-test.v", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // should the test fail before the kill
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var pids []int
	var names []string
	var seen []string
	timeout := time.After(2 * time.Minute)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the child ended before it was ready:\n%s\n%s", strings.Join(seen, "\n"), stderr.String())
			}
			seen = append(seen, line)
			if v, ok := strings.CutPrefix(line, "CHILD-PID "); ok {
				pid, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			if v, ok := strings.CutPrefix(line, "CHILD-NETNS "); ok {
				names = append(names, v)
			}
			if line == "CHILD-READY" {
				break wait
			}
		case <-timeout:
			t.Fatalf("the child was not ready in 2 minutes:\n%s\n%s", strings.Join(seen, "\n"), stderr.String())
		}
	}
	go func() { // drain the rest, so the child never blocks on its output
		for range lines {
		}
	}()
	if len(pids) != 5 || len(names) != 3 {
		t.Fatalf("the child reported processes %v and namespaces %v, want 5 and 3", pids, names)
	}
	// The processes started from goroutines whose threads ended still run: the parent-death
	// signal is tied to the binary's life, not to a thread's.
	for _, pid := range pids {
		if !alive(pid) {
			t.Errorf("process %d died before its test binary", pid)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d still runs %v after its test binary was killed", pid, time.Since(killed).Round(time.Millisecond))
		}
	}
	t.Logf("the child's %d processes were gone %v after its kill", len(pids), time.Since(killed).Round(time.Millisecond))

	// The killed binary's namespaces are left (its clean-up never ran) until a later run
	// removes them; nothing of another, living test binary is touched.
	for _, n := range names {
		if !netnsListed(t, n) {
			t.Fatalf("namespace %s was gone before RemoveStale ran: the check below would prove nothing", n)
		}
	}
	removed, err := testpeer.RemoveStale()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if netnsListed(t, n) {
			t.Errorf("namespace %s of the killed binary still listed after RemoveStale (removed %v)", n, removed)
		}
		if !slices.Contains(removed, n) {
			t.Errorf("RemoveStale did not report %s: %v", n, removed)
		}
	}
	if !netnsListed(t, live.Name()) || slices.Contains(removed, live.Name()) {
		t.Errorf("RemoveStale removed %s, a namespace of this living binary", live.Name())
	}
}

// killedChild is the child's side of TestKilledBinaryLeavesNothing.
func killedChild(t *testing.T) {
	sleep := testpeer.LookPath(t, "sleep", "coreutils")
	seg := testpeer.NewSegment(t, 1)
	seg.AddTap(t, "tap0")
	r := seg.AddRouted(t)
	r.AddTap(t, "tap1")
	for _, ns := range []*testpeer.Netns{seg.Bridge, seg.Hosts[0].Netns, r.Router} {
		fmt.Printf("CHILD-NETNS %s\n", ns.Name())
	}
	p := testpeer.Start(t, testpeer.Cmd{Path: sleep, Args: []string{"300"}, Netns: seg.Bridge})
	fmt.Printf("CHILD-PID %d\n", p.PID())
	p = testpeer.Start(t, testpeer.Cmd{Path: sleep, Args: []string{"301"}})
	fmt.Printf("CHILD-PID %d\n", p.PID())
	// From goroutines locked to their threads, all locked at once so that each has a thread
	// of its own: each thread ends when its goroutine returns (one of them may be the main
	// thread, which Go keeps).
	const locked = 3
	pidc := make(chan int, locked)
	var started, release sync.WaitGroup
	started.Add(locked)
	release.Add(1)
	for i := range locked {
		go func() {
			runtime.LockOSThread()
			pidc <- testpeer.Start(t, testpeer.Cmd{Path: sleep, Args: []string{strconv.Itoa(302 + i)}, Netns: r.Router}).PID()
			started.Done()
			release.Wait()
		}()
	}
	started.Wait()
	release.Done()
	for range locked {
		fmt.Printf("CHILD-PID %d\n", <-pidc)
	}
	time.Sleep(200 * time.Millisecond) // the threads have ended
	fmt.Println("CHILD-READY")
	time.Sleep(3 * time.Minute) // the parent kills it long before
	t.Fatal("the child was never killed")
}

// alive reports whether pid runs (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func netnsListed(t *testing.T, name string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

// TestRoutedSegment sends a datagram from a host of the first segment to an address on the
// segment behind the router and gets its echo back through the router.
func TestRoutedSegment(t *testing.T) {
	seg := testpeer.NewSegment(t, 1)
	r := seg.AddRouted(t)
	h := seg.Hosts[0]
	// A host on the second segment: a veth on br1 with an address of the routed prefix.
	far := testpeer.NewNetns(t)
	farIP := "198.51.100.50"
	r.Router.Run(t, "ip", "link", "add", "vfar", "type", "veth", "peer", "name", "eth0", "netns", far.Name())
	r.Router.Run(t, "ip", "link", "set", "vfar", "master", "br1", "up")
	far.Run(t, "ip", "addr", "add", farIP+"/24", "dev", "eth0")
	far.Run(t, "ip", "link", "set", "eth0", "up")
	far.Run(t, "ip", "route", "add", "default", "via", testpeer.RouterIP.String())

	var server net.PacketConn
	if err := far.Do(func() (err error) {
		server, err = net.ListenPacket("udp4", farIP+":9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	from := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, addr, err := server.ReadFrom(buf)
		if err == nil {
			from <- addr.(*net.UDPAddr).IP.String()
			server.WriteTo(buf[:n], addr)
		}
	}()
	var client net.PacketConn
	if err := h.Do(func() (err error) {
		client, err = net.ListenPacket("udp4", h.IP.String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.WriteTo([]byte("across"), &net.UDPAddr{IP: net.ParseIP(farIP), Port: 9999}); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _, err := client.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "across" {
		t.Fatalf("echo through the router: %q, %v", buf[:n], err)
	}
	// Routed, not bridged: the far host saw the first segment's address as the source.
	if got := <-from; got != h.IP.String() {
		t.Errorf("the far host saw the datagram from %s, want %s", got, h.IP)
	}
	if out := h.Run(t, "ip", "route", "get", farIP); !strings.Contains(out, "via "+testpeer.RouterUplinkIP.String()) {
		t.Errorf("route to %s from the first segment: %s, want via %s", farIP, out, testpeer.RouterUplinkIP)
	}
}
