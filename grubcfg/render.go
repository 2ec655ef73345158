package grubcfg

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/internal/bootparam"
)

// Defaults used when the corresponding field is zero.
const (
	// DefaultAttempts is how many times a configuration tries its fetch ([Retry.Attempts]).
	DefaultAttempts = bootparam.DefaultAttempts
	// MaxAttempts bounds [Retry.Attempts].
	MaxAttempts = bootparam.MaxAttempts
	// DefaultDelay is the first back-off ([Retry.Delay]); each further one doubles.
	DefaultDelay = bootparam.DefaultDelay
	// DefaultMaxDelay caps the back-off ([Retry.MaxDelay]).
	DefaultMaxDelay = bootparam.DefaultMaxDelay
	// MaxSleep bounds every sleep a configuration holds.
	MaxSleep = bootparam.MaxSleep
	// DefaultFencedDelay is how long the fenced configuration waits before it reboots.
	DefaultFencedDelay = 10 * time.Second
	// DefaultWaitDelay is how long the wait-and-retry configuration sleeps.
	DefaultWaitDelay = 30 * time.Second
	// rebootDelay is the pause before a configuration that has given up reboots.
	rebootDelay = 10
)

// Param is one kernel command-line parameter, rendered as Name=Value. Name is
// [A-Za-z0-9][A-Za-z0-9._-]*; Value is printable ASCII without space, quotes, backslash or
// '$' (it may be empty).
type Param struct {
	Name  string
	Value string
}

// Retry is the bounded back-off of a configuration's fetch: Attempts tries, sleeping Delay
// after the first failure, doubling up to MaxDelay.
type Retry struct {
	Attempts int           // 1..MaxAttempts; 0 means DefaultAttempts
	Delay    time.Duration // whole seconds; 0 means DefaultDelay
	MaxDelay time.Duration // whole seconds, >= Delay; 0 means DefaultMaxDelay (or Delay if larger)
}

// sleeps returns the back-off after each failed attempt but the last, in seconds.
func (r Retry) sleeps() ([]int, error) {
	s, p := bootparam.Sleeps(r.Attempts, r.Delay, r.MaxDelay, "GRUB")
	return s, problemErr(p)
}

// seconds converts a sleep to whole seconds, 1 s to MaxSleep; zero means def.
func seconds(field string, d, def time.Duration) (int, error) {
	n, p := bootparam.Seconds(field, d, def, "GRUB")
	return n, problemErr(p)
}

// config accumulates the lines of one configuration.
type config struct{ b strings.Builder }

func newConfig(comment string) *config {
	c := &config{}
	c.b.WriteString("# siteboot: ")
	c.b.WriteString(comment)
	c.b.WriteString("\nset timeout=0\n")
	return c
}

// line writes one line: indent, then words that are GRUB syntax already known to be safe.
func (c *config) line(indent int, words ...string) {
	c.b.WriteString(strings.Repeat("\t", indent))
	c.b.WriteString(strings.Join(words, " "))
	c.b.WriteByte('\n')
}

// quote single-quotes a value the caller has checked holds no single quote.
func quote(s string) string { return "'" + s + "'" }

func (c *config) echo(words ...string) {
	c.line(0, "echo", quote("siteboot: "+strings.Join(words, " ")))
}

// attempts writes the retry sequence: body(indent) writes one attempt's commands, nested so
// that the configuration moves on only when they fail; between attempts it echoes and
// sleeps; after the last it loads again (when set) or waits and reboots.
func (c *config) attempts(sleeps []int, again string, body func()) {
	n := len(sleeps) + 1
	for i := 1; i <= n; i++ {
		body()
		if i < n {
			d := strconv.Itoa(sleeps[i-1])
			c.echo("attempt", strconv.Itoa(i), "of", strconv.Itoa(n), "failed, retrying in", d, "s")
			c.line(0, "sleep", d)
		}
	}
	c.echo("giving up after", strconv.Itoa(n), "attempts")
	if again != "" {
		c.line(0, "configfile", quote(again))
	}
	c.reboot()
}

func (c *config) reboot() {
	c.line(0, "sleep", strconv.Itoa(rebootDelay))
	c.line(0, "reboot")
}

func (c *config) bytes() []byte { return []byte(c.b.String()) }

