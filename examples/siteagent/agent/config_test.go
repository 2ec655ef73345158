package agent_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
)

func TestExampleConfig(t *testing.T) {
	c, err := agent.LoadConfig("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.KeyFile != "/var/lib/siteagent/node.key" {
		t.Errorf("KeyFile = %q, want the data dir default", c.KeyFile)
	}
	if c.Boot.HTTPBase != "http://192.0.2.2" {
		t.Errorf("HTTPBase = %q, want http://192.0.2.2", c.Boot.HTTPBase)
	}
	if c.Lease.TTL.Duration != 15*time.Second || c.Control.Heartbeat.Duration != 5*time.Second {
		t.Errorf("durations = %v, %v", c.Lease.TTL, c.Control.Heartbeat)
	}
	if c.Boot.DHCPListen != agent.DefaultDHCPListen || c.Boot.PXEListen != agent.DefaultPXEListen {
		t.Errorf("listen defaults = %q, %q", c.Boot.DHCPListen, c.Boot.PXEListen)
	}
}

// TestConfigErrors changes one line of the example at a time: each bad value is an error
// naming its key.
func TestConfigErrors(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		old, new string
		key      string
	}{
		{`site_id  = "site-fsn1"`, `site_id  = "site fsn1"`, "site_id"},
		{`node_id  = "agent-fsn1-a"`, `node_id  = ""`, "node_id"},
		{`data_dir = "/var/lib/siteagent"`, ``, "data_dir"},
		{`format = "json"`, `format = "xml"`, "log.format"},
		{`server_ip   = "192.0.2.2"`, `server_ip   = "2001:db8::2"`, "boot.server_ip"},
		{`server_ip   = "192.0.2.2"`, `server_ip   = "not-an-ip"`, "boot.server_ip"},
		{`tftp_root   = "/var/lib/siteagent/ipxe"`, ``, "boot.tftp_root"},
		{`# tftp_max_transfers  = 64`, `tftp_max_transfers = -1`, "boot.tftp_max_transfers"},
		{`http_listen = "0.0.0.0:80"`, `http_listen = "80"`, "boot.http_listen"},
		{`sha256 = "5fac891e7346c6a6820ab4ff0de1954eb4ba76de1f034545d8bcaf128bdbe80f"`, `sha256 = "5fac"`, "boot.kernel"},
		{`url    = "https://images.example.net/ramdisk/initrd.img"`, `url    = "ftp://images.example.net/initrd"`, "boot.initrd"},
		{`cache_url   = "http://192.0.2.2/cache"`, `cache_url   = "192.0.2.2/cache"`, "boot.cache_url"},
		{`cache_max_bytes = 107374182400    # 100 GiB`, `cache_max_bytes = -1`, "boot.cache_max_bytes"},
		{`gateway = "https://gateway.example.net:443"`, `gateway = "https://gw example"`, "boot.params.gateway"},
		{`gateway = "https://gateway.example.net:443"`, `Gate-Way = "x"`, "boot.params.Gate-Way"},
		{`ttl = "15s"`, `ttl = "15 seconds"`, ""},
		{`ttl = "15s"`, `ttl = "3s"`, "control.heartbeat"}, // 5 s heartbeats cannot keep a 3 s lease
		{`ttl = "15s"`, `ttl = "1h"`, "lease.ttl"},
		{`url       = "https://control.example.net/site-agent"`, `url       = ""`, "control.url"},
		{`listen = "127.0.0.1:9464"`, `listen = "everywhere"`, "metrics.listen"},
		{`tftp        = true`, `tftp        = true` + "\nwindowsize  = 4", "boot.windowsize"},
		{`level  = "info"`, `level  = "info"` + "\ncolour = \"yes\"", "log.colour"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"/"+tt.new, func(t *testing.T) {
			text := string(base)
			if !strings.Contains(text, tt.old) {
				t.Fatalf("example lacks %q", tt.old)
			}
			_, err := agent.ParseConfig(strings.Replace(text, tt.old, tt.new, 1))
			if err == nil {
				t.Fatal("accepted")
			}
			if tt.key == "" {
				return // a TOML-level error: no key to name, but refused
			}
			var ke *agent.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %v is not a *KeyError", err)
			}
			if ke.Key != tt.key {
				t.Errorf("error names %q, want %q (%v)", ke.Key, tt.key, err)
			}
			if tt.new != "" && strings.HasSuffix(tt.key, "colour") && !errors.Is(err, agent.ErrUnknownKey) {
				t.Errorf("unknown key error %v does not match ErrUnknownKey", err)
			}
		})
	}
}
