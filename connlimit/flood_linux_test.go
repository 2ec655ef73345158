//go:build linux

package connlimit_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/connlimit"
)

const (
	floodChildEnv = "SITEBOOT_CONNLIMIT_FLOOD_CHILD"
	// The child's descriptor limit: soft childSoft, hard childHard, raised to childHard.
	childSoft, childHard = 64, 128
	// The child reserves childReserved descriptors, so its total cap is
	// (childHard - childReserved) / DefaultPerConn = 32.
	childReserved = 64
	floodSources  = 8
	floodPer      = 40 // 320 connections, well over the child's 128 descriptors
)

// TestDescriptorFlood: a process with a small descriptor limit (128, in a child process so
// the test binary keeps its own) serves HTTP while a flood of idle connections from 8
// sources is held open. Without connlimit the flood takes every descriptor and the process
// can no longer open a UDP socket (as TFTP needs for every transfer); behind a
// connlimit.Listener capped from its Budget, it holds at most the cap and the UDP socket
// still opens and carries a datagram.
func TestDescriptorFlood(t *testing.T) {
	tests := []struct {
		mode    string
		wantUDP string
	}{
		{"unlimited", "udp error"},
		{"limited", "udp ok"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			ch := startChild(t, tt.mode)
			if got := ch.line(); got != fmt.Sprintf("nofile %d", childHard) {
				t.Fatalf("child: %q, want RaiseNOFILE to report %d", got, childHard)
			}
			addr, ok := strings.CutPrefix(ch.line(), "addr ")
			if !ok {
				t.Fatal("child gave no address")
			}
			dialled := 0
			for s := range floodSources {
				src := fmt.Sprintf("127.0.0.%d", 10+s)
				for range floodPer {
					c, err := dialFrom(src, addr)
					dialled++
					if errors.Is(err, syscall.ECONNRESET) {
						continue // refused before the dial returned
					}
					if err != nil {
						t.Fatalf("dial %d from %s: %v", dialled, src, err)
					}
					defer c.Close()
				}
			}
			ch.send("settle %d", dialled)
			settled := ch.line()
			ch.send("udp")
			udp := ch.line()
			if !strings.HasPrefix(udp, tt.wantUDP) {
				t.Errorf("while flooded with %d connections: %q, want %q", dialled, udp, tt.wantUDP)
			}
			if tt.mode == "unlimited" {
				if !strings.Contains(udp, "too many open files") {
					t.Errorf("unlimited: %q, want EMFILE", udp)
				}
				return
			}
			var st connlimit.Stats
			if err := json.Unmarshal([]byte(strings.TrimPrefix(settled, "settled ")), &st); err != nil {
				t.Fatalf("child: %q: %v", settled, err)
			}
			const total = (childHard - childReserved) / connlimit.DefaultPerConn
			if st.PeakOpen > total || st.Open > total || st.Accepted+st.Refused() != uint64(dialled) || st.Refused() < uint64(dialled-total) {
				t.Errorf("child's stats %+v: want at most %d open, %d decided, at least %d refused", st, total, dialled, dialled-total)
			}
			t.Logf("%d connections held against a %d-descriptor limit: %d open, %d refused; %s", dialled, childHard, st.Open, st.Refused(), udp)
		})
	}
}

type child struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func startChild(t *testing.T, mode string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodChildEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		in.Close() // the child exits on EOF
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("child: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("child did not exit on EOF\n%s", stderr.String())
		}
	})
	return &child{t: t, in: in, out: bufio.NewScanner(out)}
}

func (c *child) send(format string, args ...any) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		c.t.Fatal(err)
	}
}

func (c *child) line() string {
	c.t.Helper()
	if !c.out.Scan() {
		c.t.Fatalf("child's output ended: %v", c.out.Err())
	}
	return c.out.Text()
}

// watch records whether Accept ever failed for want of a descriptor.
type watch struct {
	net.Listener
	emfile atomic.Bool
}

func (w *watch) Accept() (net.Conn, error) {
	c, err := w.Listener.Accept()
	if errors.Is(err, syscall.EMFILE) {
		w.emfile.Store(true)
	}
	return c, err
}

// floodChild is the child process: it lowers its descriptor limit, raises the soft limit
// to the hard one, serves HTTP on loopback (behind connlimit when mode is "limited"), and
// answers the parent's commands on stdin.
func floodChild(mode string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: childSoft, Max: childHard}); err != nil {
		return fail(err)
	}
	nofile, err := connlimit.RaiseNOFILE()
	if err != nil {
		return fail(err)
	}
	fmt.Printf("nofile %d\n", nofile)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	w := &watch{Listener: inner}
	var (
		ln      net.Listener = w
		limited *connlimit.Listener
	)
	if mode == "limited" {
		total, err := connlimit.Budget{NOFILE: nofile, Reserved: childReserved}.Total()
		if err != nil {
			return fail(err)
		}
		if limited, err = connlimit.New(w, connlimit.Limits{Total: total}); err != nil {
			return fail(err)
		}
		ln = limited
	}
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.NotFoundHandler(),
		ErrorLog: log.New(io.Discard, "", 0)} // "accept: too many open files; retrying"
	go srv.Serve(ln)
	fmt.Printf("addr %s\n", inner.Addr())

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "settle":
			n, _ := strconv.ParseUint(arg, 10, 64)
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if limited != nil {
					if s := limited.Stats(); s.Accepted+s.Refused() >= n {
						break
					}
				} else if w.emfile.Load() {
					break
				}
				time.Sleep(time.Millisecond)
			}
			var st connlimit.Stats
			if limited != nil {
				st = limited.Stats()
			}
			b, _ := json.Marshal(st)
			fmt.Printf("settled %s\n", b)
		case "udp":
			fmt.Println(udpRoundTrip())
		}
	}
	return 0
}

// udpRoundTrip opens a UDP socket on loopback and sends itself a datagram, as a TFTP
// transfer opens its socket.
func udpRoundTrip() string {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return "udp error: " + err.Error()
	}
	defer pc.Close()
	if _, err := pc.WriteTo([]byte("tftp"), pc.LocalAddr()); err != nil {
		return "udp error: " + err.Error()
	}
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 8)
	n, _, err := pc.ReadFrom(b)
	if err != nil || string(b[:n]) != "tftp" {
		return fmt.Sprintf("udp error: read %q, %v", b[:n], err)
	}
	return "udp ok"
}
