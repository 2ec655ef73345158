package testpeer_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// recorder is a testing.TB whose Fatalf ends only the goroutine it runs on, so a test can
// watch a helper fail.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	skip     string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any) {
	r.mu.Lock()
	r.skip = fmt.Sprint(args...)
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

// TestRamdiskInitrd unpacks the ramdisk's initramfs for a given busybox with the system's
// cpio: that busybox, executable, and an /init that prints the command line and powers off.
func TestRamdiskInitrd(t *testing.T) {
	cpio := testpeer.LookPath(t, "cpio", "cpio")
	dir := t.TempDir()
	bb := []byte("\x7fELF not really a busybox")
	cmd := exec.Command(cpio, "-idm", "--quiet", "bin/busybox", "init")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(testpeer.RamdiskInitrd(bb)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "bin/busybox"))
	if err != nil || string(got) != string(bb) {
		t.Errorf("bin/busybox = %q, %v; want %q", got, err, bb)
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin/busybox")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/busybox mode: %v, %v", fi, err)
	}
	init, err := os.ReadFile(filepath.Join(dir, "init"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SITEBOOT-CMDLINE:", "/proc/cmdline", "poweroff -f"} {
		if !strings.Contains(string(init), want) {
			t.Errorf("/init lacks %q:\n%s", want, init)
		}
	}
}

// run calls f with r on a goroutine of its own, so that a skip or failure ends only that
// goroutine, and reports whether f returned.
func (r *recorder) run(f func(testing.TB)) (returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
		returned = true
	}()
	<-done
	r.runCleanups()
	return returned
}

// TestHidePeers: with SITEBOOT_HIDE_PEERS=1 every way of asking for a peer skips, naming the
// setting, even for a program and a file that are there; with SITEBOOT_REQUIRE_PEERS=1 as
// well it fails instead. A list hides only the peers it names; without the setting the same
// program and file are found.
func TestHidePeers(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, prog := filepath.Split(self)
	t.Setenv("PATH", dir)
	asks := map[string]func(testing.TB){
		"LookPath": func(t testing.TB) { testpeer.LookPath(t, prog, "some-package") },
		"File":     func(t testing.TB) { testpeer.File(t, self, "some-package") },
		"Glob":     func(t testing.TB) { testpeer.Glob(t, self, "some-package") },
		"Ramdisk":  func(t testing.TB) { testpeer.Ramdisk(t) },
	}
	for name, ask := range asks {
		t.Run(name, func(t *testing.T) {
			t.Setenv(testpeer.RequireEnv, "")
			t.Setenv(testpeer.HideEnv, "1")
			r := &recorder{TB: t}
			if r.run(ask) {
				t.Fatal("returned with every peer hidden")
			}
			if !strings.Contains(r.skip, testpeer.HideEnv+"=1") || r.fatal != "" {
				t.Errorf("skip %q, failure %q; want a skip naming %s=1", r.skip, r.fatal, testpeer.HideEnv)
			}

			t.Setenv(testpeer.RequireEnv, "1")
			r = &recorder{TB: t}
			if r.run(ask) {
				t.Fatal("returned with every peer hidden and required")
			}
			if !strings.Contains(r.fatal, testpeer.HideEnv+"=1") || r.skip != "" {
				t.Errorf("skip %q, failure %q; want a failure naming %s=1", r.skip, r.fatal, testpeer.HideEnv)
			}
		})
	}
	t.Setenv(testpeer.RequireEnv, "")
	// A list hides the peers it names, by package, program or file, and no other.
	for _, tc := range []struct {
		hide   string
		hidden bool
	}{
		{"", false},
		{"other-package", false},
		{"other-package, some-package", true},
		{prog, true},
		{"other," + prog, true},
	} {
		t.Setenv(testpeer.HideEnv, tc.hide)
		for _, name := range []string{"LookPath", "File", "Glob"} {
			r := &recorder{TB: t}
			switch returned := r.run(asks[name]); {
			case tc.hidden && (returned || !strings.Contains(r.skip, "hidden by "+testpeer.HideEnv)):
				t.Errorf("%s with %s=%q: returned %v, skip %q, failure %q; want a skip naming the setting", name, testpeer.HideEnv, tc.hide, returned, r.skip, r.fatal)
			case !tc.hidden && !returned:
				t.Errorf("%s with %s=%q: skip %q, failure %q; want it found", name, testpeer.HideEnv, tc.hide, r.skip, r.fatal)
			}
		}
	}
}
