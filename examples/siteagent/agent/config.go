package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/tftpd"
)

// Config is the agent's configuration, typed: a Go host builds one from [DefaultConfig]
// without any file; the siteagent command decodes its TOML file onto it
// (examples/siteagent/configfile). [Config.Validate] says which field is wrong.
type Config struct {
	SiteID  string // required
	NodeID  string // required
	KeyFile string // Ed25519 node key (PKCS#8 PEM), created 0600 if missing; "" means DataDir/node.key
	DataDir string // required: boot entries and the image cache live here
	Boot    BootConfig
	Lease   LeaseConfig
	Control ControlConfig
	Metrics MetricsConfig
	BMC     BMCConfig
}

// BootConfig is the boot server: proxy DHCP, TFTP, the /boot/ and /cache/ HTTP handlers.
type BootConfig struct {
	ProxyDHCP  bool           // answer PXE and HTTP boot beside the site's DHCP server
	DHCPListen netip.AddrPort // DefaultConfig: 0.0.0.0:67
	PXEListen  netip.AddrPort // DefaultConfig: 0.0.0.0:4011
	Interface  string         // bind proxy DHCP to this interface (SO_BINDTODEVICE, Linux only); "" means all
	ServerIP   netip.Addr     // required with ProxyDHCP or TFTP: the IPv4 address machines reach this agent at
	TFTP       bool           // serve the iPXE builds over TFTP
	TFTPListen netip.AddrPort // DefaultConfig: 0.0.0.0:69
	// TFTPRoot is the site's directory of iPXE builds (undionly.kpxe, ipxe.efi, ...), served
	// over TFTP and under /boot/files/. "" means siteboot's own builds (package ipxebin),
	// named snponly-x86_64.efi and undionly.kpxe in proxy DHCP's answers.
	TFTPRoot string
	// TFTPLimits bound the TFTP server's transfers (tftpd.Limits, checked by its
	// Validate): at once in all and per machine, the window granted, the first datagram's
	// retries and wait, eviction and the queue of requests waiting for a slot. Zero fields:
	// tftpd's defaults.
	TFTPLimits tftpd.Limits
	HTTPListen netip.AddrPort // DefaultConfig: 0.0.0.0:80
	// HTTPBase is the base URL machines use for /boot/ and /cache/: http(s)://HOST[:PORT].
	// "" means http://ServerIP[:port], the port the HTTP listener got (HTTPListen's, or
	// that of the listener the host handed in). A port of 0 is replaced by that port.
	HTTPBase string

	// Boot over HTTPS (examples/siteagent/README.md, "HTTPS boot"). TLSCertFile, when set, is the boot
	// certificate: PEM, leaf first, for ServerIP (and ServerIP6) as IP names, issued by the
	// site CA in TLSCAFile; TLSKeyFile is its key. The three are re-read when they change
	// (sitetls), and the boot server then listens on HTTPSListen too: iPXE is handed its
	// chain over https, and every URL in scripts (HTTPBase, HTTPBase6, CacheURL by default)
	// is https. The agent's own iPXE builds (TFTPRoot unset) are patched to trust the CA
	// the certificate chains to. "": plain HTTP only.
	TLSCertFile, TLSKeyFile, TLSCAFile string
	// HTTPSListen is the HTTPS address; zero means DefaultHTTPSListen (0.0.0.0:443).
	HTTPSListen netip.AddrPort
	// TLSExpiryWarning is how long before the boot certificate expires /healthz warns of
	// it (siteboot_boot_tls_cert_not_after_seconds gives the expiry itself); zero means
	// DefaultTLSExpiryWarning (7 days).
	TLSExpiryWarning time.Duration
	// RefusePlainHTTP refuses every plain HTTP request (403, counted) except the iPXE builds
	// under /boot/files/, which UEFI HTTP boot fetches before anything trusts the site CA.
	// False: plain HTTP serves everything, for machines whose firmware cannot do TLS.
	RefusePlainHTTP bool
	// FirmwareHTTPS sends UEFI HTTP boot clients to the HTTPS side for the iPXE build too
	// (proxydhcp.Server.HTTPBootTLS): for firmware with the site CA enrolled (OVMF takes it
	// through QEMU's etc/edk2/https/cacerts). Needs TLSCertFile and ProxyDHCP. False: UEFI
	// HTTP boot fetches the build over plain HTTP.
	FirmwareHTTPS bool
	// SyslogListen, if set, is the UDP address where the agent receives machines' own
	// console (iPXE's syslog output) into their boot timeline (package syslogd; 514 is
	// syslog's port). Zero, the default: off.
	SyslogListen netip.AddrPort
	// NoTimeline turns the boot events off: no component gets an Events sink, no boot
	// timeline is kept, and /debug/machines answers 503 (a benchmark compares the two).
	// SyslogListen needs the timeline. False, the default: on.
	NoTimeline bool

	Kernel  Image  // the site's ramdisk kernel, served from the cache; required
	Initrd  Image  // the site's ramdisk initrd, served from the cache; required
	Cmdline string // appended after the bc.* parameters

	// CacheURL is where machines reach the image cache (its /t/GRANT/SHA256 paths): the
	// base of bc.cache and of the kernel and initrd URLs. "" means HTTPBase + "/cache"; set
	// it when the cache is reached under another name.
	CacheURL      string
	CacheMaxBytes int64 // 0: no budget
	// AllowedSourceNetworks are networks image sources may be on although the cache's
	// source policy refuses them (loopback, link-local, this host's own addresses): a mirror
	// on the agent's host, a lab. Nil: none.
	AllowedSourceNetworks []netip.Prefix
	// ManagementNetworks are the site's BMC networks: refused as image sources (unless in
	// AllowedSourceNetworks), as loopback and link-local are. Nil: none.
	ManagementNetworks []netip.Prefix
	// Relays, when set, are the DHCP relays whose relayed requests proxy DHCP answers; a
	// request naming another giaddr (for DHCPv6, a RELAY-FORW from another address) is
	// dropped and counted. IPv4 and IPv6 addresses. Nil: every relay.
	Relays []netip.Addr
	// Segments are provisioning subnets besides those of the interface a request comes in
	// on: the subnets behind relays, whose machines send their port-4011 requests straight
	// to the agent (proxydhcp.Server.Segments). Without them the subnet behind a relay is
	// learned per machine from its relayed DISCOVER (a /24, or a /64). Nil: none.
	Segments []netip.Prefix

	// IPv6 boot (DESIGN.md V1; see ipv6.go and the package doc, "IPv6"). ServerIP6, when
	// set, is the global IPv6 address machines reach this agent at: TFTP and HTTP then
	// listen on IPv4 and IPv6 at once (one dual-stack socket each, so TFTPListen and
	// HTTPListen must be wildcard addresses), and machines that come over IPv6 are named
	// URLs under it (HTTPBase6). DHCPv6 makes proxy DHCP answer DHCPv6 too (UDP 547 and
	// [::]:4011); it needs ProxyDHCP and ServerIP6.
	ServerIP6    netip.Addr
	DHCPv6       bool
	DHCPv6Listen netip.AddrPort // DefaultConfig: [::]:547
	PXEListen6   netip.AddrPort // DefaultConfig: [::]:4011
	// HTTPBase6 is HTTPBase for machines that come over IPv6: http(s)://HOST[:PORT]. ""
	// means http://[ServerIP6][:port], with the HTTP listener's port.
	HTTPBase6 string

	// NonceWindow is how long after its proxy DHCP answer a machine may fetch its script
	// with the answer's boot nonce, retries and token waits included (S1): 10s to 1h; zero
	// means DefaultNonceWindow. Used only with ProxyDHCP.
	NonceWindow time.Duration

	// Secure Boot (DESIGN.md SB1; see secureboot.go and the package doc, "Secure Boot").
	// SecureBoot makes every x86-64 UEFI entry that does not say otherwise
	// (Entry.SecureBoot) boot through shim and the signed GRUB, which then fetch everything
	// over TFTP: it needs ProxyDHCP, TFTP and the two files below. Without it, an entry that
	// says secure_boot is served when the files are there.
	SecureBoot bool
	// Shim is the shim signed by the UEFI CA that the firmware loads (served as
	// shimx64.efi); "" means DefaultShim, Debian's shim-signed.
	Shim string
	// GRUB is the signed network GRUB that shim loads (served as grubx64.efi); "" means
	// DefaultGRUB, Debian's grub-efi-amd64-signed.
	GRUB string

	// Params are site-wide bc.* parameters (gateway, pins, join key), without the "bc." prefix.
	Params map[string]string
}

