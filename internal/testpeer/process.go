package testpeer

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testlog"
)

// DefaultReadyTimeout is how long Start waits for a process to become ready when Cmd gives
// no ReadyTimeout.
const DefaultReadyTimeout = 15 * time.Second

// Cmd describes a process to start. At most one of ReadyTCP, ReadyLog and ReadyFunc is
// usually set; with none, the process counts as ready once it has started.
type Cmd struct {
	Path string
	Args []string
	Dir  string
	Env  []string // added to the test's environment

	// Netns, when set, runs the process inside that namespace (through `ip netns exec`).
	Netns *Netns

	// ReadyTCP: ready when this address accepts a TCP connection (from the namespace's
	// point of view when Netns is set).
	ReadyTCP string
	// ReadyLog: ready when a line of the combined output matches this regexp.
	ReadyLog string
	// ReadyFunc: ready when this returns nil.
	ReadyFunc func() error
	// ReadyTimeout bounds the wait; zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// Process is a started program. Its output is kept and written to the test log when the
// test fails.
type Process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *testlog.Buffer
	done chan struct{}
	err  error // set before done is closed
	once sync.Once
}

// Start starts c, waits until it is ready, and registers its stop at cleanup. It fails the
// test with the process's output if the process cannot start, exits early, or does not
// become ready in time.
func Start(t testing.TB, c Cmd) *Process {
	t.Helper()
	path, args := c.Path, c.Args
	if c.Netns != nil {
		args = append([]string{"netns", "exec", c.Netns.Name(), path}, args...)
		path = "ip"
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(cmd.Environ(), c.Env...)
	out := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a stop reaches children a wrapper (ip netns exec
	// execs in place, but shells do not) may start; and, on Linux, SIGKILL when the test
	// binary dies, so that a run killed by its timeout leaves nothing running (see
	// startTied).
	setGroup(cmd)
	if err := startTied(cmd); err != nil {
		t.Fatalf("testpeer: start %s: %v", c.Path, err)
	}
	p := &Process{t: t, name: c.Path, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", p.name, p.PID(), p.Output())
		}
	})
	if err := p.waitReady(c); err != nil {
		p.Stop()
		t.Fatalf("testpeer: %s (pid %d) not ready: %v\noutput:\n%s", c.Path, p.PID(), err, p.Output())
	}
	return p
}

func (p *Process) waitReady(c Cmd) error {
	timeout := c.ReadyTimeout
	if timeout == 0 {
		timeout = DefaultReadyTimeout
	}
	var re *regexp.Regexp
	if c.ReadyLog != "" {
		var err error
		if re, err = regexp.Compile(c.ReadyLog); err != nil {
			return fmt.Errorf("ReadyLog: %w", err)
		}
	}
	check := func() error {
		switch {
		case c.ReadyTCP != "":
			return dialTCP(c.Netns, c.ReadyTCP)
		case re != nil:
			if re.MatchString(p.Output()) {
				return nil
			}
			return fmt.Errorf("no output line matches %q", c.ReadyLog)
		case c.ReadyFunc != nil:
			return c.ReadyFunc()
		}
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("exited before it was ready: %v", p.err)
		default:
		}
		last := check()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v: %w", timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dialTCP(ns *Netns, addr string) error {
	dial := func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
	if ns == nil {
		return dial()
	}
	return ns.Do(dial)
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output is everything the process wrote to stdout and stderr so far.
func (p *Process) Output() string { return p.out.String() }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned (nil for exit status 0); valid once Done is
// closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Done is closed when the process exits.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group, then SIGKILL after 5 s, and waits for the process
// to exit (on Windows, it ends the process at once). Calling it again does nothing.
func (p *Process) Stop() {
	p.once.Do(func() {
		terminateGroup(p.cmd)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			killGroup(p.cmd)
			<-p.done
		}
	})
}

// Kill sends SIGKILL to the process group at once and waits for it to exit, as a crash
// would end it.
func (p *Process) Kill() {
	p.once.Do(func() {
		killGroup(p.cmd)
		<-p.done
	})
}