// Boot is the machine's ramdisk configuration: load the kernel (which shim verifies) with
// the kernel command line, then the initrds, then boot, retrying the whole sequence with
// back-off. The command line is Params as Name=Value, then Cmdline; nothing in a value can
// add a parameter, a command or a line (see [ErrUnsafe]).
type Boot struct {
	Kernel  string   // http or tftp URL of the kernel
	Initrds []string // URLs of the initrds, in order (at most 16)
	Params  []Param  // the boot parameters (bc.*), rendered first; names unique
	Cmdline []string // the site's own command line, one token each ("console=ttyS0")

	Retry Retry
	// Again is the configuration loaded when every attempt failed, normally the agent's
	// per-machine URL again; empty means wait 10 s and reboot.
	Again string
	// MaxCmdline bounds the kernel command line in bytes; 0 means DefaultMaxCmdline.
	MaxCmdline int
}

// Render returns the configuration, or a [*ValueError] when a value is refused.
func (b Boot) Render() ([]byte, error) {
	kernel, err := grubPath("kernel", b.Kernel)
	if err != nil {
		return nil, err
	}
	if len(b.Initrds) > 16 {
		return nil, invalidErr("initrds", "more than 16 initrds")
	}
	initrds := make([]string, len(b.Initrds))
	for i, u := range b.Initrds {
		if initrds[i], err = grubPath(fmt.Sprintf("initrds[%d]", i), u); err != nil {
			return nil, err
		}
	}
	args := make([]string, 0, len(b.Params)+len(b.Cmdline))
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
		if t == "" {
			return nil, invalidErr(field, "empty")
		}
		if err := checkWord(field, t); err != nil {
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
	again := ""
	if b.Again != "" {
		if again, err = grubPath("again", b.Again); err != nil {
			return nil, err
		}
	}
	sleeps, err := b.Retry.sleeps()
	if err != nil {
		return nil, err
	}
	linux := make([]string, 0, len(args)+2)
	linux = append(linux, "if", "linux", quote(kernel))
	for _, a := range args {
		linux = append(linux, quote(a))
	}
	linux[len(linux)-1] += ";"
	linux = append(linux, "then")

	c := newConfig("boot the ramdisk")
	c.attempts(sleeps, again, func() {
		c.echo("loading the kernel")
		c.line(0, linux...)
		depth := 1
		if len(initrds) > 0 {
			words := []string{"if", "initrd"}
			for _, p := range initrds {
				words = append(words, quote(p))
			}
			words[len(words)-1] += ";"
			c.line(1, append(words, "then")...)
			depth = 2
		}
		c.line(depth, "boot")
		for d := depth - 1; d >= 0; d-- {
			c.line(d, "fi")
		}
	})
	return c.bytes(), nil
}

// Chain leads GRUB to this machine's own configuration (served as /grub/grub.cfg over TFTP;
// see the package doc). It names the machine by the MAC and the SMBIOS system UUID, and
// presents the machine's boot key (n=KEY), which ties the request to what the site sent this
// machine and nobody else. It has two forms:
//
//   - Key empty, for a GRUB loaded over PXE: each attempt sources KeyURL?mac=MAC, a
//     [KeyFile] that sets siteboot_key, then loads URL?mac=MAC&uuid=UUID&n=${siteboot_key},
//     MAC being ${net_default_mac}, the NIC GRUB booted from (efinet makes it the default
//     interface).
//   - Key set, for the configuration a RAM disk carries to a GRUB that booted from that disk
//     (UEFI HTTP boot, see the package doc): GRUB configures no network when it did not
//     boot from one, so the configuration runs net_bootp first, then loads
//     URL?mac=MAC&uuid=UUID&n=KEY with the MAC and the key it was given.
//
// UUID is what GRUB's smbios command reads from type 1, offset 8, in its canonical spelling.
type Chain struct {
	URL    string // tftp or http URL of the machine's configuration, without a query
	KeyURL string // without Key: tftp or http URL of the key file, without a query
	Key    string // the boot key itself, 1 to MaxKeyLen of [A-Za-z0-9_-]
	MAC    string // with Key: the MAC, hex digits separated by ':' or '-'
	Retry  Retry
}

// Variables a Chain sets: the SMBIOS UUID (from GRUB's smbios command) and the boot key (from
// the key file).
const (
	uuidVar = "siteboot_uuid"
	keyVar  = "siteboot_key"
)

// MaxKeyLen bounds a boot key ([Chain.Key], [KeyFile.Key]).
const MaxKeyLen = 64

func checkKey(field, s string) error {
	if s == "" || len(s) > MaxKeyLen {
		return invalidErr(field, fmt.Sprintf("a boot key is 1 to %d characters", MaxKeyLen))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return unsafeErr(field, fmt.Sprintf("character %q is not allowed in a boot key", c))
		}
	}
	return nil
}

