package ipxe

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/bettercompute/siteboot/internal/bootscript"
)

// Limits on what the renderer accepts.
const (
	// MaxURLLen is the longest URL the renderer accepts.
	MaxURLLen = bootscript.MaxURLLen
	// MaxValueLen is the longest kernel parameter value or command-line token.
	MaxValueLen = bootscript.MaxValueLen
	// MaxNameLen is the longest kernel parameter name.
	MaxNameLen = bootscript.MaxNameLen
	// DefaultMaxCmdline is the longest kernel command line rendered when [Boot.MaxCmdline]
	// is zero: COMMAND_LINE_SIZE of Linux on x86 and arm64.
	DefaultMaxCmdline = bootscript.DefaultMaxCmdline
	// ReservedPrefix starts the names of the boot parameters ([Boot.Params]); a site's own
	// command-line tokens ([Boot.Cmdline]) may not use it, so they can never override one.
	ReservedPrefix = bootscript.ReservedPrefix
)

// checkWord checks a kernel parameter value (which may be empty).
func checkWord(field, s string) error { return lang.CheckWord(field, s) }

// checkName checks a kernel parameter name: [A-Za-z0-9][A-Za-z0-9._-]*.
func checkName(field, s string) error { return lang.CheckName(field, s) }

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
			if r := lang.ByteReason(s[i]); r != "" {
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
