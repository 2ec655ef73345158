package agent

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/sitetls"
)

// DefaultHTTPSListen is the boot server's HTTPS address when Boot.TLSCertFile is set and
// Boot.HTTPSListen is zero.
var DefaultHTTPSListen = netip.MustParseAddrPort("0.0.0.0:443")

// tlsOn reports whether the boot server has an HTTPS side.
func (b *BootConfig) tlsOn() bool { return b.TLSCertFile != "" }

// validateBootTLS checks the boot certificate's settings.
func (c *Config) validateBootTLS() error {
	b := &c.Boot
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case !b.tlsOn() && (b.TLSKeyFile != "" || b.TLSCAFile != "" || b.RefusePlainHTTP || b.HTTPSListen.IsValid() || b.FirmwareHTTPS):
		return bad("Boot.TLSCertFile", "required with Boot.TLSKeyFile, Boot.TLSCAFile, Boot.HTTPSListen, Boot.RefusePlainHTTP and Boot.FirmwareHTTPS")
	case b.FirmwareHTTPS && !b.ProxyDHCP:
		return bad("Boot.FirmwareHTTPS", "needs Boot.ProxyDHCP: proxy DHCP names the build's URL")
	case b.TLSExpiryWarning < 0:
		return bad("Boot.TLSExpiryWarning", "want zero (the default, %v) or more, got %v", DefaultTLSExpiryWarning, b.TLSExpiryWarning)
	case b.tlsOn() && (b.TLSKeyFile == "" || b.TLSCAFile == ""):
		return bad("Boot.TLSKeyFile", "Boot.TLSKeyFile and Boot.TLSCAFile are required with Boot.TLSCertFile")
	case b.tlsOn() && !b.ServerIP.IsValid():
		return bad("Boot.ServerIP", "required with Boot.TLSCertFile: the boot certificate is for it")
	case b.tlsOn() && b.HTTPBase != "" && !strings.HasPrefix(b.HTTPBase, "https://"):
		return bad("Boot.HTTPBase", "want https://... with Boot.TLSCertFile, got %q", b.HTTPBase)
	case b.tlsOn() && b.CacheURL != "" && !strings.HasPrefix(b.CacheURL, "https://"):
		return bad("Boot.CacheURL", "want https://... with Boot.TLSCertFile (cache reads carry grants), got %q", b.CacheURL)
	case b.tlsOn() && b.HTTPBase6 != "" && !strings.HasPrefix(b.HTTPBase6, "https://"):
		return bad("Boot.HTTPBase6", "want https://... with Boot.TLSCertFile, got %q", b.HTTPBase6)
	}
	return nil
}

// httpsListen is the HTTPS address to bind: HTTPSListen, else DefaultHTTPSListen; zero
// without TLS.
func (b *BootConfig) httpsListen() netip.AddrPort {
	switch {
	case !b.tlsOn():
		return netip.AddrPort{}
	case b.HTTPSListen.IsValid():
		return b.HTTPSListen
	}
	return DefaultHTTPSListen
}

// ErrBootCertAddress: the boot certificate does not name an address machines reach the
// agent at, so iPXE would refuse it.
var ErrBootCertAddress = errors.New("the boot certificate does not name the address")

// loadBootTLS loads the boot certificate (Boot.TLSCertFile, re-read when it changes, as the
// link's) and checks at start that it names Boot.ServerIP and Boot.ServerIP6 and chains to
// Boot.TLSCAFile, whose root the iPXE builds are made to trust.
func (a *Agent) loadBootTLS() error {
	b := &a.cfg.Boot
	if !b.tlsOn() {
		return nil
	}
	creds, err := sitetls.Load(sitetls.Config{CertFile: b.TLSCertFile, KeyFile: b.TLSKeyFile, CAFile: b.TLSCAFile,
		Clock: a.clock, Logger: a.log.With("component", "boottls")})
	if err != nil {
		return fmt.Errorf("agent: boot certificate: %w", err)
	}
	leaf := creds.Status().Leaf
	for _, ip := range []netip.Addr{b.ServerIP, b.ServerIP6} {
		if ip.IsValid() {
			if err := leaf.VerifyHostname(ip.String()); err != nil {
				return &FieldError{Field: "Boot.TLSCertFile", Err: fmt.Errorf("%w %v: %w", ErrBootCertAddress, ip, err)}
			}
		}
	}
	root, err := creds.Root()
	if err != nil {
		return &FieldError{Field: "Boot.TLSCertFile", Err: fmt.Errorf("%s against %s: %w", b.TLSCertFile, b.TLSCAFile, err)}
	}
	a.bootTLS = creds
	a.log.Info("boot over https", "ca", root.Subject.String(), "not_after", leaf.NotAfter, "plain_http", !b.RefusePlainHTTP)
	return nil
}

// firmwareSuites are the boot server's TLS 1.2 cipher suites with Boot.FirmwareHTTPS: Go's
// ECDHE suites, which iPXE and any client that offers them get (Go's server prefers them),
// and the two RSA key exchange suites with AES-GCM, the best that EDK2 firmware of 2022
// offers besides DHE, which Go does not implement (OVMF 2022.11 offers DHE and RSA key
// exchange only). RSA key exchange has no forward secrecy; a client gets it only when it
// offers nothing better, and the firmware fetches over it the iPXE build, which holds no
// secret.
func firmwareSuites() []uint16 {
	var out []uint16
	for _, cs := range tls.CipherSuites() {
		out = append(out, cs.ID)
	}
	return append(out, tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384)
}

