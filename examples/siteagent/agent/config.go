package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is the agent's configuration file. Zero values take the defaults named in each
// field's comment.
type Config struct {
	SiteID  string `toml:"site_id"`  // required
	NodeID  string `toml:"node_id"`  // required
	KeyFile string `toml:"key_file"` // Ed25519 key (PKCS#8 PEM); created 0600 if missing; default DATA/node.key
	DataDir string `toml:"data_dir"` // required: boot entries and the image cache live here
	Log     LogConfig
	Boot    BootConfig
	Lease   LeaseConfig
	Control ControlConfig
	Metrics MetricsConfig
}

// LogConfig chooses the log format and level.
type LogConfig struct {
	Format string `toml:"format"` // "text" (default) or "json"
	Level  string `toml:"level"`  // "debug", "info" (default), "warn", "error"
}

// BootConfig is the boot server: proxy DHCP, TFTP, the /boot/ and /cache/ HTTP handlers.
type BootConfig struct {
	ProxyDHCP  bool   `toml:"proxy_dhcp"`  // answer PXE and HTTP boot beside the site's DHCP server
	DHCPListen string `toml:"dhcp_listen"` // default "0.0.0.0:67"
	PXEListen  string `toml:"pxe_listen"`  // default "0.0.0.0:4011"
	Interface  string `toml:"interface"`   // bind proxy DHCP to this interface (SO_BINDTODEVICE); default all
	ServerIP   string `toml:"server_ip"`   // required with proxy_dhcp or tftp: where machines reach this agent
	TFTP       bool   `toml:"tftp"`        // serve the iPXE builds over TFTP
	TFTPListen string `toml:"tftp_listen"` // default "0.0.0.0:69"
	TFTPRoot   string `toml:"tftp_root"`   // directory of iPXE builds (undionly.kpxe, ipxe.efi, ...); required with tftp
	// TFTPMaxTransfers and TFTPMaxPerSource bound the transfers at once, in all and per
	// machine; a request beyond either is dropped unanswered and the firmware retries.
	// Zero: tftpd's defaults (64 and 4).
	TFTPMaxTransfers int    `toml:"tftp_max_transfers"`
	TFTPMaxPerSource int    `toml:"tftp_max_per_source"`
	HTTPListen       string `toml:"http_listen"` // default "0.0.0.0:80"
	// HTTPBase is the base URL machines use for /boot/ and /cache/; default http://SERVER_IP[:port of http_listen].
	HTTPBase string `toml:"http_base"`

	Kernel  Image  `toml:"kernel"`  // the site's ramdisk kernel, served from the cache
	Initrd  Image  `toml:"initrd"`  // the site's ramdisk initrd, served from the cache
	Cmdline string `toml:"cmdline"` // appended after the bc.* parameters

	// CacheURL is where machines reach the image cache (its /t/GRANT/SHA256 paths): the
	// base of bc.cache and of the kernel and initrd URLs. Default HTTPBase + "/cache"; set it
	// when the cache is reached under another name.
	CacheURL      string `toml:"cache_url"`
	CacheMaxBytes int64  `toml:"cache_max_bytes"` // 0: no budget

	// Params are site-wide bc.* parameters (gateway, pins, join key), without the "bc." prefix.
	Params map[string]string `toml:"params"`
}

// Image names a cache image: where to pull it and the digest it must match.
type Image struct {
	URL    string `toml:"url"`
	SHA256 string `toml:"sha256"`
	Format string `toml:"format"` // "raw" (default), "iso", "kernel", "initrd", ...
}

// LeaseConfig is the boot lease as this agent sees it.
type LeaseConfig struct {
	TTL Duration `toml:"ttl"` // default 15s, when the control plane's word gives none
}

// ControlConfig says how the agent reaches its control plane.
type ControlConfig struct {
	URL       string   `toml:"url"`       // base URL of the control plane's agent API (required)
	Heartbeat Duration `toml:"heartbeat"` // default 5s; must be under a third of the lease TTL
	Timeout   Duration `toml:"timeout"`   // per request; default 4s
}

// MetricsConfig places /metrics and /healthz.
type MetricsConfig struct {
	Listen string `toml:"listen"` // default "127.0.0.1:9464"; "off" disables
}

