package ipxe

import (
	"sort"
	"strconv"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

// Defaults used when the corresponding field is zero.
const (
	// DefaultAttempts is how many times a script tries its fetch ([Retry.Attempts]).
	DefaultAttempts = bootscript.DefaultAttempts
	// MaxAttempts bounds [Retry.Attempts].
	MaxAttempts = bootscript.MaxAttempts
	// DefaultDelay is the first back-off ([Retry.Delay]); each further one doubles.
	DefaultDelay = bootscript.DefaultDelay
	// DefaultMaxDelay caps the back-off ([Retry.MaxDelay]).
	DefaultMaxDelay = bootscript.DefaultMaxDelay
	// MaxSleep bounds every sleep a script holds.
	MaxSleep = bootscript.MaxSleep
	// DefaultFencedDelay is how long the fenced script waits before it gives up (exit 1).
	DefaultFencedDelay = bootscript.DefaultFencedDelay
	// DefaultWaitDelay is how long the wait-and-retry script sleeps.
	DefaultWaitDelay = bootscript.DefaultWaitDelay
	// DefaultInterface is the iPXE network device whose MAC and IP the chain script sends:
	// iPXE's "netX", the device it opened last, which is the one it booted from (iPXE's
	// find_netdev and its "netX" settings block, src/net/netdevice.c and
	// src/net/netdev_settings.c). A machine with several NICs thus reports the NIC that got
	// the proxy offer, not its first one.
	DefaultInterface = "netX"
)

// Param is one kernel command-line parameter, rendered as Name=Value. Name is
// [A-Za-z0-9][A-Za-z0-9._-]*; Value is printable ASCII without space, '"', backslash or '$' (it
// may be empty). It is the type package grubcfg renders too.
type Param = bootscript.Param

// Retry is the bounded back-off of a script's fetch: Attempts tries (1..MaxAttempts; 0 means
// DefaultAttempts), sleeping Delay (whole seconds; 0 means DefaultDelay) after the first
// failure, doubling up to MaxDelay (whole seconds, >= Delay; 0 means DefaultMaxDelay, or
// Delay if larger). When every attempt has failed the script chains to its fallback URL
// (and, when that fails too, waits 10 s and reboots, so the firmware asks DHCP again and
// finds whichever agent is active now), or, without one, gives up with "exit 1" so that the
// firmware boots its next boot entry. It is the type package grubcfg takes too.
type Retry = bootscript.Retry

// lang is iPXE as the renderer core knows it: its sentinels, and what its syntax makes of a
// byte in a word and of a whole token.
//
// The grammar behind it: iPXE splits a script into lines at '\n', joins a line ending in a
// backslash with the next, strips a trailing '\r', splits a line into tokens at isspace(),
// ends a command at a token "||", "&&" or ";", starts a comment at a token beginning with
// '#', and expands "${name}" inside every token (again and again, so a value holding "${"
// would expand the next time round). It has no quoting at all. Linux then splits the kernel
// command line at its own isspace() (which includes byte 0xA0) and treats '"' as a quote that
// can join words. A word is therefore printable ASCII other than space, '"', backslash and
// '$' (the core's rules, with iPXE's reasons for the last two); a leading '#', "||", "&&" and
// ";" are refused where a value stands as a whole token.
var lang = &bootscript.Lang{
	Name:       "iPXE",
	ErrUnsafe:  ErrUnsafe,
	ErrInvalid: ErrInvalid,
	Syntax: func(b byte) string {
		switch b {
		case '\\':
			return `backslash (iPXE line continuation)`
		case '$':
			return `'$' (iPXE setting expansion)`
		}
		return ""
	},
	Token: func(s string) string {
		switch {
		case s[0] == '#':
			return "'#' starts an iPXE comment"
		case s == "||" || s == "&&" || s == ";":
			return "an iPXE command separator"
		}
		return ""
	},
}

// script accumulates the lines of one script; it writes the core's plans
// ([bootscript.Writer]).
type script struct{ b []byte }

var _ bootscript.Writer = (*script)(nil)

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

// Label writes ":name", where a "goto name" goes on.
func (s *script) Label(name string) { s.line(":" + name) }

// Echo writes "echo siteboot: MSG"; msg's words are tokens of their own.
func (s *script) Echo(msg string) { s.line("echo", "siteboot:", msg) }

// Sleep writes "sleep N".
func (s *script) Sleep(seconds int) { s.line("sleep", strconv.Itoa(seconds)) }

// Again chains to target in place of this script, or goes on at the reboot label.
func (s *script) Again(target string) {
	s.line("chain", "--replace", "--autofree", target, "||", "goto", bootscript.LabelReboot)
}

// Reboot writes "reboot".
func (s *script) Reboot() { s.line("reboot") }

// GiveUp writes "exit 1": iPXE returns a failure to the firmware, which boots its next boot
// entry (a plain "exit" returns success, on which UEFI opens its Boot Manager instead; a
// BIOS goes on to its next boot device either way).
func (s *script) GiveUp() { s.line("exit", "1") }

// SiteParams returns a site's boot parameters, named without the ReservedPrefix ("gateway"
// for "bc.gateway"), as Params in a stable order: by name. Config.Validate checks them.
func SiteParams(m map[string]string) []Param {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]Param, 0, len(names))
	for _, k := range names {
		out = append(out, Param{Name: ReservedPrefix + k, Value: m[k]})
	}
	return out
}