func checkMAC(field, s string) error {
	if s == "" || len(s) > 32 {
		return invalidErr(field, "want a MAC address")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c >= '0' && c <= '9' || c == ':' || c == '-') {
			return unsafeErr(field, fmt.Sprintf("character %q is not allowed in a MAC address", c))
		}
	}
	return nil
}

// chainURL checks a Chain URL: a GRUB file name without a query.
func chainURL(field, u string) (string, error) {
	p, err := grubPath(field, u)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(p, "?") {
		return "", invalidErr(field, "may not have a query")
	}
	return p, nil
}

// Render returns the configuration, or a [*ValueError] when a value is refused.
func (c Chain) Render() ([]byte, error) {
	p, err := chainURL("url", c.URL)
	if err != nil {
		return nil, err
	}
	var keyFile, mac, key string
	if c.Key == "" {
		if keyFile, err = chainURL("key_url", c.KeyURL); err != nil {
			return nil, err
		}
		mac, key = "${net_default_mac}", "${"+keyVar+"}"
	} else {
		if err := checkKey("key", c.Key); err != nil {
			return nil, err
		}
		if err := checkMAC("mac", c.MAC); err != nil {
			return nil, err
		}
		mac, key = c.MAC, c.Key
	}
	sleeps, err := c.Retry.sleeps()
	if err != nil {
		return nil, err
	}
	// Double quotes, so that GRUB expands the variables; p, mac and key hold no '"', '$' or
	// backslash (grubPath, checkMAC and checkKey refuse them), so nothing else in them is
	// special there.
	target := `"` + p + `?mac=` + mac + `&uuid=${` + uuidVar + `}&n=` + key + `"`
	cfg := newConfig("load this machine's configuration")
	if c.Key != "" {
		cfg.line(0, "net_bootp")
	}
	cfg.line(0, "smbios", "--type", "1", "--get-uuid", "8", "--set", uuidVar)
	cfg.attempts(sleeps, "", func() {
		if keyFile != "" {
			cfg.line(0, "unset", keyVar)
			cfg.line(0, "source", `"`+keyFile+`?mac=${net_default_mac}"`)
		}
		cfg.line(0, "configfile", target)
	})
	return cfg.bytes(), nil
}

// KeyFile is what a [Chain]'s key URL answers: a file GRUB sources, which sets the boot key
// the Chain then presents.
type KeyFile struct {
	Key string // 1 to MaxKeyLen of [A-Za-z0-9_-]
}

// Render returns the file, or a [*ValueError] for a bad key.
func (k KeyFile) Render() ([]byte, error) {
	if err := checkKey("key", k.Key); err != nil {
		return nil, err
	}
	return []byte("# siteboot: boot key\nset " + keyVar + "=" + quote(k.Key) + "\n"), nil
}

// Exit is the configuration for a machine without a boot entry: leave GRUB so the firmware
// falls through to its next boot option.
type Exit struct{}

// Render returns the configuration; it never fails.
func (Exit) Render() ([]byte, error) {
	c := newConfig("no boot entry for this machine; falling through to the next boot option")
	c.line(0, "exit")
	return c.bytes(), nil
}

// Fenced is the configuration a fenced boot server answers: wait, then reboot, so the
// firmware asks proxy DHCP again and reaches whichever agent is active by then.
type Fenced struct {
	Delay time.Duration // whole seconds; 0 means DefaultFencedDelay
}

// Render returns the configuration, or a [*ValueError] for a bad Delay.
func (f Fenced) Render() ([]byte, error) {
	d, err := seconds("delay", f.Delay, DefaultFencedDelay)
	if err != nil {
		return nil, err
	}
	ds := strconv.Itoa(d)
	c := newConfig("this boot server is not the active one")
	c.echo("boot server fenced, rebooting in", ds, "s")
	c.line(0, "sleep", ds)
	c.line(0, "reboot")
	return c.bytes(), nil
}

// Wait is the wait-and-retry configuration: sleep, then load URL again (normally the
// machine's own configuration); if that fails, wait 10 s and reboot.
type Wait struct {
	Delay time.Duration // whole seconds; 0 means DefaultWaitDelay
	URL   string
}

// Render returns the configuration, or a [*ValueError] when a value is refused.
func (w Wait) Render() ([]byte, error) {
	d, err := seconds("delay", w.Delay, DefaultWaitDelay)
	if err != nil {
		return nil, err
	}
	p, err := grubPath("url", w.URL)
	if err != nil {
		return nil, err
	}
	ds := strconv.Itoa(d)
	c := newConfig("not ready yet; asking again in " + ds + " s")
	c.echo("not ready, asking again in", ds, "s")
	c.line(0, "sleep", ds)
	c.line(0, "configfile", quote(p))
	c.reboot()
	return c.bytes(), nil
}
