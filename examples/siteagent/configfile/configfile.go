// Package configfile reads the siteagent command's TOML configuration file and maps it onto
// the typed [agent.Config], with errors that name the file's key at fault
// ("boot.server_ip", "lease.grace" for a key the file has and the agent does not).
//
// The file's keys are the Config's fields in snake case, grouped in tables: [log], [boot]
// (with [boot.kernel], [boot.initrd] and [boot.params]), [lease], [control], [metrics] and [bmc];
// [control]'s cert, key and ca name the link's site certificate, its key (the node key when
// absent) and the CA bundle; an http:// control.url needs insecure = true.
// examples/siteagent/testdata/example.toml is a complete file. Durations are written as
// "15s"; addresses as "IP:port"; metrics.listen = "off" turns /metrics off. An absent key
// keeps [agent.DefaultConfig]'s value.
package configfile

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
)

// File is a decoded configuration file: the agent's Config and the command's logging.
type File struct {
	Agent agent.Config
	Log   Log
}

// Log chooses the command's log format and level.
type Log struct {
	Format string // "text" (default) or "json"
	Level  string // "debug", "info" (default), "warn", "error"
}

// KeyError is a configuration error naming the file's key at fault.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("config: %s: %v", e.Key, e.Err) }
func (e *KeyError) Unwrap() error { return e.Err }

var _ error = &KeyError{}

// ErrUnknownKey is the cause of a KeyError for a key the file has and the agent does not.
var ErrUnknownKey = errors.New("unknown key")

// ErrNoCertificate is the cause of a KeyError for an https control URL without the site
// certificate and CA (control.cert, control.ca).
var ErrNoCertificate = errors.New("required with an https control.url: the site certificate (with control.ca, the CA the control plane's certificate must chain to)")

const maxFileBytes = 1 << 20

// Load reads, decodes and validates a configuration file. Unknown keys and bad values are
// errors naming the key (*KeyError).
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("config: file larger than %d bytes", maxFileBytes)
	}
	return Parse(string(b))
}

