package configfile_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

// TestCheckRefusesConfigsThatCannotServe: a file that would start an agent
// that serves no machine is refused by -check (Parse), naming the key to fix, never as an
// unknown key.
func TestCheckRefusesConfigsThatCannotServe(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	// Proxy DHCP and TFTP off: the site's own DHCP server sends machines to this agent.
	noProxy := strings.NewReplacer(`proxy_dhcp  = true`, `proxy_dhcp  = false`, `tftp        = true`, `tftp        = false`)
	tests := []struct {
		name  string
		edits []string // old, new, ...
		key   string
	}{
		{"no address for the scripts' URLs", []string{`server_ip   = "192.0.2.2"`, ``, `cache_url   = "http://192.0.2.2/cache"`, ``}, "boot.http_base"},
		{"unspecified server_ip", []string{`server_ip   = "192.0.2.2"`, `server_ip   = "0.0.0.0"`}, "boot.server_ip"},
		{"multicast server_ip", []string{`server_ip   = "192.0.2.2"`, `server_ip   = "224.0.0.1"`}, "boot.server_ip"},
		{"broadcast server_ip", []string{`server_ip   = "192.0.2.2"`, `server_ip   = "255.255.255.255"`}, "boot.server_ip"},
		{"unspecified http_base", []string{`http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"` + "\nhttp_base = \"http://0.0.0.0:8080\""}, "boot.http_base"},
		{"unspecified cache_url", []string{`cache_url   = "http://192.0.2.2/cache"`, `cache_url   = "http://[::]/cache"`}, "boot.cache_url"},
		{"nonce window too short", []string{`http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"` + "\nnonce_window = \"1s\""}, "boot.nonce_window"},
		{"nonce window too long", []string{`http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"` + "\nnonce_window = \"2h\""}, "boot.nonce_window"},
		{"nonce window not a duration", []string{`http_listen = "0.0.0.0:80"`, `http_listen = "0.0.0.0:80"` + "\nnonce_window = \"5\""}, "boot.nonce_window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := noProxy.Replace(string(base))
			for i := 0; i < len(tt.edits); i += 2 {
				if !strings.Contains(text, tt.edits[i]) {
					t.Fatalf("example lacks %q", tt.edits[i])
				}
				text = strings.Replace(text, tt.edits[i], tt.edits[i+1], 1)
			}
			_, err := configfile.Parse(text)
			var ke *configfile.KeyError
			if !errors.As(err, &ke) || errors.Is(err, configfile.ErrUnknownKey) {
				t.Fatalf("Parse: %v; want a *KeyError for a known key", err)
			}
			if ke.Key != tt.key {
				t.Errorf("error names %q, want %q (%v)", ke.Key, tt.key, err)
			}
		})
	}

	// The same site with an address for its URLs serves: accepted, the window typed.
	text := noProxy.Replace(string(base))
	text = strings.Replace(text, `server_ip   = "192.0.2.2"`, `http_base   = "http://boot.fsn1.example.net"`+"\nnonce_window = \"2m\"", 1)
	f, err := configfile.Parse(text)
	if err != nil {
		t.Fatalf("a config with http_base: %v", err)
	}
	if f.Agent.Boot.NonceWindow != 2*time.Minute {
		t.Errorf("nonce_window = %v, want 2m", f.Agent.Boot.NonceWindow)
	}
}
