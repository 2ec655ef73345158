package bootscript

import (
	"fmt"
	"strings"
	"time"
)

// The bounds both renderers export under their own names.
const (
	DefaultAttempts    = 4                // tries of a script's fetch
	MaxAttempts        = 16               // most tries
	DefaultDelay       = 2 * time.Second  // the first back-off; each further one doubles
	DefaultMaxDelay    = 30 * time.Second // the longest back-off
	MaxSleep           = time.Hour        // the longest sleep a script holds
	DefaultFencedDelay = 10 * time.Second // the fenced script's wait before it gives up
	DefaultWaitDelay   = 30 * time.Second // the wait-and-retry script's sleep
	RebootDelay        = 10               // seconds a script whose server is gone waits before it reboots
	MaxURLLen          = 2048             // the longest URL a renderer accepts
	MaxValueLen        = 1024             // the longest parameter value or command-line token
	MaxNameLen         = 64               // the longest parameter name
	MaxInitrds         = 16               // the most initrds a boot script loads
	DefaultMaxCmdline  = 2048             // Linux's COMMAND_LINE_SIZE on x86 and arm64
	ReservedPrefix     = "bc."            // the boot parameters' names; a site's tokens may not use it
)

// Param is one kernel command-line parameter, rendered as Name=Value. Name is
// [A-Za-z0-9][A-Za-z0-9._-]*; Value is printable ASCII without space, '"', backslash, '$' or
// a byte the renderer's language reads as syntax (it may be empty).
type Param struct {
	Name  string
	Value string
}

// Retry is the bounded back-off of a script's fetch: Attempts tries, sleeping Delay after the
// first failure, doubling up to MaxDelay. When every attempt has failed the script loads its
// fallback (and when that fails too, waits RebootDelay seconds and reboots), or, without
// one, gives up so that the firmware boots something else (see [Attempts]).
type Retry struct {
	Attempts int           // 1..MaxAttempts; 0 means DefaultAttempts
	Delay    time.Duration // whole seconds; 0 means DefaultDelay
	MaxDelay time.Duration // whole seconds, >= Delay; 0 means DefaultMaxDelay (or Delay if larger)
}

// Lang is what the core needs to know of one script language.
type Lang struct {
	// Name names the language in reasons ("iPXE", "GRUB").
	Name string
	// ErrUnsafe and ErrInvalid are the renderer's sentinels (see [NewSentinel]); every
	// [ValueError] the core returns wraps one of them.
	ErrUnsafe, ErrInvalid error
	// Syntax says why the language reads byte b as syntax inside a kernel command-line word,
	// or "" when it does not. It is asked before the core's own rules, so it may also give a
	// more precise reason for a byte the core refuses anyway. Nil: no byte of its own.
	Syntax func(b byte) string
	// Token says why the language reads s, standing as a whole token of a command, as syntax
	// (a comment, a command separator), or "" when it does not. Nil: none.
	Token func(s string) string
}

// Unsafe returns a [*ValueError] wrapping the language's ErrUnsafe.
func (l *Lang) Unsafe(field, reason string) error {
	return &ValueError{Field: field, Reason: reason, Err: l.ErrUnsafe}
}

// Invalid returns a [*ValueError] wrapping the language's ErrInvalid.
func (l *Lang) Invalid(field, reason string) error {
	return &ValueError{Field: field, Reason: reason, Err: l.ErrInvalid}
}

// ByteReason says why b cannot appear in a kernel command-line word, or "" when it can.
//
// Linux splits the kernel command line at its isspace() (which includes byte 0xa0) and
// reads '"' as a quote that can join words; a script language puts its own meaning on more
// bytes ([Lang.Syntax]). Backslash and '$' are refused in every language, so one entry
// renders the same command line on every path. A word is therefore printable ASCII other
// than space, '"', backslash, '$' and the language's own syntax.
func (l *Lang) ByteReason(b byte) string {
	if l.Syntax != nil {
		if r := l.Syntax(b); r != "" {
			return r
		}
	}
	switch {
	case b == ' ':
		return "white space"
	case b < 0x20 || b == 0x7f:
		return fmt.Sprintf("control character 0x%02x", b)
	case b >= 0x80:
		return "non-ASCII byte (Linux splits the command line at 0xa0)"
	case b == '"':
		return "double quote (Linux command-line quoting)"
	case b == '\\':
		return "backslash"
	case b == '$':
		return "'$' (variable expansion)"
	}
	return ""
}

// CheckWord checks a kernel parameter value (which may be empty): at most MaxValueLen bytes,
// none refused by [Lang.ByteReason].
func (l *Lang) CheckWord(field, s string) error {
	if len(s) > MaxValueLen {
		return l.Unsafe(field, fmt.Sprintf("longer than %d bytes", MaxValueLen))
	}
	for i := 0; i < len(s); i++ {
		if r := l.ByteReason(s[i]); r != "" {
			return l.Unsafe(field, r)
		}
	}
	return nil
}

