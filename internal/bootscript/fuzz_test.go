package bootscript_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

// linuxSplit splits a kernel command line where Linux could end or join a word: at its
// isspace() (0xa0 included) and at '"', which starts or ends a quoted stretch.
func linuxSplit(line string) []string {
	return strings.FieldsFunc(line, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == 0xa0 || r == '"'
	})
}

// FuzzCmdline assembles a command line from arbitrary parameters and tokens. Either it is
// refused with a *ValueError wrapping the language's sentinels and not echoing the value,
// or the line Linux would read has exactly the words given, in order, each parameter once
// as Name=Value, within the cap and with no byte the language reads as syntax.
func FuzzCmdline(f *testing.F) {
	for _, s := range []struct {
		name, value, tok string
		limit            uint16
	}{
		{"bc.token", "bcjt_01k5w.c2VjcmV0", "console=ttyS0,115200n8", 0},
		{"bc.x", "", "quiet", 20},
		{"console", "a b", "bc.token=x", 0},
		{"x$y", "${evil}", "#", 0},
		{"bc.a", "x\nreboot", "a'b", 0},
		{"bc.a", "x\xa0bc.evil=1", `a="b c"`, 64},
		{"", "\"", "console", 0},
	} {
		f.Add(s.name, s.value, s.tok, s.limit)
	}
	f.Fuzz(func(t *testing.T, name, value, tok string, limit uint16) {
		params := []bootscript.Param{{Name: name, Value: value}, {Name: "bc.assertion", Value: tok}}
		tokens := []string{tok, "quiet"}
		lead := []string{"initrd=initrd0"}
		args, err := testLang.Cmdline(lead, params, tokens, int(limit))
		if err != nil {
			var ve *bootscript.ValueError
			if !errors.As(err, &ve) || !(errors.Is(err, errUnsafe) || errors.Is(err, errInvalid)) {
				t.Fatalf("error %v is not a *ValueError of the language", err)
			}
			for _, v := range []string{value, tok} {
				if len(v) > 3 && strings.Contains(err.Error(), v) {
					t.Fatalf("error echoes the value %q: %v", v, err)
				}
			}
			return
		}
		want := []string{"initrd=initrd0", name + "=" + value, "bc.assertion=" + tok, tok, "quiet"}
		if strings.Join(args, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("args %q, want %q", args, want)
		}
		line := strings.Join(args, " ")
		if got := linuxSplit(line); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("Linux reads %q as %q, not %q", line, got, want)
		}
		cap := int(limit)
		if cap == 0 {
			cap = bootscript.DefaultMaxCmdline
		}
		if n := bootscript.Length(args); n > cap || n != len(line)+1 {
			t.Fatalf("length %d for a %d-byte line, cap %d", n, len(line), cap)
		}
		for i := 0; i < len(line); i++ {
			if r := testLang.ByteReason(line[i]); r != "" && line[i] != ' ' {
				t.Fatalf("byte %q (%s) in the line %q", line[i], r, line)
			}
		}
		if strings.HasPrefix(tok, "#") || strings.HasPrefix(tok, bootscript.ReservedPrefix) {
			t.Fatalf("token %q accepted", tok)
		}
	})
}

// FuzzCheckWord: a word is accepted exactly when it is at most MaxValueLen bytes of printable
// ASCII other than space, '"', backslash, '$' and the language's own byte.
func FuzzCheckWord(f *testing.F) {
	for _, s := range []string{"", "bc.token=x", "a b", "${x}", "x\\", "'", "\"", "\xa0", "\x7f", strings.Repeat("x", bootscript.MaxValueLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s) <= bootscript.MaxValueLen
		for i := 0; i < len(s); i++ {
			b := s[i]
			if b <= ' ' || b >= 0x7f || strings.IndexByte(`"\$'`, b) >= 0 {
				want = false
			}
		}
		err := testLang.CheckWord("v", s)
		if (err == nil) != want {
			t.Fatalf("CheckWord(%q) = %v, want accepted %v", s, err, want)
		}
		if err != nil && !errors.Is(err, errUnsafe) {
			t.Fatalf("CheckWord(%q) = %v, not ErrUnsafe", s, err)
		}
	})
}