// Duration is a time.Duration written as "15s" in the file.
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Defaults used when a field is zero.
const (
	DefaultDHCPListen  = "0.0.0.0:67"
	DefaultPXEListen   = "0.0.0.0:4011"
	DefaultTFTPListen  = "0.0.0.0:69"
	DefaultHTTPListen  = "0.0.0.0:80"
	DefaultLeaseTTL    = 15 * time.Second
	DefaultHeartbeat   = 5 * time.Second
	DefaultTimeout     = 4 * time.Second
	DefaultMetrics     = "127.0.0.1:9464"
	DefaultImageFormat = "raw"
	DefaultKeyFileName = "node.key"
)

// Files under the data directory.
const (
	EntriesFileName = "boot-entries.json"
	CacheDirName    = "cache"
)

const maxConfigFileBytes = 1 << 20

var (
	idRE         = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
	paramNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	paramValueRE = regexp.MustCompile(`^[A-Za-z0-9_.:/+=@,-]{0,512}$`)
)

// KeyError is a configuration error naming the key at fault.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("config: %s: %v", e.Key, e.Err) }
func (e *KeyError) Unwrap() error { return e.Err }

var _ error = &KeyError{}

// ErrUnknownKey is the cause of a KeyError for a key the file has and Config does not.
var ErrUnknownKey = errors.New("unknown key")

// LoadConfig reads, decodes and validates a configuration file, applying defaults. Unknown
// keys and bad values are errors naming the key (*KeyError).
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFileBytes {
		return nil, fmt.Errorf("config: file larger than %d bytes", maxConfigFileBytes)
	}
	return ParseConfig(string(b))
}

// ParseConfig is LoadConfig on the file's text.
func ParseConfig(text string) (*Config, error) {
	var c Config
	md, err := toml.Decode(text, &c)
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
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Boot.DHCPListen, DefaultDHCPListen)
	def(&c.Boot.PXEListen, DefaultPXEListen)
	def(&c.Boot.TFTPListen, DefaultTFTPListen)
	def(&c.Boot.HTTPListen, DefaultHTTPListen)
	def(&c.Log.Format, "text")
	def(&c.Log.Level, "info")
	def(&c.Metrics.Listen, DefaultMetrics)
	if c.KeyFile == "" && c.DataDir != "" {
		c.KeyFile = c.DataDir + "/" + DefaultKeyFileName
	}
	if c.Lease.TTL.Duration == 0 {
		c.Lease.TTL.Duration = DefaultLeaseTTL
	}
	if c.Control.Heartbeat.Duration == 0 {
		c.Control.Heartbeat.Duration = DefaultHeartbeat
	}
	if c.Control.Timeout.Duration == 0 {
		c.Control.Timeout.Duration = DefaultTimeout
	}
	for _, im := range []*Image{&c.Boot.Kernel, &c.Boot.Initrd} {
		def(&im.Format, DefaultImageFormat)
	}
	if c.Boot.HTTPBase == "" && c.Boot.ServerIP != "" {
		port := "80"
		if i := strings.LastIndexByte(c.Boot.HTTPListen, ':'); i >= 0 {
			port = c.Boot.HTTPListen[i+1:]
		}
		host := c.Boot.ServerIP
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
			host = "[" + host + "]"
		}
		if port != "80" {
			host += ":" + port
		}
		c.Boot.HTTPBase = "http://" + host
	}
}

