package bootevents

import (
	"unicode"
	"unicode/utf8"
)

// Printable returns s with everything that is not printable text removed: control
// characters (a tab or a line break becomes one space), escape sequences' introducers,
// invalid UTF-8 and non-printing runes; leading and trailing spaces trimmed; at most max
// bytes, cut at a rune boundary. It allocates only when it changes s. A console line or a
// detail from the network is put through it before it is kept or shown.
func Printable(s string, max int) string {
	clean := len(s) <= max
	for i := 0; clean && i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
		}
	}
	if clean && (len(s) == 0 || (s[0] != ' ' && s[len(s)-1] != ' ')) {
		return s
	}
	b := make([]byte, 0, min(len(s), max))
	space := false
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == ' ':
			space = len(b) > 0
			continue
		case r == utf8.RuneError || !unicode.IsPrint(r):
			continue
		}
		n := utf8.RuneLen(r)
		if space {
			n++
		}
		if len(b)+n > max {
			break
		}
		if space {
			b = append(b, ' ')
			space = false
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}