// CheckToken checks a command-line token the site gives: a word that is not empty and that
// the language does not read as syntax when it stands as a whole token ([Lang.Token]).
func (l *Lang) CheckToken(field, s string) error {
	if s == "" {
		return l.Invalid(field, "empty")
	}
	if err := l.CheckWord(field, s); err != nil {
		return err
	}
	if l.Token != nil {
		if r := l.Token(s); r != "" {
			return l.Unsafe(field, r)
		}
	}
	return nil
}

// CheckName checks a kernel parameter name: [A-Za-z0-9][A-Za-z0-9._-]*, at most MaxNameLen
// bytes.
func (l *Lang) CheckName(field, s string) error {
	if s == "" {
		return l.Invalid(field, "empty name")
	}
	if len(s) > MaxNameLen {
		return l.Unsafe(field, fmt.Sprintf("name longer than %d bytes", MaxNameLen))
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if alnum || i > 0 && (b == '.' || b == '_' || b == '-') {
			continue
		}
		if r := l.ByteReason(b); r != "" {
			return l.Unsafe(field, "name: "+r)
		}
		return l.Unsafe(field, fmt.Sprintf("name: character %q", b))
	}
	return nil
}

// Cmdline checks and assembles a kernel command line: lead (words the renderer made itself,
// such as initrd=NAME), then params as Name=Value (names unique), then the site's tokens,
// none of which may set a parameter of params or one named ReservedPrefix*. The line,
// counted as each word and a separator, may be at most limit bytes (0: DefaultMaxCmdline).
// Fields are named "params[i]" (a bad name), "params[NAME]", "cmdline[i]" and "cmdline".
func (l *Lang) Cmdline(lead []string, params []Param, tokens []string, limit int) ([]string, error) {
	args := make([]string, 0, len(lead)+len(params)+len(tokens))
	args = append(args, lead...)
	seen := make(map[string]bool, len(params))
	for i, p := range params {
		if err := l.CheckName(fmt.Sprintf("params[%d]", i), p.Name); err != nil {
			return nil, err
		}
		field := "params[" + p.Name + "]" // the name is safe to show from here on
		if seen[p.Name] {
			return nil, l.Invalid(field, "parameter given twice")
		}
		seen[p.Name] = true
		if err := l.CheckWord(field, p.Value); err != nil {
			return nil, err
		}
		args = append(args, p.Name+"="+p.Value)
	}
	for i, t := range tokens {
		field := fmt.Sprintf("cmdline[%d]", i)
		if err := l.CheckToken(field, t); err != nil {
			return nil, err
		}
		name, _, _ := strings.Cut(t, "=")
		if strings.HasPrefix(name, ReservedPrefix) || seen[name] {
			return nil, l.Invalid(field, "sets a boot parameter ("+ReservedPrefix+"*) reserved for Params")
		}
		args = append(args, t)
	}
	if limit == 0 {
		limit = DefaultMaxCmdline
	}
	if n := Length(args); n > limit {
		return nil, l.Invalid("cmdline", fmt.Sprintf("kernel command line is %d bytes, over %d", n, limit))
	}
	return args, nil
}

// Length is the length of a command line of args as [Lang.Cmdline] counts it: each word and
// a separator.
func Length(args []string) int {
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	return n
}

// CheckInitrds checks how many initrds a boot script loads: at most MaxInitrds.
func (l *Lang) CheckInitrds(n int) error {
	if n > MaxInitrds {
		return l.Invalid("initrds", fmt.Sprintf("more than %d initrds", MaxInitrds))
	}
	return nil
}

// Sleeps returns r's back-off after each failed attempt but the last, in seconds.
func (l *Lang) Sleeps(r Retry) ([]int, error) {
	attempts := r.Attempts
	if attempts == 0 {
		attempts = DefaultAttempts
	}
	if attempts < 1 || attempts > MaxAttempts {
		return nil, l.Invalid("retry.attempts", fmt.Sprintf("must be 1..%d", MaxAttempts))
	}
	d, err := l.Seconds("retry.delay", r.Delay, DefaultDelay)
	if err != nil {
		return nil, err
	}
	m, err := l.Seconds("retry.max_delay", r.MaxDelay, max(DefaultMaxDelay, time.Duration(d)*time.Second))
	if err != nil {
		return nil, err
	}
	if m < d {
		return nil, l.Invalid("retry.max_delay", "shorter than retry.delay")
	}
	out := make([]int, attempts-1)
	for i := range out {
		out[i] = d
		d = min(2*d, m)
	}
	return out, nil
}

// Seconds converts a sleep to whole seconds, 1 s to MaxSleep; zero means def.
func (l *Lang) Seconds(field string, d, def time.Duration) (int, error) {
	if d == 0 {
		d = def
	}
	if d < time.Second || d > MaxSleep {
		return 0, l.Invalid(field, fmt.Sprintf("must be 1s..%s", MaxSleep))
	}
	if d%time.Second != 0 {
		return 0, l.Invalid(field, "must be whole seconds ("+l.Name+" sleeps in seconds)")
	}
	return int(d / time.Second), nil
}
