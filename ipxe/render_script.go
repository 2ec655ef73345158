package ipxe

import (
	"fmt"
	"strconv"
	"time"
)

// Defaults used when the corresponding field is zero.
const (
	// DefaultAttempts is how many times a script tries its fetch ([Retry.Attempts]).
	DefaultAttempts = 4
	// MaxAttempts bounds [Retry.Attempts].
	MaxAttempts = 16
	// DefaultDelay is the first back-off ([Retry.Delay]); each further one doubles.
	DefaultDelay = 2 * time.Second
	// DefaultMaxDelay caps the back-off ([Retry.MaxDelay]).
	DefaultMaxDelay = 30 * time.Second
	// MaxSleep bounds every sleep a script holds.
	MaxSleep = time.Hour
	// DefaultFencedDelay is how long the fenced script waits before it reboots.
	DefaultFencedDelay = 10 * time.Second
	// DefaultWaitDelay is how long the wait-and-retry script sleeps.
	DefaultWaitDelay = 30 * time.Second
	// DefaultInterface is the iPXE network device whose MAC and IP the chain script sends:
	// iPXE's "netX", the device it opened last, which is the one it booted from (iPXE's
	// find_netdev and its "netX" settings block, src/net/netdevice.c and
	// src/net/netdev_settings.c). A machine with several NICs thus reports the NIC that got
	// the proxy offer, not its first one.
	DefaultInterface = "netX"
	// rebootDelay is the pause before a script that has given up reboots.
	rebootDelay = 10
)

// Param is one kernel command-line parameter, rendered as Name=Value. Name is
// [A-Za-z0-9][A-Za-z0-9._-]*; Value is printable ASCII without space, '"', backslash or '$' (it
// may be empty).
type Param struct {
	Name  string
	Value string
}

// Retry is the bounded back-off of a script's fetch: Attempts tries, sleeping Delay after the
// first failure, doubling up to MaxDelay. When every attempt has failed the script chains to
// its fallback URL, or waits 10 s and reboots (so the firmware asks proxy DHCP again and
// finds whichever agent is active now).
type Retry struct {
	Attempts int           // 1..MaxAttempts; 0 means DefaultAttempts
	Delay    time.Duration // whole seconds; 0 means DefaultDelay
	MaxDelay time.Duration // whole seconds, >= Delay; 0 means DefaultMaxDelay (or Delay if larger)
}

// sleeps returns the back-off after each failed attempt but the last, in seconds.
func (r Retry) sleeps() ([]int, error) {
	n := r.Attempts
	if n == 0 {
		n = DefaultAttempts
	}
	if n < 1 || n > MaxAttempts {
		return nil, invalidErr("retry.attempts", fmt.Sprintf("must be 1..%d", MaxAttempts))
	}
	d, err := seconds("retry.delay", r.Delay, DefaultDelay)
	if err != nil {
		return nil, err
	}
	m, err := seconds("retry.max_delay", r.MaxDelay, max(DefaultMaxDelay, time.Duration(d)*time.Second))
	if err != nil {
		return nil, err
	}
	if m < d {
		return nil, invalidErr("retry.max_delay", "shorter than retry.delay")
	}
	out := make([]int, n-1)
	for i := range out {
		out[i] = d
		d = min(2*d, m)
	}
	return out, nil
}

// seconds converts a sleep to whole seconds, 1 s to MaxSleep; zero means def.
func seconds(field string, d, def time.Duration) (int, error) {
	if d == 0 {
		d = def
	}
	if d < time.Second || d > MaxSleep {
		return 0, invalidErr(field, fmt.Sprintf("must be 1s..%s", MaxSleep))
	}
	if d%time.Second != 0 {
		return 0, invalidErr(field, "must be whole seconds (iPXE sleeps in seconds)")
	}
	return int(d / time.Second), nil
}

// script accumulates the lines of one script.
type script struct{ b []byte }

func newScript(comment string, size int) *script {
	s := &script{b: make([]byte, 0, size+len(comment)+256)}
	s.b = append(s.b, "#!ipxe\n# siteboot: "...)
	s.b = append(s.b, comment...)
	s.b = append(s.b, '\n')
	return s
}

// line writes one command line from tokens that are already known to be safe.
func (s *script) line(tokens ...string) {
	for i, t := range tokens {
		if i > 0 {
			s.b = append(s.b, ' ')
		}
		s.b = append(s.b, t...)
	}
	s.b = append(s.b, '\n')
}

func (s *script) bytes() []byte { return s.b }

// attempts writes the retry loop: body(i, onFail) writes attempt i's commands, each ending in
// "|| goto onFail"; between attempts the script echoes and sleeps; after the last one it
// chains to again (when set) or waits and reboots.
func (s *script) attempts(sleeps []int, again string, body func(onFail string)) {
	n := len(sleeps) + 1
	for i := 1; i <= n; i++ {
		onFail := "failed"
		if i < n {
			onFail = "retry" + strconv.Itoa(i)
		}
		body(onFail)
		if i < n {
			d := strconv.Itoa(sleeps[i-1])
			s.line(":" + onFail)
			s.line("echo", "siteboot:", "attempt", strconv.Itoa(i), "of", strconv.Itoa(n), "failed,", "retrying", "in", d, "s")
			s.line("sleep", d)
		}
	}
	s.line(":failed")
	s.line("echo", "siteboot:", "giving", "up", "after", strconv.Itoa(n), "attempts")
	if again != "" {
		s.line("chain", "--replace", "--autofree", again, "||", "goto", "reboot")
	}
	s.reboot()
}

func (s *script) reboot() {
	s.line(":reboot")
	s.line("sleep", strconv.Itoa(rebootDelay))
	s.line("reboot")
}
