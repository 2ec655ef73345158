package imagecache

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// The Content-Range of a source's 206 is network input: it parses only to a well-ordered
// range that formats back to the same header.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 100-199/*", "bytes 5-4/10", "bytes 0-10/10",
		"bytes -1-5/10", "bytes 1-2", "bytes +1-2/3", "bytes 9223372036854775807-9223372036854775807/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, end, size, ok := parseContentRange(s)
		if !ok {
			return
		}
		if start < 0 || end < start || (size >= 0 && end >= size) || size < -1 {
			t.Fatalf("parseContentRange(%q) = %d %d %d", s, start, end, size)
		}
		total := "*"
		if size >= 0 {
			total = fmt.Sprint(size)
		}
		again := fmt.Sprintf("bytes %d-%d/%s", start, end, total)
		s2, e2, z2, ok2 := parseContentRange(again)
		if !ok2 || s2 != start || e2 != end || z2 != size {
			t.Fatalf("round trip %q -> %q -> %d %d %d %v", s, again, s2, e2, z2, ok2)
		}
	})
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in               string
		start, end, size int64
		ok               bool
	}{
		{"bytes 0-9/10", 0, 9, 10, true},
		{"bytes 100-199/*", 100, 199, -1, true},
		{"bytes 5-4/10", 0, 0, 0, false},
		{"bytes 0-10/10", 0, 0, 0, false},
		{"bytes -1-5/10", 0, 0, 0, false},
		{"bytes 1-2", 0, 0, 0, false},
		{"bytes +1-2/3", 0, 0, 0, false},
		{"items 0-9/10", 0, 0, 0, false},
	}
	for _, tt := range tests {
		s, e, z, ok := parseContentRange(tt.in)
		if ok != tt.ok || (ok && (s != tt.start || e != tt.end || z != tt.size)) {
			t.Errorf("parseContentRange(%q) = %d %d %d %v, want %d %d %d %v", tt.in, s, e, z, ok, tt.start, tt.end, tt.size, tt.ok)
		}
	}
}

// A validator from a source goes back into an If-Range header only as a clean header value
// of bounded size; anything else is dropped whole, never cut or rewritten.
func FuzzCleanValidator(f *testing.F) {
	for _, seed := range []string{`"v1"`, `W/"x"`, "Sun, 01 Nov 2026 00:00:00 GMT", "a\r\nX-Evil: 1", " pad ", "\x00", strings.Repeat("a", 300)} {
		f.Add(seed, seed)
	}
	f.Fuzz(func(t *testing.T, etag, lastMod string) {
		got := cleanValidator(validator{ETag: etag, LastModified: lastMod})
		for _, pair := range [][2]string{{etag, got.ETag}, {lastMod, got.LastModified}} {
			in, out := pair[0], pair[1]
			if out != "" && out != in {
				t.Fatalf("%q became %q", in, out)
			}
			if out != "" && (len(out) > maxValidator || !httpguts.ValidHeaderFieldValue(out) || strings.TrimSpace(out) != out) {
				t.Fatalf("%q kept", out)
			}
		}
		if v := got.ifRange(); v != "" && v != got.ETag && v != got.LastModified {
			t.Fatalf("ifRange %q", v)
		}
	})
}

func TestCleanValidator(t *testing.T) {
	for in, keep := range map[string]bool{
		`"v1"`: true, `W/"x"`: true, "Sun, 01 Nov 2026 00:00:00 GMT": true,
		"a\r\nX-Evil: 1": false, " pad": false, "\x7f": false, "é": false, strings.Repeat("a", 257): false, "": false,
	} {
		got := cleanValidator(validator{ETag: in}).ETag
		if (got != "") != keep || (keep && got != in) {
			t.Errorf("cleanValidator(%q) = %q, keep %v", in, got, keep)
		}
	}
}
