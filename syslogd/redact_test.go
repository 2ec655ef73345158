package syslogd_test

import (
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/syslogd"
)

// TestRedactURLs: what iPXE prints as it fetches a boot's files keeps the server, the path
// and an image's digest, and loses the nonce in the script's query and the grant in an
// image's path.
func TestRedactURLs(t *testing.T) {
	grant := strings.Repeat("0f", 16) // imagecache's 32 hex digits
	digest := strings.Repeat("ab", 32)
	nonce := "Zk3_q-9vLmT2xYw8"
	for _, c := range []struct{ in, want string }{
		{"http://192.0.2.1:8080/boot/ipxe?mac=52-54-00-12-34-56&n=" + nonce + "... ok",
			"http://192.0.2.1:8080/boot/ipxe?(redacted)... ok"},
		{"https://[2001:db8::1]:8443/cache/t/" + grant + "/" + digest + "... ok",
			"https://[2001:db8::1]:8443/cache/t/(redacted)/" + digest + "... ok"},
		{"Booting from http://192.0.2.1/a/" + nonce + " then tftp://192.0.2.1/ipxe.efi",
			"Booting from http://192.0.2.1/a/(redacted) then tftp://192.0.2.1/ipxe.efi"},
		{"http://192.0.2.1/cache/t/" + grant + "... ok", "http://192.0.2.1/cache/t/(redacted)... ok"},
		{"no url here: ok", "no url here: ok"},
		{"http://192.0.2.1", "http://192.0.2.1"},
		{"http://192.0.2.1?n=" + nonce, "http://192.0.2.1?(redacted)"},
		{"://", "://"},
	} {
		got := syslogd.RedactURLs(c.in)
		if got != c.want {
			t.Errorf("RedactURLs(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
		for _, secret := range []string{nonce, grant} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURLs(%q) kept the secret %q", c.in, secret)
			}
		}
	}
}
