package syslogd

import "strings"

// Redacted stands in for what RedactURLs removes from a URL.
const Redacted = "(redacted)"

// RedactURLs returns s with every URL in it (a run of non-space bytes around "://") cut
// down to what is not a machine's secret: its query is replaced by "?(redacted)", and so
// is every path segment that could be a token: 16 or more of [A-Za-z0-9_-], unless it is
// a SHA-256 digest (64 hexadecimal digits, which names an image, not who may read it).
// iPXE prints each URL it fetches, and a boot's URLs carry its secrets: the boot nonce in
// the script's query, the cache grant in an image's path. A console line is kept and shown
// to operators, so it must not carry them.
func RedactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			break
		}
		// The URL starts after the last space before "://" and ends at the next space.
		start := strings.LastIndexAny(s[:i], " \t") + 1
		end := i + 3 + strings.IndexAny(s[i+3:], " \t")
		if end < i+3 {
			end = len(s)
		}
		// iPXE prints "URL... ok": the dots are not the URL's.
		for end > i+3 && s[end-1] == '.' {
			end--
		}
		b.WriteString(s[:start])
		b.WriteString(redactURL(s[start:end]))
		s = s[end:]
	}
	return b.String()
}

// redactURL redacts one URL: scheme and authority as they are, the path segment by
// segment, no query (nor fragment) kept.
func redactURL(u string) string {
	i := strings.Index(u, "://") + 3
	head, rest := u[:i], u[i:]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		head, rest = head+rest[:j], rest[j:]
	} else if j := strings.IndexAny(rest, "?#"); j >= 0 {
		head, rest = head+rest[:j], rest[j:]
	} else {
		return u
	}
	path, query := rest, ""
	if j := strings.IndexAny(rest, "?#"); j >= 0 {
		path, query = rest[:j], rest[j:]
	}
	segs := strings.Split(path, "/")
	for k, seg := range segs {
		if tokenLike(seg) {
			segs[k] = Redacted
		}
	}
	out := head + strings.Join(segs, "/")
	if query != "" {
		out += "?" + Redacted
	}
	return out
}

// tokenLike reports whether seg could be a secret token: 16 or more of [A-Za-z0-9_-],
// and not a SHA-256 digest in hexadecimal.
func tokenLike(seg string) bool {
	if len(seg) < 16 {
		return false
	}
	hex := len(seg) == 64
	for k := 0; k < len(seg); k++ {
		c := seg[k]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'Z', c >= 'g' && c <= 'z', c == '-', c == '_':
			hex = false
		default:
			return false
		}
	}
	return !hex
}