// bootTLSConfig is the boot server's TLS configuration: the boot certificate re-read on
// change, with its CA sent; with Boot.FirmwareHTTPS, the suites UEFI firmware speaks too.
func (a *Agent) bootTLSConfig() *tls.Config {
	cfg := a.bootTLS.OpenServerConfig()
	if a.cfg.Boot.FirmwareHTTPS {
		cfg.CipherSuites = firmwareSuites()
	}
	return cfg
}

// ownBuilds are siteboot's iPXE builds (ipxebin), served over TFTP and under /boot/files/
// when the site names no directory of its own (Boot.TFTPRoot), trusting the boot
// certificate's CA when the boot server has an HTTPS side.
func (a *Agent) ownBuilds() ipxebin.FS {
	f := ipxebin.FS{}
	if a.bootTLS != nil {
		f.CA = a.bootTLS.Root
	}
	return f
}

// ownBootFiles is proxy DHCP's table for the agent's own builds: snponly for x86-64 and
// arm64 UEFI (PXE and HTTP boot: the firmware's network stack, which works where iPXE's own
// drivers fail on some NICs), undionly.kpxe for BIOS (ipxebin repacks it to trust the site CA).
func (a *Agent) ownBootFiles() proxydhcp.BootFiles {
	t := proxydhcp.DefaultBootFiles()
	t.ByArch = map[hwid.Arch]string{
		hwid.ArchX86_64EFI:     ipxebin.SnponlyX8664,
		hwid.ArchEFIBC:         ipxebin.SnponlyX8664,
		hwid.ArchX86_64EFIHTTP: ipxebin.SnponlyX8664,
		hwid.ArchARM64EFI:      ipxebin.SnponlyARM64,
		hwid.ArchARM64EFIHTTP:  ipxebin.SnponlyARM64,
		hwid.ArchBIOS:          ipxebin.UndionlyKPXE,
	}
	return t
}

// DefaultTLSExpiryWarning is how long before the boot certificate expires /healthz warns
// of it, when Boot.TLSExpiryWarning is zero.
const DefaultTLSExpiryWarning = 7 * 24 * time.Hour

// tlsExpiryWarning is Boot.TLSExpiryWarning, else DefaultTLSExpiryWarning.
func (b *BootConfig) tlsExpiryWarning() time.Duration {
	if b.TLSExpiryWarning > 0 {
		return b.TLSExpiryWarning
	}
	return DefaultTLSExpiryWarning
}

var famBootCertNotAfter = metric.Family{Name: "boot_tls_cert_not_after_seconds",
	Help: "Expiry of the boot certificate in use on the boot server's HTTPS side, in Unix seconds.", Kind: metric.Gauge}

// bootTLSSamples are the boot certificate's gauges; none without it.
func (a *Agent) bootTLSSamples() []metric.Sample {
	if a.bootTLS == nil {
		return nil
	}
	return []metric.Sample{famBootCertNotAfter.Sample(uint64(max(a.bootTLS.Status().NotAfter.Unix(), 0)))}
}

// bootCert is what /healthz says of the boot certificate in use: its public parts, never
// its key.
type bootCert struct {
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	IPAddresses []string  `json:"ip_addresses,omitempty"`
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	// SHA256 is the fingerprint of the certificate (its DER bytes), hex.
	SHA256 string `json:"sha256"`
	// ExpiresSoon: it expires within Boot.TLSExpiryWarning (or has expired).
	ExpiresSoon bool `json:"expires_soon"`
	// Error is why the files on disk are not what is served (the last good pair stays in
	// use), or that the one in use has expired.
	Error string `json:"error,omitempty"`
}

// bootCertStatus describes the boot certificate in use; nil without one.
func (a *Agent) bootCertStatus() *bootCert {
	if a.bootTLS == nil {
		return nil
	}
	st := a.bootTLS.Status()
	leaf := st.Leaf
	fp := sha256.Sum256(leaf.Raw)
	c := &bootCert{Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(), DNSNames: leaf.DNSNames,
		NotBefore: leaf.NotBefore.UTC(), NotAfter: leaf.NotAfter.UTC(), SHA256: hex.EncodeToString(fp[:]),
		ExpiresSoon: !a.clock.Now().Add(a.cfg.Boot.tlsExpiryWarning()).Before(leaf.NotAfter)}
	for _, ip := range leaf.IPAddresses {
		c.IPAddresses = append(c.IPAddresses, ip.String())
	}
	if st.Err != nil {
		c.Error = st.Err.Error()
	}
	return c
}

// bootTLSHealth is /healthz's line on the boot certificate: "" while it is in order, else
// why not (a file that does not load, an expiry within Boot.TLSExpiryWarning).
func (a *Agent) bootTLSHealth(c *bootCert) string {
	switch {
	case c == nil:
		return ""
	case c.Error != "":
		return "boot certificate: " + c.Error
	case c.ExpiresSoon:
		return "boot certificate expires " + c.NotAfter.Format(time.RFC3339) + ", within " +
			a.cfg.Boot.tlsExpiryWarning().String() + ": renew " + a.cfg.Boot.TLSCertFile
	}
	return ""
}
