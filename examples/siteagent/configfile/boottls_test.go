package configfile_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

// TestBootTLSKeys: the boot certificate's keys reach the agent's Config, plain_http = false
// refuses plain HTTP, and settings that would leave a secret on plain HTTP are refused
// naming their key.
func TestBootTLSKeys(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	tlsKeys := `http_listen = "0.0.0.0:80"` + "\n" + `tls_cert = "/etc/siteagent/boot.pem"` + "\n" +
		`tls_key = "/etc/siteagent/boot.key"` + "\n" + `tls_ca = "/etc/siteagent/site-ca.pem"` + "\n" +
		`https_listen = "0.0.0.0:8443"` + "\n" + `plain_http = false` + "\n" + `firmware_https = true` + "\n" +
		`tls_expiry_warning = "336h"`
	text := strings.Replace(string(base), `http_listen = "0.0.0.0:80"`, tlsKeys, 1)
	text = strings.Replace(text, `cache_url   = "http://192.0.2.2/cache"`, `cache_url   = "https://192.0.2.2:8443/cache"`, 1)
	f, err := configfile.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	b := f.Agent.Boot
	if b.TLSCertFile != "/etc/siteagent/boot.pem" || b.TLSKeyFile != "/etc/siteagent/boot.key" || b.TLSCAFile != "/etc/siteagent/site-ca.pem" ||
		b.HTTPSListen != netip.MustParseAddrPort("0.0.0.0:8443") || !b.RefusePlainHTTP || !b.FirmwareHTTPS ||
		b.TLSExpiryWarning != 336*time.Hour {
		t.Errorf("boot TLS settings: %+v", b)
	}
	// Without tftp_root, siteboot's own builds: accepted.
	if f, err := configfile.Parse(strings.Replace(text, `tftp_root   = "/var/lib/siteagent/ipxe"`, ``, 1)); err != nil || f.Agent.Boot.TFTPRoot != "" {
		t.Errorf("without tftp_root: %v", err)
	}
	// firmware_https alone: no HTTPS side to send the firmware to.
	_, err = configfile.Parse(strings.Replace(string(base), `http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"`+"\nfirmware_https = true", 1))
	if ke := (*configfile.KeyError)(nil); !errors.As(err, &ke) || ke.Key != "boot.tls_cert" {
		t.Errorf("firmware_https without a certificate: %v, want a *KeyError for boot.tls_cert", err)
	}
	for _, tt := range []struct {
		name, old, new, key string
	}{
		{"plain cache URL", `cache_url   = "https://192.0.2.2:8443/cache"`, `cache_url   = "http://192.0.2.2/cache"`, "boot.cache_url"},
		{"no key", `tls_key = "/etc/siteagent/boot.key"`, ``, "boot.tls_key"},
		{"plain_http without a certificate", `tls_cert = "/etc/siteagent/boot.pem"`, ``, "boot.tls_cert"},
		{"bad https_listen", `https_listen = "0.0.0.0:8443"`, `https_listen = "8443"`, "boot.https_listen"},
		{"bad tls_expiry_warning", `tls_expiry_warning = "336h"`, `tls_expiry_warning = "two weeks"`, "boot.tls_expiry_warning"},
		{"negative tls_expiry_warning", `tls_expiry_warning = "336h"`, `tls_expiry_warning = "-1h"`, "boot.tls_expiry_warning"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := configfile.Parse(strings.Replace(text, tt.old, tt.new, 1))
			var ke *configfile.KeyError
			if !errors.As(err, &ke) || ke.Key != tt.key {
				t.Errorf("Parse: %v; want a *KeyError for %s", err, tt.key)
			}
		})
	}
}
