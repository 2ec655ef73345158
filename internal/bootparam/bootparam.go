// Package bootparam holds what siteboot's boot-script renderers (ipxe for iPXE, grubcfg for
// GRUB) share: the bounds of a script's back-off and sleeps and the rule for a kernel
// parameter's name. They are the same whatever language the script is written in, so they
// are written once; each renderer keeps its own quoting rules and wraps a [Problem] in its
// own typed error.
package bootparam

import (
	"fmt"
	"time"
)

// The bounds both renderers export under their own names.
const (
	DefaultAttempts   = 4                // tries of a script's fetch
	MaxAttempts       = 16               // most tries
	DefaultDelay      = 2 * time.Second  // the first back-off; each further one doubles
	DefaultMaxDelay   = 30 * time.Second // the longest back-off
	MaxSleep          = time.Hour        // the longest sleep a script holds
	MaxValueLen       = 1024             // the longest parameter value or command-line token
	MaxNameLen        = 64               // the longest parameter name
	DefaultMaxCmdline = 2048             // Linux's COMMAND_LINE_SIZE on x86 and arm64
	ReservedPrefix    = "bc."            // the boot parameters' names; a site's tokens may not use it
)

// Problem is a value a renderer cannot write: Field names it and Reason says why. Unsafe
// marks a value that would change what the script does (a renderer's ErrUnsafe); otherwise
// it is merely out of range (ErrInvalid).
type Problem struct {
	Field, Reason string
	Unsafe        bool
}

// Sleeps returns a fetch's back-off after each failed attempt but the last, in seconds:
// attempts tries (0: DefaultAttempts), sleeping delay after the first failure (0:
// DefaultDelay), doubling up to maxDelay (0: DefaultMaxDelay, or delay if longer). loader
// names the script's language in the reason for a sleep that is not whole seconds.
func Sleeps(attempts int, delay, maxDelay time.Duration, loader string) ([]int, *Problem) {
	if attempts == 0 {
		attempts = DefaultAttempts
	}
	if attempts < 1 || attempts > MaxAttempts {
		return nil, &Problem{Field: "retry.attempts", Reason: fmt.Sprintf("must be 1..%d", MaxAttempts)}
	}
	d, p := Seconds("retry.delay", delay, DefaultDelay, loader)
	if p != nil {
		return nil, p
	}
	m, p := Seconds("retry.max_delay", maxDelay, max(DefaultMaxDelay, time.Duration(d)*time.Second), loader)
	if p != nil {
		return nil, p
	}
	if m < d {
		return nil, &Problem{Field: "retry.max_delay", Reason: "shorter than retry.delay"}
	}
	out := make([]int, attempts-1)
	for i := range out {
		out[i] = d
		d = min(2*d, m)
	}
	return out, nil
}

// Seconds converts a sleep to whole seconds, 1 s to MaxSleep; zero means def.
func Seconds(field string, d, def time.Duration, loader string) (int, *Problem) {
	if d == 0 {
		d = def
	}
	if d < time.Second || d > MaxSleep {
		return 0, &Problem{Field: field, Reason: fmt.Sprintf("must be 1s..%s", MaxSleep)}
	}
	if d%time.Second != 0 {
		return 0, &Problem{Field: field, Reason: "must be whole seconds (" + loader + " sleeps in seconds)"}
	}
	return int(d / time.Second), nil
}

// CheckName checks a kernel parameter name: [A-Za-z0-9][A-Za-z0-9._-]*, at most MaxNameLen
// bytes. unsafe says why a byte would change the script's meaning in the renderer's
// language, or "" for one that is merely not allowed.
func CheckName(field, s string, unsafe func(byte) string) *Problem {
	if s == "" {
		return &Problem{Field: field, Reason: "empty name"}
	}
	if len(s) > MaxNameLen {
		return &Problem{Field: field, Reason: fmt.Sprintf("name longer than %d bytes", MaxNameLen), Unsafe: true}
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if alnum || i > 0 && (b == '.' || b == '_' || b == '-') {
			continue
		}
		if r := unsafe(b); r != "" {
			return &Problem{Field: field, Reason: "name: " + r, Unsafe: true}
		}
		return &Problem{Field: field, Reason: fmt.Sprintf("name: character %q", b), Unsafe: true}
	}
	return nil
}
