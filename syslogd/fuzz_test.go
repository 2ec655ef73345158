package syslogd_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/bettercompute/siteboot/syslogd"
)

// FuzzParse checks that Parse never panics, that what it accepts rebuilt in its own form
// parses to the same message, and that CleanText leaves only printable text.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"<14>ipxe: Booting\n", "<11>node7.example.net ipxe: failed\n", "<165>1 2026-12-05T10:00:00Z h a 1 m [x@1 a=\"b\"] msg",
		"<30>Dec  5 10:00:00 host tag: text", "<0>", "<14>\x1b[31mred\x1b[0m",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := syslogd.Parse(b)
		if err != nil {
			if syslogd.ReasonOf(err) != "malformed" {
				t.Fatalf("Parse error %v is not malformed", err)
			}
			return
		}
		if m.Facility > 23 || m.Severity > 7 {
			t.Fatalf("facility %d severity %d", m.Facility, m.Severity)
		}
		if m.Format == syslogd.RFC3164 && m.App != "" {
			head := m.App
			if m.Hostname != "" {
				head = m.Hostname + " " + m.App
			}
			re := fmt.Sprintf("<%d>%s: %s", int(m.Facility)*8+int(m.Severity), head, m.Text)
			back, err := syslogd.Parse([]byte(re))
			if err != nil || back != m {
				t.Fatalf("%q parsed to %+v; rebuilt as %q it parses to %+v, %v", b, m, re, back, err)
			}
		}
		c := syslogd.CleanText(m.Text, 160)
		if len(c) > 160 {
			t.Fatalf("CleanText kept %d bytes", len(c))
		}
		for _, r := range c {
			if !unicode.IsPrint(r) {
				t.Fatalf("CleanText(%q) kept %U", m.Text, r)
			}
		}
		// Redacting is idempotent and never adds a byte but its own marks.
		r := syslogd.RedactURLs(c)
		if again := syslogd.RedactURLs(r); again != r {
			t.Fatalf("RedactURLs(%q) = %q, and again %q", c, r, again)
		}
		if strings.Count(r, syslogd.Redacted) == 0 && r != c {
			t.Fatalf("RedactURLs(%q) = %q, changed without a mark", c, r)
		}
	})
}