// Image names a cache image: where to pull it, the digest it must match (64 lower-case hex
// digits) and its format ("" means DefaultImageFormat), as the control plane names its own.
type Image = sitelink.CacheImage

// LeaseConfig is the boot lease as this agent sees it.
type LeaseConfig struct {
	TTL time.Duration // used when the control plane's word gives none; DefaultConfig: 15s
}

// ControlConfig says how the agent reaches its control plane.
type ControlConfig struct {
	URL       string        // base URL of the control plane's agent API; required
	Heartbeat time.Duration // DefaultConfig: 5s; at most a third of Lease.TTL
	Timeout   time.Duration // per request; DefaultConfig: 4s; at most Lease.TTL

	// The link's mutual TLS (DESIGN.md G3): the agent presents CertFile, its site
	// certificate for the node key, and verifies the control plane against CAFile. Both are
	// required by the agent's own link (sitelink.LinkConfig.Open) for an https URL; a host whose Link
	// carries its own credentials may leave them empty. They are re-read when they change.
	CertFile string
	// KeyFile is the site certificate's key; "" means the node key (Config.KeyFile). It must
	// be the node key: the agent checks at start that the certificate is for it.
	KeyFile string
	CAFile  string
	// IssuerFile is the CA bundle that issues site certificates, when it is not CAFile (the
	// control plane's CA): a renewed certificate is adopted only if it chains to it, so the
	// agent never swaps its certificate for one the control plane would refuse
	// (sitetls.Config.IssuerFile). "" means CAFile.
	IssuerFile string
	// Insecure allows a plain http:// URL: no certificate either way, so whoever answers
	// the URL is the control plane. Every start logs a warning and /healthz says so.
	Insecure bool
}

