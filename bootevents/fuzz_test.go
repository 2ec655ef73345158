package bootevents_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/bettercompute/siteboot/bootevents"
)

// FuzzPrintable checks that Printable keeps only printable text within its bound, and
// that it is idempotent.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"ipxe: ok", "\x1b[2J\x00line\r\n", "  a\tb  ", "\xff\xfe", "é漢字", strings.Repeat("x", 300)} {
		f.Add(s, 40)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1000 {
			return
		}
		p := bootevents.Printable(s, max)
		if len(p) > max || !utf8.ValidString(p) || strings.TrimSpace(p) != p {
			t.Fatalf("Printable(%q, %d) = %q", s, max, p)
		}
		for _, r := range p {
			if !unicode.IsPrint(r) {
				t.Fatalf("Printable(%q) kept %U", s, r)
			}
		}
		if again := bootevents.Printable(p, max); again != p {
			t.Fatalf("Printable not idempotent: %q then %q", p, again)
		}
	})
}

// FuzzDecodeMachine checks that a timeline's JSON (what explain reads from an agent)
// decodes without panic and encodes back to a form that decodes to the same thing.
func FuzzDecodeMachine(f *testing.F) {
	f.Add(`{"mac":"52:54:00:00:00:0a","answered":true,"boots":[{"boot_ids":["0011223344556677"],"start":"2026-12-05T10:00:00Z","last":"2026-12-05T10:00:00Z","events":[{"time":"2026-12-05T10:00:00Z","mac":"52:54:00:00:00:0a","stage":"dhcpv4","outcome":"refused","reason":"arch-mismatch","arch":"bios"}]}]}`)
	f.Add(`{"boots":[{"events":[{"stage":"warp"}]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var m bootevents.Machine
		if json.Unmarshal([]byte(s), &m) != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var back bootevents.Machine
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(b) {
			t.Fatalf("not stable:\n%s\n%s", b, again)
		}
		_ = bootevents.Explain(m, true, bootevents.Facts{})
	})
}
