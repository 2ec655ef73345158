package e2e_test

import (
	"bytes"
	"os"
	"sync"
	"time"
)

// serialStamp is one line of a machine's serial log and when it first appeared, counted from
// power-on.
type serialStamp struct {
	at   time.Duration
	line string
}

// traceSerial polls a serial log every 20 ms and stamps each line (split at CR or LF, so that
// iPXE's "url... ok" shows when it began and when it ended) as it is completed. stop ends the
// polling and returns the stamps in order.
func traceSerial(path string, start time.Time) (stop func() []serialStamp) {
	var (
		mu     sync.Mutex
		stamps []serialStamp
		seen   int // bytes of the log already split into stamped lines
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	poll := func() {
		b, _ := os.ReadFile(path)
		if len(b) <= seen {
			return
		}
		now := time.Since(start)
		rest := b[seen:]
		for {
			i := bytes.IndexAny(rest, "\r\n")
			if i < 0 {
				break
			}
			if line := string(bytes.TrimSpace(rest[:i])); line != "" {
				mu.Lock()
				stamps = append(stamps, serialStamp{now, line})
				mu.Unlock()
			}
			seen += i + 1
			rest = rest[i+1:]
		}
	}
	go func() {
		defer close(finished)
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
		mu.Lock()
		defer mu.Unlock()
		return stamps
	}
}
