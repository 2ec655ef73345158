package testpeer_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// recorder is a testing.TB whose Fatalf ends only the goroutine it runs on, so a test can
// watch a helper fail.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Errorf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *recorder) Cleanup(f func())                  { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool                      { return r.fatal != "" }
func (r *recorder) Logf(string, ...any)               {}
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestNeverReady starts a process that never opens its port: Start gives up after the
// timeout with a message naming the wait and the process's output, and the process is gone.
func TestNeverReady(t *testing.T) {
	sh := testpeer.LookPath(t, "sh", "dash")
	port := testpeer.FreePort(t, "tcp")
	r := &recorder{TB: t}
	var p *testpeer.Process
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		p = testpeer.Start(r, testpeer.Cmd{
			Path:         sh,
			Args:         []string{"-c", "echo still starting; exec sleep 60"},
			ReadyTCP:     fmt.Sprintf("127.0.0.1:%d", port),
			ReadyTimeout: 500 * time.Millisecond,
		})
	}()
	<-done
	r.runCleanups()
	if p != nil {
		t.Fatal("Start returned a process that never became ready")
	}
	if r.fatal == "" {
		t.Fatal("Start did not fail")
	}
	for _, want := range []string{"not ready", "timed out after 500ms", "still starting"} {
		if !strings.Contains(r.fatal, want) {
			t.Errorf("failure message lacks %q:\n%s", want, r.fatal)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Start took %v to give up", d)
	}
}

// TestCleanup runs a subtest that starts a process inside a namespace, and checks that after
// it no namespace and no process is left.
func TestCleanup(t *testing.T) {
	sleep := testpeer.LookPath(t, "sleep", "coreutils")
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

func TestReadyLog(t *testing.T) {
	sh := testpeer.LookPath(t, "sh", "dash")
	p := testpeer.Start(t, testpeer.Cmd{Path: sh, Args: []string{"-c", "sleep 0.1; echo listening on 1234; exec sleep 60"}, ReadyLog: `listening on \d+`})
	if !strings.Contains(p.Output(), "listening on 1234") {
		t.Errorf("output = %q", p.Output())
	}
	p.Stop()
	if !p.Exited() {
		t.Error("process still running after Stop")
	}
	p.Stop() // idempotent
}

// TestNewcArchive unpacks an archive with the system's cpio and finds the files as written.
func TestNewcArchive(t *testing.T) {
	cpio := testpeer.LookPath(t, "cpio", "cpio")
	dir := t.TempDir()
	archive := testpeer.NewcArchive([]testpeer.CpioFile{
		{Name: "bin", Mode: 040755},
		{Name: "bin/hello", Mode: 0100755, Data: []byte("#!/bin/sh\necho hi\n")},
		{Name: "odd-length", Mode: 0100644, Data: []byte("abc")},
	})
	cmd := exec.Command(cpio, "-idm", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(archive))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"bin/hello": "#!/bin/sh\necho hi\n", "odd-length": "abc"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin/hello")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/hello mode: %v, %v", fi, err)
	}
	if words, ok := testpeer.Cmdline([]byte("noise\r\nSITEBOOT-CMDLINE:initrd=x bc.token=t quiet:END\r\n")); !ok || len(words) != 3 || words[1] != "bc.token=t" {
		t.Errorf("Cmdline = %q, %v", words, ok)
	}
}
