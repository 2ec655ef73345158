package e2e_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// serialStamp is one line of a machine's serial log and when it first appeared, counted from
// power-on.
type serialStamp struct {
	at   time.Duration
	line string
}

// traceSerial reads a serial log as it grows, every 20 ms, and stamps each line (split at CR
// or LF, so that iPXE's "url... ok" shows when it began and when it ended) when it is
// complete. stop ends the reading and returns the stamps in order.
func traceSerial(path string, start time.Time) (stop func() []serialStamp) {
	var stamps []serialStamp
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var f *os.File
		defer func() {
			if f != nil {
				f.Close()
			}
		}()
		var pending []byte // read, not yet ended by CR or LF
		buf := make([]byte, 64<<10)
		poll := func() {
			if f == nil {
				var err error
				if f, err = os.Open(path); err != nil {
					return // QEMU has not created it yet
				}
			}
			now := time.Since(start)
			for {
				n, err := f.Read(buf)
				pending = append(pending, buf[:n]...)
				if err == io.EOF || n == 0 {
					break
				}
			}
			for {
				i := bytes.IndexAny(pending, "\r\n")
				if i < 0 {
					break
				}
				if line := string(bytes.TrimSpace(pending[:i])); line != "" {
					stamps = append(stamps, serialStamp{now, line})
				}
				pending = pending[i+1:]
			}
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				poll()
				return
			case <-tick.C:
				poll()
			}
		}
	}()
	return func() []serialStamp {
		close(done)
		<-finished
		return stamps
	}
}

// TestTraceSerial: lines are stamped when their CR or LF arrives, not when their first bytes
// do; a line written in two pieces is one stamp; blank lines between CR and LF make none; and
// a log that does not exist yet is picked up once it does.
func TestTraceSerial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serial.log")
	start := time.Now()
	stop := traceSerial(path, start)
	time.Sleep(60 * time.Millisecond) // polls before the file exists
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write("iPXE initialising devices...\r\n\r\nhttps://x/boot/ipxe... ")
	time.Sleep(500 * time.Millisecond) // 25 polls see the unfinished line
	mid := time.Since(start)
	write("ok\nEFI stub: Booting Linux Kernel...\n   \nno end yet")
	stamps := stop()

	want := []string{"iPXE initialising devices...", "https://x/boot/ipxe... ok", "EFI stub: Booting Linux Kernel..."}
	if len(stamps) != len(want) {
		t.Fatalf("stamps %+v, want lines %q", stamps, want)
	}
	for i, s := range stamps {
		if s.line != want[i] {
			t.Errorf("stamp %d: %q, want %q", i, s.line, want[i])
		}
	}
	if stamps[0].at >= mid {
		t.Errorf("first line stamped at %v, after the second write began (%v)", stamps[0].at, mid)
	}
	if stamps[1].at < mid {
		t.Errorf("line ended by the second write stamped at %v, before that write (%v)", stamps[1].at, mid)
	}
}
