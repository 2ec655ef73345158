package configfile_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/examples/siteagent/configfile"
)

func TestExampleConfig(t *testing.T) {
	f, err := configfile.Load("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Agent
	// Every key of the example, typed, and the defaults for those it leaves out.
	want := agent.DefaultConfig()
	want.SiteID, want.NodeID, want.DataDir = "site-fsn1", "agent-fsn1-a", "/var/lib/siteagent"
	want.Boot.ProxyDHCP, want.Boot.Interface, want.Boot.ServerIP = true, "eth1", netip.MustParseAddr("192.0.2.2")
	want.Boot.TFTP, want.Boot.TFTPRoot = true, "/var/lib/siteagent/ipxe"
	want.Boot.HTTPListen = netip.MustParseAddrPort("0.0.0.0:80")
	want.Boot.Cmdline, want.Boot.CacheURL, want.Boot.CacheMaxBytes = "console=ttyS0,115200n8 quiet", "http://192.0.2.2/cache", 100<<30
	want.Boot.Kernel = agent.Image{URL: "https://images.example.net/ramdisk/vmlinuz", SHA256: "5fac891e7346c6a6820ab4ff0de1954eb4ba76de1f034545d8bcaf128bdbe80f", Format: "kernel"}
	want.Boot.Initrd = agent.Image{URL: "https://images.example.net/ramdisk/initrd.img", SHA256: "0128042d64cad309383b4779ec4290792b54daa97158e4c6126a57d2260042fe", Format: "initrd"}
	want.Boot.Params = map[string]string{"gateway": "https://gateway.example.net:443"}
	want.Lease.TTL, want.Control.Heartbeat, want.Control.Timeout = 15*time.Second, 5*time.Second, 4*time.Second
	want.Control.URL = "https://control.example.net/site-agent"
	want.Control.CertFile, want.Control.CAFile = "/var/lib/siteagent/site.pem", "/etc/siteagent/control-ca.pem"
	want.Boot.ManagementNetworks = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	want.Metrics.Listen = netip.MustParseAddrPort("127.0.0.1:9464")
	if diff := cmp.Diff(want, c, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if f.Log != (configfile.Log{Format: "json", Level: "info"}) {
		t.Errorf("log = %+v", f.Log)
	}
}

// TestMetricsOff: metrics.listen = "off" is the zero address, which turns /metrics off.
func TestMetricsOff(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := configfile.Parse(strings.Replace(string(base), `listen = "127.0.0.1:9464"`, `listen = "off"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	if f.Agent.Metrics.Listen.IsValid() {
		t.Errorf("metrics.listen = off gave %v", f.Agent.Metrics.Listen)
	}
}

// TestAllowedSourceNetworks: boot.allowed_source_networks reaches the agent's config typed.
func TestAllowedSourceNetworks(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := configfile.Parse(strings.Replace(string(base), `# allowed_source_networks = ["127.0.0.0/8"]`, `allowed_source_networks = ["127.0.0.0/8", "2001:db8::/32"]`, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	if diff := cmp.Diff(want, f.Agent.Boot.AllowedSourceNetworks, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("networks (-want +got):\n%s", diff)
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
		{`level  = "info"`, `level  = "loud"`, "log.level"},
		{`# allowed_source_networks = ["127.0.0.0/8"]`, `allowed_source_networks = ["127.0.0.1"]`, "boot.allowed_source_networks"},
		{`heartbeat = "5s"`, `heartbeat = "5"`, "control.heartbeat"},
		{`timeout   = "4s"`, `timeout   = "2m"`, "control.timeout"},
		{`timeout   = "4s"`, `timeout   = "20s"`, "control.timeout"}, // longer than the 15 s lease
		{`tftp        = true`, `tftp        = true` + "\ntftp_listen = \"69\"", "boot.tftp_listen"},
		{`server_ip   = "192.0.2.2"`, `server_ip   = "2001:db8::2"`, "boot.server_ip"},
		{`server_ip   = "192.0.2.2"`, `server_ip   = "not-an-ip"`, "boot.server_ip"},
		{`# tls_cert     = "/etc/siteagent/boot.pem"`, `tls_cert = "/etc/siteagent/boot.pem"`, "boot.tls_key"},
		{`# tftp_max_transfers  = 64`, `tftp_max_transfers = -1`, "boot.tftp_max_transfers"},
		{`# tftp_max_window     = 64`, `tftp_max_window = 70000`, "boot.tftp_max_window"},
		{`# tftp_first_retries  = 0`, `tftp_first_retries = 17`, "boot.tftp_first_retries"},
		{`# tftp_first_wait     = "3s"`, `tftp_first_wait = "10ms"`, "boot.tftp_first_wait"},
		{`# tftp_evict_after    = "50ms"`, `tftp_evict_after = "1ms"`, "boot.tftp_evict_after"},
		{`# tftp_evict_after    = "50ms"`, `tftp_evict_after = "fast"`, "boot.tftp_evict_after"},
		{`# tftp_max_queued     = 1024`, `tftp_max_queued = -2`, "boot.tftp_max_queued"},
		{`# tftp_queue_wait     = "5s"`, `tftp_queue_wait = "10ms"`, "boot.tftp_queue_wait"},
		{`# tftp_queue_wait     = "5s"`, `tftp_queue_wait = "soon"`, "boot.tftp_queue_wait"},
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
		// The link: plain http only with insecure; https only with the site certificate.
		{`url       = "https://control.example.net/site-agent"`, `url       = "http://control.example.net/site-agent"`, "control.url"},
		{`cert      = "/var/lib/siteagent/site.pem"`, ``, "control.cert"},
		{`ca        = "/etc/siteagent/control-ca.pem"`, ``, "control.ca"},
		{`management_networks = ["198.51.100.0/24"]`, `management_networks = ["198.51.100.1"]`, "boot.management_networks"},
		{`# relays = ["203.0.113.1"]`, `relays = ["relay-1"]`, "boot.relays"},
		{`# relays = ["203.0.113.1"]`, `relays = ["0.0.0.0"]`, "boot.relays"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"/"+tt.new, func(t *testing.T) {
			text := string(base)
			if !strings.Contains(text, tt.old) {
				t.Fatalf("example lacks %q", tt.old)
			}
			_, err := configfile.Parse(strings.Replace(text, tt.old, tt.new, 1))
			if err == nil {
				t.Fatal("accepted")
			}
			if tt.key == "" {
				return // a TOML-level error: no key to name, but refused
			}
			var ke *configfile.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %v is not a *KeyError", err)
			}
			if ke.Key != tt.key {
				t.Errorf("error names %q, want %q (%v)", ke.Key, tt.key, err)
			}
			if tt.new != "" && strings.HasSuffix(tt.key, "colour") && !errors.Is(err, configfile.ErrUnknownKey) {
				t.Errorf("unknown key error %v does not match ErrUnknownKey", err)
			}
		})
	}
}

// TestLinkKeys: the link's TLS keys and the relays reach the agent's config typed; a plain
// http control URL is accepted only with insecure = true, and then without certificates.
func TestLinkKeys(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(base), `# key     = "/var/lib/siteagent/node.key"`, `key = "/var/lib/siteagent/tls.key"`, 1)
	text = strings.Replace(text, `# relays = ["203.0.113.1"]`, `relays = ["203.0.113.1", "203.0.113.2"]`, 1)
	text = strings.Replace(text, `# issuer    = "/etc/siteagent/site-ca.pem"`, `issuer    = "/etc/siteagent/site-ca.pem"`, 1)
	f, err := configfile.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.ControlConfig{
		URL: "https://control.example.net/site-agent", Heartbeat: 5 * time.Second, Timeout: 4 * time.Second,
		CertFile: "/var/lib/siteagent/site.pem", KeyFile: "/var/lib/siteagent/tls.key", CAFile: "/etc/siteagent/control-ca.pem",
		IssuerFile: "/etc/siteagent/site-ca.pem",
	}
	if diff := cmp.Diff(want, f.Agent.Control); diff != "" {
		t.Errorf("control (-want +got):\n%s", diff)
	}
	relays := []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")}
	if diff := cmp.Diff(relays, f.Agent.Boot.Relays, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("relays (-want +got):\n%s", diff)
	}

	plain := strings.Replace(string(base), `url       = "https://control.example.net/site-agent"`, `url       = "http://control.example.net/site-agent"`, 1)
	_, err = configfile.Parse(plain)
	if !errors.Is(err, agent.ErrPlainHTTP) {
		t.Errorf("http without insecure: %v, want ErrPlainHTTP", err)
	}
	for _, line := range []string{`cert      = "/var/lib/siteagent/site.pem"`, `ca        = "/etc/siteagent/control-ca.pem"`} {
		plain = strings.Replace(plain, line, "", 1)
	}
	f, err = configfile.Parse(strings.Replace(plain, `timeout   = "4s"`, "timeout   = \"4s\"\ninsecure  = true", 1))
	if err != nil {
		t.Fatalf("http with insecure = true: %v", err)
	}
	if !f.Agent.Control.Insecure {
		t.Error("insecure = true did not reach Control.Insecure")
	}
}

// TestTFTPKeys: the TFTP server's window, first-retry, eviction and queue settings are keys
// of [boot], typed.
func TestTFTPKeys(t *testing.T) {
	base, err := os.ReadFile("../testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(
		`# tftp_max_window     = 64`, `tftp_max_window = 4`,
		`# tftp_first_retries  = 0`, `tftp_first_retries = 3`,
		`# tftp_first_wait     = "3s"`, `tftp_first_wait = "7s"`,
		`# tftp_evict_after    = "50ms"`, `tftp_evict_after = "120ms"`,
		`# tftp_max_queued     = 1024`, `tftp_max_queued = -1`,
		`# tftp_queue_wait     = "5s"`, `tftp_queue_wait = "2s"`,
	).Replace(string(base))
	f, err := configfile.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	b := f.Agent.Boot
	if b.TFTPLimits.MaxWindow != 4 || b.TFTPLimits.FirstRetries != 3 || b.TFTPLimits.EvictAfter != 120*time.Millisecond {
		t.Errorf("tftp_max_window, tftp_first_retries, tftp_evict_after = %d, %d, %v; want 4, 3, 120ms", b.TFTPLimits.MaxWindow, b.TFTPLimits.FirstRetries, b.TFTPLimits.EvictAfter)
	}
	if b.TFTPLimits.FirstWait != 7*time.Second {
		t.Errorf("tftp_first_wait = %v, want 7s", b.TFTPLimits.FirstWait)
	}
	if b.TFTPLimits.MaxQueued != -1 || b.TFTPLimits.QueueWait != 2*time.Second {
		t.Errorf("tftp_max_queued, tftp_queue_wait = %d, %v; want -1, 2s", b.TFTPLimits.MaxQueued, b.TFTPLimits.QueueWait)
	}
}