// The file's shape. Every field is a string or a pointer so that an absent key keeps the
// default, and so that a bad address or duration is reported under its own key.
type file struct {
	SiteID  string `toml:"site_id"`
	NodeID  string `toml:"node_id"`
	KeyFile string `toml:"key_file"`
	DataDir string `toml:"data_dir"`
	Log     struct {
		Format string `toml:"format"`
		Level  string `toml:"level"`
	} `toml:"log"`
	Boot struct {
		ProxyDHCP        bool              `toml:"proxy_dhcp"`
		DHCPListen       string            `toml:"dhcp_listen"`
		PXEListen        string            `toml:"pxe_listen"`
		Interface        string            `toml:"interface"`
		ServerIP         string            `toml:"server_ip"`
		TFTP             bool              `toml:"tftp"`
		TFTPListen       string            `toml:"tftp_listen"`
		TFTPRoot         string            `toml:"tftp_root"`
		TFTPMaxTransfers int               `toml:"tftp_max_transfers"`
		TFTPMaxPerSource int               `toml:"tftp_max_per_source"`
		TFTPMaxWindow    int               `toml:"tftp_max_window"`
		TFTPFirstRetries int               `toml:"tftp_first_retries"`
		TFTPEvictAfter   string            `toml:"tftp_evict_after"`
		TFTPFirstWait    string            `toml:"tftp_first_wait"`
		TFTPMaxQueued    int               `toml:"tftp_max_queued"`
		TFTPQueueWait    string            `toml:"tftp_queue_wait"`
		HTTPListen       string            `toml:"http_listen"`
		HTTPBase         string            `toml:"http_base"`
		SyslogListen     string            `toml:"syslog_listen"`
		Timeline         *bool             `toml:"timeline"`
		TLSCert          string            `toml:"tls_cert"`
		TLSKey           string            `toml:"tls_key"`
		TLSCA            string            `toml:"tls_ca"`
		HTTPSListen      string            `toml:"https_listen"`
		PlainHTTP        *bool             `toml:"plain_http"`
		FirmwareHTTPS    bool              `toml:"firmware_https"`
		TLSExpiryWarning string            `toml:"tls_expiry_warning"`
		Kernel           image             `toml:"kernel"`
		Initrd           image             `toml:"initrd"`
		Cmdline          string            `toml:"cmdline"`
		CacheURL         string            `toml:"cache_url"`
		CacheMaxBytes    int64             `toml:"cache_max_bytes"`
		AllowedSources   []string          `toml:"allowed_source_networks"`
		Management       []string          `toml:"management_networks"`
		Relays           []string          `toml:"relays"`
		Segments         []string          `toml:"segments"`
		ServerIP6        string            `toml:"server_ip6"`
		DHCPv6           bool              `toml:"dhcpv6"`
		DHCPv6Listen     string            `toml:"dhcpv6_listen"`
		PXEListen6       string            `toml:"pxe_listen6"`
		HTTPBase6        string            `toml:"http_base6"`
		NonceWindow      string            `toml:"nonce_window"`
		SecureBoot       bool              `toml:"secure_boot"`
		Shim             string            `toml:"shim"`
		GRUB             string            `toml:"grub"`
		Params           map[string]string `toml:"params"`
	} `toml:"boot"`
	Lease struct {
		TTL string `toml:"ttl"`
	} `toml:"lease"`
	Control struct {
		URL       string `toml:"url"`
		Heartbeat string `toml:"heartbeat"`
		Timeout   string `toml:"timeout"`
		Cert      string `toml:"cert"`
		Key       string `toml:"key"`
		CA        string `toml:"ca"`
		Issuer    string `toml:"issuer"`
		Insecure  bool   `toml:"insecure"`
	} `toml:"control"`
	Metrics struct {
		Listen string `toml:"listen"`
	} `toml:"metrics"`
	BMC struct {
		MaxConcurrent     int     `toml:"max_concurrent"`
		Timeout           string  `toml:"timeout"`
		CacheURL          string  `toml:"cache_url"`
		PowerOnRate       float64 `toml:"power_on_rate"`
		PowerOnBurst      int     `toml:"power_on_burst"`
		GroupPowerOnRate  float64 `toml:"group_power_on_rate"`
		GroupPowerOnBurst int     `toml:"group_power_on_burst"`
		NetworkInFlight   int     `toml:"network_in_flight"`
		MaxSessions       int     `toml:"max_sessions"`
		SessionIdle       string  `toml:"session_idle"`
		TransitionSettle  string  `toml:"transition_settle"`
	} `toml:"bmc"`
}

type image struct {
	URL    string `toml:"url"`
	SHA256 string `toml:"sha256"`
	Format string `toml:"format"`
}

