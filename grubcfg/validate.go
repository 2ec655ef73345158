package grubcfg

import (
	"fmt"
	"net/netip"
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
	// DefaultMaxCmdline bounds the kernel command line when [Boot.MaxCmdline] is zero:
	// COMMAND_LINE_SIZE of Linux on x86 and arm64.
	DefaultMaxCmdline = bootscript.DefaultMaxCmdline
	// ReservedPrefix starts the boot parameters' names ([Boot.Params]); the site's own
	// command-line tokens may not use it, so they can never override one.
	ReservedPrefix = bootscript.ReservedPrefix
)

// lang is GRUB as the renderer core knows it. Inside GRUB's single quotes only the quote
// itself is special, so that is the one byte it adds to the core's rules for a word (Linux
// splits the line at its isspace(), 0xa0 included, and reads '"' as a quote; backslash and
// '$' are refused as package ipxe refuses them, so one entry renders the same command line
// on both paths).
var lang = &bootscript.Lang{
	Name:       "GRUB",
	ErrUnsafe:  ErrUnsafe,
	ErrInvalid: ErrInvalid,
	Syntax: func(b byte) string {
		if b == '\'' {
			return "single quote (GRUB quoting)"
		}
		return ""
	},
}

// pathByteOK reports whether b may appear in the path and query of a URL GRUB fetches: RFC
// 3986's unreserved characters, '%', and the delimiters a path or query needs.
func pathByteOK(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("-._~%/?&=:,+@", b) >= 0
}

// grubPath turns an http:// or tftp:// URL into GRUB's file name for it,
// "(http,HOST)/path?query", keeping the path and query byte for byte. GRUB 2.06 names no
// port in a device, so the URL must use the protocol's own (80, 69); it has no TLS, so
// https is refused. HOST is an IPv4 address or a DNS name.
func grubPath(field, s string) (string, error) {
	if s == "" {
		return "", invalidErr(field, "empty URL")
	}
	if len(s) > MaxURLLen {
		return "", unsafeErr(field, fmt.Sprintf("URL longer than %d bytes", MaxURLLen))
	}
	for i := 0; i < len(s); i++ {
		if r := lang.ByteReason(s[i]); r != "" {
			return "", unsafeErr(field, r)
		}
	}
	scheme, rest, ok := strings.Cut(s, "://")
	port := ""
	switch {
	case !ok:
		return "", invalidErr(field, "not an absolute URL (scheme://host/path)")
	case scheme == "http":
		port = "80"
	case scheme == "tftp":
		port = "69"
	case scheme == "https":
		return "", invalidErr(field, "GRUB 2.06 has no TLS: use http")
	default:
		return "", invalidErr(field, "URL scheme must be http or tftp")
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 || strings.IndexByte(rest[:slash], '?') >= 0 {
		return "", invalidErr(field, "URL without a path")
	}
	authority, path := rest[:slash], rest[slash:]
	if strings.ContainsAny(authority, "@[]") {
		return "", invalidErr(field, "the host must be an IPv4 address or a DNS name, without user")
	}
	host, p, hasPort := strings.Cut(authority, ":")
	if hasPort && p != port {
		return "", invalidErr(field, "GRUB 2.06 cannot name a port: use "+port)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return "", invalidErr(field, "the host must be an IPv4 address or a DNS name")
		}
	} else if !validHostname(host) {
		return "", invalidErr(field, "the host must be an IPv4 address or a DNS name")
	}
	for i := 0; i < len(path); i++ {
		if !pathByteOK(path[i]) {
			return "", unsafeErr(field, fmt.Sprintf("character %q is not allowed in a path", path[i]))
		}
	}
	return "(" + scheme + "," + host + ")" + path, nil
}

func validHostname(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-') {
				return false
			}
		}
	}
	return true
}
