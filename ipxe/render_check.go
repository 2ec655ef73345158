package ipxe

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/bettercompute/siteboot/internal/bootparam"
)

// Limits on what the renderer accepts.
const (
	// MaxURLLen is the longest URL the renderer accepts.
	MaxURLLen = 2048
	// MaxValueLen is the longest kernel parameter value or command-line token.
	MaxValueLen = bootparam.MaxValueLen
	// MaxNameLen is the longest kernel parameter name.
	MaxNameLen = bootparam.MaxNameLen
	// DefaultMaxCmdline is the longest kernel command line rendered when [Boot.MaxCmdline]
	// is zero: COMMAND_LINE_SIZE of Linux on x86 and arm64.
	DefaultMaxCmdline = bootparam.DefaultMaxCmdline
	// ReservedPrefix starts the names of the boot parameters ([Boot.Params]); a site's own
	// command-line tokens ([Boot.Cmdline]) may not use it, so they can never override one.
	ReservedPrefix = bootparam.ReservedPrefix
)

// byteReason says why b cannot appear in a kernel command-line word, or "" when it can.
//
// The grammar behind it: iPXE splits a script into lines at '\n', joins a line ending in a backslash
// with the next, strips a trailing '\r', splits a line into tokens at isspace(), ends a
// command at a token "||", "&&" or ";", starts a comment at a token beginning with '#',
// and expands "${name}" inside every token (again and again, so a value holding "${" would
// expand the next time round). It has no quoting at all. Linux then splits the kernel
// command line at its own isspace() (which includes byte 0xA0) and treats '"' as a quote
// that can join words. A word is therefore printable ASCII other than space, '"', backslash and
// '$'; the remaining token-level rules (a leading '#', "||", "&&", ";") are checked where a
// value can stand as a whole token.
func byteReason(b byte) string {
	switch {
	case b == ' ':
		return "white space"
	case b < 0x20 || b == 0x7f:
		return fmt.Sprintf("control character 0x%02x", b)
	case b >= 0x80:
		return "non-ASCII byte (Linux splits the command line at 0xa0)"
	case b == '"':
		return `double quote (Linux command-line quoting)`
	case b == '\\':
		return `backslash (iPXE line continuation)`
	case b == '$':
		return `'$' (iPXE setting expansion)`
	}
	return ""
}

// checkWord checks a kernel parameter value (which may be empty).
func checkWord(field, s string) error {
	if len(s) > MaxValueLen {
		return unsafeErr(field, fmt.Sprintf("longer than %d bytes", MaxValueLen))
	}
	for i := 0; i < len(s); i++ {
		if r := byteReason(s[i]); r != "" {
			return unsafeErr(field, r)
		}
	}
	return nil
}

// checkToken checks a value that stands as a whole token of an iPXE command line.
func checkToken(field, s string) error {
	if s == "" {
		return invalidErr(field, "empty")
	}
	if err := checkWord(field, s); err != nil {
		return err
	}
	switch {
	case s[0] == '#':
		return unsafeErr(field, "'#' starts an iPXE comment")
	case s == "||" || s == "&&" || s == ";":
		return unsafeErr(field, "an iPXE command separator")
	}
	return nil
}

// checkName checks a kernel parameter name: [A-Za-z0-9][A-Za-z0-9._-]*.
func checkName(field, s string) error {
	return problemErr(bootparam.CheckName(field, s, byteReason))
}

// urlByteOK reports whether b may appear in a URL the renderer writes: the characters RFC
// 3986 allows (unreserved, reserved and '%'), less '$'.
func urlByteOK(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!&'()*+,;=%", b) >= 0
}

// checkURL checks a URL that iPXE fetches or the kernel receives. An absolute URL must be
// http, https or tftp with a host; relative, when allowed, means an absolute path ("/...").
func checkURL(field, s string, relative bool) (*url.URL, error) {
	if s == "" {
		return nil, invalidErr(field, "empty URL")
	}
	if len(s) > MaxURLLen {
		return nil, unsafeErr(field, fmt.Sprintf("URL longer than %d bytes", MaxURLLen))
	}
	for i := 0; i < len(s); i++ {
		if !urlByteOK(s[i]) {
			if r := byteReason(s[i]); r != "" {
				return nil, unsafeErr(field, r)
			}
			return nil, unsafeErr(field, fmt.Sprintf("character %q is not allowed in a URL", s[i]))
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, invalidErr(field, "malformed URL")
	}
	switch {
	case u.Scheme == "" && relative:
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") {
			return nil, invalidErr(field, `a relative URL must be an absolute path ("/...")`)
		}
		// iPXE's parse_uri takes everything before the first ':' anywhere in the string
		// (query included) as the scheme, so a relative URL with ':' is not relative there.
		if strings.IndexByte(s, ':') >= 0 {
			return nil, invalidErr(field, "a relative URL may not contain ':' (iPXE reads it as a scheme)")
		}
	case u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "tftp":
		if u.Host == "" || u.Opaque != "" {
			return nil, invalidErr(field, "URL without a host")
		}
	default:
		return nil, invalidErr(field, "URL scheme must be http, https or tftp")
	}
	return u, nil
}