// keys names each agent.Config field by its key in the file.
var keys = map[string]string{
	"SiteID": "site_id", "NodeID": "node_id", "KeyFile": "key_file", "DataDir": "data_dir",
	"Boot.DHCPListen": "boot.dhcp_listen", "Boot.PXEListen": "boot.pxe_listen",
	"Boot.TFTPListen": "boot.tftp_listen", "Boot.HTTPListen": "boot.http_listen",
	"Boot.ServerIP": "boot.server_ip", "Boot.TFTPRoot": "boot.tftp_root",
	"Boot.TFTPLimits.MaxTransfers": "boot.tftp_max_transfers", "Boot.TFTPLimits.MaxPerSource": "boot.tftp_max_per_source",
	"Boot.TFTPLimits.MaxWindow": "boot.tftp_max_window", "Boot.TFTPLimits.FirstRetries": "boot.tftp_first_retries",
	"Boot.TFTPLimits.EvictAfter": "boot.tftp_evict_after", "Boot.TFTPLimits.FirstWait": "boot.tftp_first_wait", "Boot.HTTPBase": "boot.http_base", "Boot.SyslogListen": "boot.syslog_listen", "Boot.NoTimeline": "boot.timeline",
	"Boot.TFTPLimits.MaxQueued": "boot.tftp_max_queued", "Boot.TFTPLimits.QueueWait": "boot.tftp_queue_wait",
	"Boot.Kernel": "boot.kernel", "Boot.Initrd": "boot.initrd",
	"Boot.Cmdline": "boot.cmdline", "Boot.CacheURL": "boot.cache_url", "Boot.CacheMaxBytes": "boot.cache_max_bytes",
	"Lease.TTL": "lease.ttl", "Control.URL": "control.url", "Control.Heartbeat": "control.heartbeat",
	"Control.Timeout": "control.timeout", "Metrics.Listen": "metrics.listen",
	"Boot.NonceWindow": "boot.nonce_window",
	"Control.CertFile": "control.cert", "Control.KeyFile": "control.key", "Control.CAFile": "control.ca", "Control.IssuerFile": "control.issuer",
	"BMC.MaxConcurrent": "bmc.max_concurrent", "BMC.Timeout": "bmc.timeout", "BMC.CacheURL": "bmc.cache_url",
	"BMC.PowerOnRate": "bmc.power_on_rate", "BMC.PowerOnBurst": "bmc.power_on_burst",
	"BMC.GroupPowerOnRate": "bmc.group_power_on_rate", "BMC.GroupPowerOnBurst": "bmc.group_power_on_burst",
	"BMC.NetworkInFlight": "bmc.network_in_flight", "BMC.TransitionSettle": "bmc.transition_settle",
	"BMC.MaxSessions": "bmc.max_sessions", "BMC.SessionIdle": "bmc.session_idle",
	"Boot.ServerIP6": "boot.server_ip6", "Boot.DHCPv6": "boot.dhcpv6", "Boot.DHCPv6Listen": "boot.dhcpv6_listen",
	"Boot.PXEListen6": "boot.pxe_listen6", "Boot.HTTPBase6": "boot.http_base6",
	"Boot.TLSCertFile": "boot.tls_cert", "Boot.TLSKeyFile": "boot.tls_key", "Boot.TLSCAFile": "boot.tls_ca",
	"Boot.HTTPSListen": "boot.https_listen", "Boot.RefusePlainHTTP": "boot.plain_http", "Boot.FirmwareHTTPS": "boot.firmware_https",
	"Boot.TLSExpiryWarning": "boot.tls_expiry_warning",
	"Boot.SecureBoot":       "boot.secure_boot", "Boot.Shim": "boot.shim", "Boot.GRUB": "boot.grub",
}

