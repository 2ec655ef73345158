package e2e_test

import (
	"bytes"
	"io"
	"os"
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
