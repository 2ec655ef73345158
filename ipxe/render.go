package ipxe

import (
	"fmt"
	"strconv"
	"strings"
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
	// DefaultInterface is the iPXE network device whose MAC and IP the chain script sends.
	DefaultInterface = "net0"
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

// Boot is the machine's ramdisk boot script: fetch the kernel and its initrds, then boot,
// retrying the whole sequence with back-off.
//
// The kernel command line is, in order: one initrd=NAME per initrd (the name EFI stubs look
// for), Params as Name=Value, then Cmdline. Nothing in a value can add a parameter, a
// command or a line: see [ErrUnsafe].
type Boot struct {
	Kernel  string   // http, https or tftp URL of the kernel (or a path "/...")
	Initrds []string // URLs of the initrds, in order
	Params  []Param  // the boot parameters (bc.*), rendered first; names unique
	Cmdline []string // the site's own command line, one token each ("console=ttyS0", "quiet")

	Retry Retry
	// Again is the URL chained when every attempt failed, normally /boot/chain.ipxe so the
	// machine asks for a fresh script; empty means wait 10 s and reboot.
	Again string
	// MaxCmdline bounds the kernel command line in bytes; 0 means DefaultMaxCmdline.
	MaxCmdline int
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (b Boot) Render() ([]byte, error) {
	if _, err := checkURL("kernel", b.Kernel, true); err != nil {
		return nil, err
	}
	if len(b.Initrds) > 16 {
		return nil, invalidErr("initrds", "more than 16 initrds")
	}
	args := make([]string, 0, len(b.Initrds)+len(b.Params)+len(b.Cmdline))
	names := make([]string, len(b.Initrds))
	for i, u := range b.Initrds {
		if _, err := checkURL(fmt.Sprintf("initrds[%d]", i), u, true); err != nil {
			return nil, err
		}
		names[i] = "initrd" + strconv.Itoa(i)
		args = append(args, "initrd="+names[i])
	}
	seen := make(map[string]bool, len(b.Params))
	for i, p := range b.Params {
		if err := checkName(fmt.Sprintf("params[%d]", i), p.Name); err != nil {
			return nil, err
		}
		field := "params[" + p.Name + "]" // the name is safe to show from here on
		if seen[p.Name] {
			return nil, invalidErr(field, "parameter given twice")
		}
		seen[p.Name] = true
		if err := checkWord(field, p.Value); err != nil {
			return nil, err
		}
		args = append(args, p.Name+"="+p.Value)
	}
	for i, t := range b.Cmdline {
		field := fmt.Sprintf("cmdline[%d]", i)
		if err := checkToken(field, t); err != nil {
			return nil, err
		}
		name, _, _ := strings.Cut(t, "=")
		if strings.HasPrefix(name, ReservedPrefix) || seen[name] {
			return nil, invalidErr(field, "sets a boot parameter ("+ReservedPrefix+"*) reserved for Params")
		}
		args = append(args, t)
	}
	limit := b.MaxCmdline
	if limit == 0 {
		limit = DefaultMaxCmdline
	}
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	if n > limit {
		return nil, invalidErr("cmdline", fmt.Sprintf("kernel command line is %d bytes, over %d", n, limit))
	}
	if b.Again != "" {
		if _, err := checkURL("again", b.Again, true); err != nil {
			return nil, err
		}
	}
	sleeps, err := b.Retry.sleeps()
	if err != nil {
		return nil, err
	}

	per := n + len(b.Kernel) + 160 // imgfree, kernel, boot, echo and sleep lines
	for _, u := range b.Initrds {
		per += len(u) + 48
	}
	s := newScript("boot the ramdisk", (len(sleeps)+1)*per)
	s.attempts(sleeps, b.Again, func(onFail string) {
		s.line("imgfree")
		kernel := make([]string, 0, len(args)+5)
		kernel = append(kernel, "kernel", b.Kernel)
		kernel = append(kernel, args...)
		s.line(append(kernel, "||", "goto", onFail)...)
		for i, u := range b.Initrds {
			s.line("initrd", "--name", names[i], u, "||", "goto", onFail)
		}
		s.line("boot", "||", "goto", onFail)
	})
	return s.bytes(), nil
}

// Sanboot is the script that boots an ISO over HTTP with range requests
// (sanboot --no-describe URL), retrying with back-off.
type Sanboot struct {
	URL   string // http or https URL of the ISO (a cache grant URL)
	Retry Retry
	Again string // chained when every attempt failed; empty: wait 10 s and reboot
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (b Sanboot) Render() ([]byte, error) {
	u, err := checkURL("url", b.URL, true)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "tftp" {
		return nil, invalidErr("url", "sanboot needs http or https (range requests)")
	}
	if b.Again != "" {
		if _, err := checkURL("again", b.Again, true); err != nil {
			return nil, err
		}
	}
	sleeps, err := b.Retry.sleeps()
	if err != nil {
		return nil, err
	}
	s := newScript("boot the ISO from the site cache", (len(sleeps)+1)*(len(b.URL)+120))
	s.attempts(sleeps, b.Again, func(onFail string) {
		s.line("sanboot", "--no-describe", b.URL, "||", "goto", onFail)
	})
	return s.bytes(), nil
}

// Chain is the script iPXE runs first: it chains to the boot script URL with the machine's
// MAC, SMBIOS UUID and IP as iPXE itself knows them:
// URL?mac=${net0/mac:hexhyp}&uuid=${uuid}&ip=${net0/ip}. iPXE formats each by its type
// (hex bytes joined by '-', the canonical UUID, a dotted quad), so the values need no
// escaping in a query. Two spellings that look right do not work with Debian's iPXE
// 1.0.0+git-20190125 (seen in QEMU): ":uristring" reformats the raw bytes as a string, so a
// MAC becomes its raw bytes and its first zero byte ends the URL; and a plain ${net0/mac}
// puts ':' in the query, which that iPXE reads as the end of a URI scheme when the URL is
// relative ("Operation not supported").
type Chain struct {
	URL       string // the boot script, e.g. "/boot/ipxe"; no query or fragment
	Interface string // iPXE network device, [a-z][a-z0-9]{0,15}; "" means DefaultInterface
	VLAN      int    // 0 for none, or a tag 1..4094
	Retry     Retry
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (c Chain) Render() ([]byte, error) {
	u, err := checkURL("url", c.URL, true)
	if err != nil {
		return nil, err
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(c.URL, "?#") {
		return nil, invalidErr("url", "chain URL may not have a query or fragment")
	}
	dev := c.Interface
	if dev == "" {
		dev = DefaultInterface
	}
	if !validInterface(dev) {
		return nil, invalidErr("interface", "must be [a-z][a-z0-9]{0,15}")
	}
	if c.VLAN < 0 || c.VLAN > 4094 {
		return nil, invalidErr("vlan", "must be 0 (none) or 1..4094")
	}
	sleeps, err := c.Retry.sleeps()
	if err != nil {
		return nil, err
	}
	ipdev := dev
	if c.VLAN != 0 {
		ipdev = dev + "-" + strconv.Itoa(c.VLAN)
	}
	target := c.URL + "?mac=${" + dev + "/mac:hexhyp}&uuid=${uuid}&ip=${" + ipdev + "/ip}"

	s := newScript("chain to this machine's boot script", (len(sleeps)+1)*(len(target)+140))
	if c.VLAN != 0 {
		s.line("isset", "${"+ipdev+"/mac}", "||", "vcreate", "--tag", strconv.Itoa(c.VLAN), dev, "||", "goto", "failed")
	}
	s.attempts(sleeps, "", func(onFail string) {
		if c.VLAN != 0 {
			s.line("isset", "${"+ipdev+"/ip}", "||", "dhcp", ipdev, "||", "goto", onFail)
		}
		s.line("chain", "--replace", "--autofree", target, "||", "goto", onFail)
	})
	return s.bytes(), nil
}

func validInterface(s string) bool {
	if len(s) == 0 || len(s) > 16 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if (s[i] < 'a' || s[i] > 'z') && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// Exit is the script for a machine without a boot entry: exit iPXE with a failure status so
// the firmware falls through to its next boot device.
type Exit struct{}

// Render returns the script; it never fails.
func (Exit) Render() ([]byte, error) {
	s := newScript("no boot entry for this machine; falling through to the next boot device", 0)
	s.line("exit", "1")
	return s.bytes(), nil
}

// Fenced is the script a fenced boot server answers: wait, then reboot, so the firmware asks
// proxy DHCP again and reaches whichever agent is active by then.
type Fenced struct {
	Delay time.Duration // whole seconds; 0 means DefaultFencedDelay
}

// Render returns the script, or a [*ValueError] for a bad Delay.
func (f Fenced) Render() ([]byte, error) {
	d, err := seconds("delay", f.Delay, DefaultFencedDelay)
	if err != nil {
		return nil, err
	}
	ds := strconv.Itoa(d)
	s := newScript("this boot server is not the active one", 0)
	s.line("echo", "siteboot:", "boot", "server", "fenced,", "rebooting", "in", ds, "s")
	s.line("sleep", ds)
	s.line("reboot")
	return s.bytes(), nil
}

// Wait is the wait-and-retry script: sleep, then chain to URL again (normally
// /boot/chain.ipxe); if that fetch fails, wait 10 s and reboot.
type Wait struct {
	Delay time.Duration // whole seconds; 0 means DefaultWaitDelay
	URL   string
}

// Render returns the script, or a [*ValueError] when a value is refused.
func (w Wait) Render() ([]byte, error) {
	d, err := seconds("delay", w.Delay, DefaultWaitDelay)
	if err != nil {
		return nil, err
	}
	if _, err := checkURL("url", w.URL, true); err != nil {
		return nil, err
	}
	ds := strconv.Itoa(d)
	s := newScript("not ready yet; asking again in "+ds+" s", len(w.URL))
	s.line("echo", "siteboot:", "not", "ready,", "asking", "again", "in", ds, "s")
	s.line("sleep", ds)
	s.line("chain", "--replace", "--autofree", w.URL, "||", "goto", "reboot")
	s.reboot()
	return s.bytes(), nil
}