// Validate checks every field and returns the first problem as a *KeyError.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return &KeyError{Key: key, Err: fmt.Errorf(format, args...)}
	}
	if !idRE.MatchString(c.SiteID) {
		return bad("site_id", "want 1 to 128 of [A-Za-z0-9_.:-], got %q", c.SiteID)
	}
	if !idRE.MatchString(c.NodeID) {
		return bad("node_id", "want 1 to 128 of [A-Za-z0-9_.:-], got %q", c.NodeID)
	}
	if c.DataDir == "" {
		return bad("data_dir", "required")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	b := &c.Boot
	for key, addr := range map[string]string{"boot.dhcp_listen": b.DHCPListen, "boot.pxe_listen": b.PXEListen, "boot.tftp_listen": b.TFTPListen, "boot.http_listen": b.HTTPListen} {
		if _, err := netip.ParseAddrPort(addr); err != nil {
			return bad(key, "want IP:port, got %q", addr)
		}
	}
	if b.ProxyDHCP || b.TFTP {
		ip, err := netip.ParseAddr(b.ServerIP)
		if err != nil || !ip.Is4() || ip.IsUnspecified() {
			return bad("boot.server_ip", "want the IPv4 address machines reach this agent at, got %q", b.ServerIP)
		}
	}
	if b.TFTP && b.TFTPRoot == "" {
		return bad("boot.tftp_root", "required when tftp = true")
	}
	if b.TFTPMaxTransfers < 0 || b.TFTPMaxTransfers > 4096 {
		return bad("boot.tftp_max_transfers", "want 0 (default) to 4096, got %d", b.TFTPMaxTransfers)
	}
	if b.TFTPMaxPerSource < 0 || b.TFTPMaxPerSource > 4096 {
		return bad("boot.tftp_max_per_source", "want 0 (default) to 4096, got %d", b.TFTPMaxPerSource)
	}
	if b.HTTPBase != "" {
		u, err := url.Parse(b.HTTPBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return bad("boot.http_base", "want http://HOST[:PORT], got %q", b.HTTPBase)
		}
	}
	for key, im := range map[string]Image{"boot.kernel": b.Kernel, "boot.initrd": b.Initrd} {
		if im == (Image{Format: DefaultImageFormat}) {
			return bad(key, "required: url and sha256 of the site's ramdisk %s", key[len("boot."):])
		}
		if err := im.validate(); err != nil {
			return bad(key, "%v", err)
		}
	}
	if len(b.Cmdline) > 2048 {
		return bad("boot.cmdline", "longer than %d bytes", 2048)
	}
	if b.CacheURL != "" {
		u, err := url.Parse(b.CacheURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("boot.cache_url", "want an http(s) URL, got %q", b.CacheURL)
		}
	}
	if b.CacheMaxBytes < 0 {
		return bad("boot.cache_max_bytes", "must not be negative")
	}
	for k, v := range b.Params {
		if !paramNameRE.MatchString(k) {
			return bad("boot.params."+k, "a parameter name is [a-z][a-z0-9_]{0,31}")
		}
		if !paramValueRE.MatchString(v) {
			return bad("boot.params."+k, "a value is at most 512 of [A-Za-z0-9_.:/+=@,-]")
		}
	}
	if ttl := c.Lease.TTL.Duration; ttl < time.Second || ttl > (10*time.Minute) {
		return bad("lease.ttl", "want %v to %v, got %v", time.Second, (10 * time.Minute), ttl)
	}
	u, err := url.Parse(c.Control.URL)
	if c.Control.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return bad("control.url", "want the control plane's http(s) URL, got %q", c.Control.URL)
	}
	hb := c.Control.Heartbeat.Duration
	if hb < (100*time.Millisecond) || hb > time.Minute {
		return bad("control.heartbeat", "want %v to %v, got %v", (100 * time.Millisecond), time.Minute, hb)
	}
	if hb*3 > c.Lease.TTL.Duration {
		return bad("control.heartbeat", "%v is more than a third of lease.ttl %v: the fence would lapse between heartbeats", hb, c.Lease.TTL.Duration)
	}
	if to := c.Control.Timeout.Duration; to <= 0 || to > time.Minute {
		return bad("control.timeout", "want up to %v, got %v", time.Minute, to)
	}
	if c.Metrics.Listen != "off" {
		if _, err := netip.ParseAddrPort(c.Metrics.Listen); err != nil {
			return bad("metrics.listen", "want IP:port or \"off\", got %q", c.Metrics.Listen)
		}
	}
	return nil
}

func (im Image) validate() error {
	u, err := url.Parse(im.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url: want an http(s) URL, got %q", im.URL)
	}
	if !isSHA256Hex(im.SHA256) {
		return fmt.Errorf("sha256: want 64 lower-case hex digits, got %q", im.SHA256)
	}
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