// MetricsConfig places /metrics and /healthz.
type MetricsConfig struct {
	Listen netip.AddrPort // DefaultConfig: 127.0.0.1:9464; the zero AddrPort turns metrics off
}

// Defaults of [DefaultConfig].
var (
	DefaultDHCPListen = netip.MustParseAddrPort("0.0.0.0:67")
	DefaultPXEListen  = netip.MustParseAddrPort("0.0.0.0:4011")
	DefaultTFTPListen = netip.MustParseAddrPort("0.0.0.0:69")
	DefaultHTTPListen = netip.MustParseAddrPort("0.0.0.0:80")
	DefaultMetrics    = netip.MustParseAddrPort("127.0.0.1:9464")
)

// Defaults of [DefaultConfig] and of empty fields.
const (
	DefaultLeaseTTL    = 15 * time.Second
	DefaultHeartbeat   = 5 * time.Second
	DefaultTimeout     = 4 * time.Second
	DefaultImageFormat = bootserver.DefaultImageFormat
	DefaultKeyFileName = "node.key"
)

// Files under the data directory.
const (
	EntriesFileName = "boot-entries.json"
	CacheDirName    = "cache"
)

// DefaultConfig returns a Config with every default set; SiteID, NodeID, DataDir,
// Boot.Kernel, Boot.Initrd and Control.URL (and Boot.ServerIP for proxy DHCP or TFTP) are
// the host's to fill in.
func DefaultConfig() Config {
	return Config{
		Boot: BootConfig{
			DHCPListen: DefaultDHCPListen,
			PXEListen:  DefaultPXEListen,
			TFTPListen: DefaultTFTPListen,
			HTTPListen: DefaultHTTPListen,

			DHCPv6Listen: DefaultDHCPv6Listen,
			PXEListen6:   DefaultPXEListen6,
		},
		Lease:   LeaseConfig{TTL: DefaultLeaseTTL},
		Control: ControlConfig{Heartbeat: DefaultHeartbeat, Timeout: DefaultTimeout},
		Metrics: MetricsConfig{Listen: DefaultMetrics},
	}
}