// Parse is Load on the file's text.
func Parse(text string) (*File, error) {
	var f file
	md, err := toml.Decode(text, &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("config: line %d: %s", pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, &KeyError{Key: und[0].String(), Err: ErrUnknownKey}
	}
	out, err := f.toConfig()
	if err != nil {
		return nil, err
	}
	if err := out.Agent.Validate(); err != nil {
		var fe *agent.FieldError
		if errors.As(err, &fe) {
			return nil, &KeyError{Key: keyOf(fe.Field), Err: fe.Err}
		}
		return nil, err
	}
	// The command's link is the agent's own: over https it needs the site certificate.
	if cc := out.Agent.Control; strings.HasPrefix(cc.URL, "https:") && cc.CertFile == "" {
		return nil, &KeyError{Key: "control.cert", Err: ErrNoCertificate}
	}
	return out, nil
}

// keyOf maps a FieldError's field to the file's key.
func keyOf(field string) string {
	if k, ok := keys[field]; ok {
		return k
	}
	if p, ok := strings.CutPrefix(field, "Boot.Params["); ok {
		return "boot.params." + strings.TrimSuffix(p, "]")
	}
	if strings.HasPrefix(field, "Boot.AllowedSourceNetworks[") {
		return "boot.allowed_source_networks"
	}
	if strings.HasPrefix(field, "Boot.ManagementNetworks[") {
		return "boot.management_networks"
	}
	if strings.HasPrefix(field, "Boot.Segments[") {
		return "boot.segments"
	}
	if strings.HasPrefix(field, "Boot.Relays[") {
		return "boot.relays"
	}
	return field
}

func (f *file) toConfig() (*File, error) {
	out := &File{Agent: agent.DefaultConfig(), Log: Log{Format: "text", Level: "info"}}
	c := &out.Agent
	c.SiteID, c.NodeID, c.KeyFile, c.DataDir = f.SiteID, f.NodeID, f.KeyFile, f.DataDir
	if f.Log.Format != "" {
		out.Log.Format = f.Log.Format
	}
	if f.Log.Level != "" {
		out.Log.Level = f.Log.Level
	}
	switch out.Log.Format {
	case "text", "json":
	default:
		return nil, &KeyError{Key: "log.format", Err: fmt.Errorf("want text or json, got %q", out.Log.Format)}
	}
	switch out.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return nil, &KeyError{Key: "log.level", Err: fmt.Errorf("want debug, info, warn or error, got %q", out.Log.Level)}
	}

	b, fb := &c.Boot, &f.Boot
	b.ProxyDHCP, b.Interface, b.TFTP, b.TFTPRoot = fb.ProxyDHCP, fb.Interface, fb.TFTP, fb.TFTPRoot
	b.TFTPLimits.MaxTransfers, b.TFTPLimits.MaxPerSource = fb.TFTPMaxTransfers, fb.TFTPMaxPerSource
	b.TFTPLimits.MaxWindow, b.TFTPLimits.FirstRetries, b.TFTPLimits.MaxQueued = fb.TFTPMaxWindow, fb.TFTPFirstRetries, fb.TFTPMaxQueued
	b.HTTPBase, b.Cmdline, b.CacheURL, b.CacheMaxBytes, b.Params = fb.HTTPBase, fb.Cmdline, fb.CacheURL, fb.CacheMaxBytes, fb.Params
	b.Kernel = agent.Image{URL: fb.Kernel.URL, SHA256: fb.Kernel.SHA256, Format: fb.Kernel.Format}
	b.Initrd = agent.Image{URL: fb.Initrd.URL, SHA256: fb.Initrd.SHA256, Format: fb.Initrd.Format}
	for _, l := range []struct {
		key string
		in  string
		out *netip.AddrPort
	}{
		{"boot.dhcp_listen", fb.DHCPListen, &b.DHCPListen}, {"boot.pxe_listen", fb.PXEListen, &b.PXEListen},
		{"boot.tftp_listen", fb.TFTPListen, &b.TFTPListen}, {"boot.http_listen", fb.HTTPListen, &b.HTTPListen},
		{"boot.dhcpv6_listen", fb.DHCPv6Listen, &b.DHCPv6Listen}, {"boot.pxe_listen6", fb.PXEListen6, &b.PXEListen6},
		{"boot.syslog_listen", fb.SyslogListen, &b.SyslogListen},
	} {
		if err := addrPort(l.key, l.in, l.out); err != nil {
			return nil, err
		}
	}
	for _, n := range fb.AllowedSources {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, &KeyError{Key: "boot.allowed_source_networks", Err: fmt.Errorf("want networks such as \"127.0.0.0/8\", got %q", n)}
		}
		b.AllowedSourceNetworks = append(b.AllowedSourceNetworks, p)
	}
	for _, n := range fb.Management {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, &KeyError{Key: "boot.management_networks", Err: fmt.Errorf("want networks such as \"10.10.0.0/16\", got %q", n)}
		}
		b.ManagementNetworks = append(b.ManagementNetworks, p)
	}
	for _, r := range fb.Relays {
		ip, err := netip.ParseAddr(r)
		if err != nil {
			return nil, &KeyError{Key: "boot.relays", Err: fmt.Errorf("want relay addresses such as \"198.51.100.1\", got %q", r)}
		}
		b.Relays = append(b.Relays, ip)
	}
	for _, n := range fb.Segments {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, &KeyError{Key: "boot.segments", Err: fmt.Errorf("want subnets such as \"198.51.100.0/24\", got %q", n)}
		}
		b.Segments = append(b.Segments, p.Masked())
	}
	b.DHCPv6, b.HTTPBase6 = fb.DHCPv6, fb.HTTPBase6
	b.NoTimeline = fb.Timeline != nil && !*fb.Timeline
	b.TLSCertFile, b.TLSKeyFile, b.TLSCAFile = fb.TLSCert, fb.TLSKey, fb.TLSCA
	b.RefusePlainHTTP = fb.PlainHTTP != nil && !*fb.PlainHTTP
	b.FirmwareHTTPS = fb.FirmwareHTTPS
	if err := addrPort("boot.https_listen", fb.HTTPSListen, &b.HTTPSListen); err != nil {
		return nil, err
	}
	b.SecureBoot, b.Shim, b.GRUB = fb.SecureBoot, fb.Shim, fb.GRUB
	if fb.ServerIP6 != "" {
		ip, err := netip.ParseAddr(fb.ServerIP6)
		if err != nil {
			return nil, &KeyError{Key: "boot.server_ip6", Err: fmt.Errorf("want the IPv6 address machines reach this agent at, got %q", fb.ServerIP6)}
		}
		b.ServerIP6 = ip
	}
	if fb.ServerIP != "" {
		ip, err := netip.ParseAddr(fb.ServerIP)
		if err != nil {
			return nil, &KeyError{Key: "boot.server_ip", Err: fmt.Errorf("want the IPv4 address machines reach this agent at, got %q", fb.ServerIP)}
		}
		b.ServerIP = ip
	}
	for _, d := range []struct {
		key string
		in  string
		out *time.Duration
	}{
		{"lease.ttl", f.Lease.TTL, &c.Lease.TTL}, {"control.heartbeat", f.Control.Heartbeat, &c.Control.Heartbeat},
		{"control.timeout", f.Control.Timeout, &c.Control.Timeout},
		{"boot.nonce_window", fb.NonceWindow, &b.NonceWindow},
		{"boot.tls_expiry_warning", fb.TLSExpiryWarning, &b.TLSExpiryWarning},
		{"boot.tftp_evict_after", fb.TFTPEvictAfter, &b.TFTPLimits.EvictAfter},
		{"boot.tftp_first_wait", fb.TFTPFirstWait, &b.TFTPLimits.FirstWait},
		{"boot.tftp_queue_wait", fb.TFTPQueueWait, &b.TFTPLimits.QueueWait},
	} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil {
			return nil, &KeyError{Key: d.key, Err: fmt.Errorf("want a duration such as \"15s\", got %q", d.in)}
		}
		*d.out = v
	}
	// The default heartbeat timeout never outlives a shorter lease the file sets; one the
	// file sets itself is checked against the lease (Config.Validate).
	if f.Control.Timeout == "" && c.Control.Timeout > c.Lease.TTL {
		c.Control.Timeout = c.Lease.TTL
	}
	c.Control.URL = f.Control.URL
	c.Control.CertFile, c.Control.KeyFile, c.Control.CAFile = f.Control.Cert, f.Control.Key, f.Control.CA
	c.Control.IssuerFile = f.Control.Issuer
	c.Control.Insecure = f.Control.Insecure
	switch f.Metrics.Listen {
	case "":
	case "off":
		c.Metrics.Listen = netip.AddrPort{}
	default:
		if err := addrPort("metrics.listen", f.Metrics.Listen, &c.Metrics.Listen); err != nil {
			return nil, &KeyError{Key: "metrics.listen", Err: fmt.Errorf("want IP:port or \"off\", got %q", f.Metrics.Listen)}
		}
	}
	c.BMC.MaxConcurrent, c.BMC.CacheURL = f.BMC.MaxConcurrent, f.BMC.CacheURL
	c.BMC.PowerOnRate, c.BMC.PowerOnBurst = f.BMC.PowerOnRate, f.BMC.PowerOnBurst
	c.BMC.GroupPowerOnRate, c.BMC.GroupPowerOnBurst = f.BMC.GroupPowerOnRate, f.BMC.GroupPowerOnBurst
	c.BMC.NetworkInFlight, c.BMC.MaxSessions = f.BMC.NetworkInFlight, f.BMC.MaxSessions
	for _, d := range []struct {
		key, in, example string
		out              *time.Duration
	}{
		{"bmc.timeout", f.BMC.Timeout, "2m", &c.BMC.Timeout},
		{"bmc.session_idle", f.BMC.SessionIdle, "25s", &c.BMC.SessionIdle},
		{"bmc.transition_settle", f.BMC.TransitionSettle, "2s", &c.BMC.TransitionSettle},
	} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil {
			return nil, &KeyError{Key: d.key, Err: fmt.Errorf("want a duration such as %q, got %q", d.example, d.in)}
		}
		*d.out = v
	}
	return out, nil
}

func addrPort(key, in string, out *netip.AddrPort) error {
	if in == "" {
		return nil
	}
	ap, err := netip.ParseAddrPort(in)
	if err != nil {
		return &KeyError{Key: key, Err: fmt.Errorf("want IP:port, got %q", in)}
	}
	*out = ap
	return nil
}
