package ipxe

import (
	"strconv"
	"time"

	"github.com/bettercompute/siteboot/internal/bootparam"
)

// Defaults used when the corresponding field is zero.
const (
	// DefaultAttempts is how many times a script tries its fetch ([Retry.Attempts]).
	DefaultAttempts = bootparam.DefaultAttempts
	// MaxAttempts bounds [Retry.Attempts].
	MaxAttempts = bootparam.MaxAttempts
	// DefaultDelay is the first back-off ([Retry.Delay]); each further one doubles.
	DefaultDelay = bootparam.DefaultDelay
	// DefaultMaxDelay caps the back-off ([Retry.MaxDelay]).
	DefaultMaxDelay = bootparam.DefaultMaxDelay
	// MaxSleep bounds every sleep a script holds.
	MaxSleep = bootparam.MaxSleep
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
	s, p := bootparam.Sleeps(r.Attempts, r.Delay, r.MaxDelay, "iPXE")
	return s, problemErr(p)
}

// seconds converts a sleep to whole seconds, 1 s to MaxSleep; zero means def.
func seconds(field string, d, def time.Duration) (int, error) {
	n, p := bootparam.Seconds(field, d, def, "iPXE")
	return n, problemErr(p)
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