var (
	idRE         = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
	paramNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	paramValueRE = regexp.MustCompile(`^[A-Za-z0-9_.:/+=@,-]{0,512}$`)
)

// FieldError is a configuration error naming the field at fault, as a Go path
// ("Boot.ServerIP", "Boot.Params[gateway]").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("agent: config: %s: %v", e.Field, e.Err) }
func (e *FieldError) Unwrap() error { return e.Err }

var _ error = &FieldError{}

// Validate checks every field and returns the first problem as a *FieldError.
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if !idRE.MatchString(c.SiteID) {
		return bad("SiteID", "want 1 to 128 of [A-Za-z0-9_.:-], got %q", c.SiteID)
	}
	if !idRE.MatchString(c.NodeID) {
		return bad("NodeID", "want 1 to 128 of [A-Za-z0-9_.:-], got %q", c.NodeID)
	}
	if c.DataDir == "" {
		return bad("DataDir", "required")
	}
	// A data dir that does not exist yet is created at start; anything else there must be a
	// directory.
	if fi, err := os.Stat(c.DataDir); err == nil && !fi.IsDir() {
		return bad("DataDir", "%s exists and is not a directory", c.DataDir)
	}
	b := &c.Boot
	for _, l := range []struct {
		field string
		addr  netip.AddrPort
		used  bool
	}{
		{"Boot.DHCPListen", b.DHCPListen, b.ProxyDHCP}, {"Boot.PXEListen", b.PXEListen, b.ProxyDHCP},
		{"Boot.TFTPListen", b.TFTPListen, b.TFTP}, {"Boot.HTTPListen", b.HTTPListen, true},
		{"Boot.DHCPv6Listen", b.DHCPv6Listen, b.ProxyDHCP && b.DHCPv6}, {"Boot.PXEListen6", b.PXEListen6, b.ProxyDHCP && b.DHCPv6},
	} {
		if l.used && !l.addr.IsValid() {
			return bad(l.field, "want IP:port")
		}
	}
	if b.ProxyDHCP || b.TFTP {
		if ip := b.ServerIP; !ip.Is4() || ip.IsUnspecified() {
			return bad("Boot.ServerIP", "want the IPv4 address machines reach this agent at, got %v", ip)
		}
	}
	if b.NoTimeline && b.SyslogListen.IsValid() {
		return bad("Boot.SyslogListen", "needs the boot timeline, which Boot.NoTimeline turns off")
	}
	if err := c.validateBootTLS(); err != nil {
		return err
	}
	if le := (*tftpd.LimitError)(nil); errors.As(b.TFTPLimits.Validate(), &le) {
		return bad("Boot.TFTPLimits."+le.Field, "want %s, got %s", le.Want, le.Got)
	}
	if b.HTTPBase != "" {
		if err := bootserver.CheckBaseURL(b.HTTPBase); err != nil {
			return &FieldError{Field: "Boot.HTTPBase", Err: err}
		}
	}
	for _, im := range []struct {
		field string
		im    Image
	}{{"Boot.Kernel", b.Kernel}, {"Boot.Initrd", b.Initrd}} {
		if im.im.URL == "" && im.im.SHA256 == "" {
			return bad(im.field, "required: the URL and SHA256 of the site's ramdisk")
		}
		if err := im.im.Validate(); err != nil {
			return &FieldError{Field: im.field, Err: err}
		}
	}
	if len(b.Cmdline) > 2048 {
		return bad("Boot.Cmdline", "longer than %d bytes", 2048)
	}
	if b.CacheURL != "" {
		if err := bootserver.CheckCacheURL(b.CacheURL); err != nil {
			return &FieldError{Field: "Boot.CacheURL", Err: err}
		}
	}
	if b.CacheMaxBytes < 0 {
		return bad("Boot.CacheMaxBytes", "must not be negative")
	}
	for i, p := range b.AllowedSourceNetworks {
		if !p.IsValid() {
			return bad("Boot.AllowedSourceNetworks["+strconv.Itoa(i)+"]", "not a network")
		}
	}
	for i, p := range b.ManagementNetworks {
		if !p.IsValid() {
			return bad("Boot.ManagementNetworks["+strconv.Itoa(i)+"]", "not a network")
		}
	}
	for i, p := range b.Segments {
		if !p.IsValid() || p.Bits() == 0 {
			return bad("Boot.Segments["+strconv.Itoa(i)+"]", "want a subnet, got %v", p)
		}
	}
	for i, ip := range b.Relays {
		if !ip.IsValid() || ip.Is4In6() || ip.IsUnspecified() || ip.IsMulticast() || ip.Zone() != "" {
			return bad("Boot.Relays["+strconv.Itoa(i)+"]", "want a relay's IPv4 or IPv6 address, got %v", ip)
		}
	}
	if err := c.validateIPv6(); err != nil {
		return err
	}
	for k, v := range b.Params {
		if !paramNameRE.MatchString(k) {
			return bad("Boot.Params["+k+"]", "a parameter name is [a-z][a-z0-9_]{0,31}")
		}
		if !paramValueRE.MatchString(v) {
			return bad("Boot.Params["+k+"]", "a value is at most 512 of [A-Za-z0-9_.:/+=@,-]")
		}
	}
	if err := c.validateServing(); err != nil {
		return err
	}
	if err := c.validateSecureBoot(); err != nil {
		return err
	}
	if ttl := c.Lease.TTL; ttl < time.Second || ttl > 10*time.Minute {
		return bad("Lease.TTL", "want %v to %v, got %v", time.Second, 10*time.Minute, ttl)
	}
	if err := c.Control.link().Validate(); err != nil {
		return linkError(err)
	}
	hb := c.Control.Heartbeat
	if hb < 100*time.Millisecond || hb > time.Minute {
		return bad("Control.Heartbeat", "want %v to %v, got %v", 100*time.Millisecond, time.Minute, hb)
	}
	if hb*3 > c.Lease.TTL {
		return bad("Control.Heartbeat", "%v is more than a third of Lease.TTL %v: the fence would lapse between heartbeats", hb, c.Lease.TTL)
	}
	if to := c.Control.Timeout; to <= 0 || to > time.Minute {
		return bad("Control.Timeout", "want up to %v, got %v", time.Minute, to)
	}
	if to := c.Control.Timeout; to > c.Lease.TTL {
		return bad("Control.Timeout", "%v is longer than the lease TTL %v: a heartbeat still waiting would outlive the lease it renews", to, c.Lease.TTL)
	}
	if err := c.BMC.validate(); err != nil {
		return err
	}
	return nil
}

// keyFile is the node key's path: KeyFile, or DataDir/node.key.
func (c *Config) keyFile() string {
	if c.KeyFile != "" {
		return c.KeyFile
	}
	return filepath.Join(c.DataDir, DefaultKeyFileName)
}
