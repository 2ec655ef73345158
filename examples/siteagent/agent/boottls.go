package agent

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/ipxebin"
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
var ErrBootCertAddress = sitetls.ErrCertAddress

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
	if err := creds.CheckAddrs(b.ServerIP, b.ServerIP6); err != nil {
		return &FieldError{Field: "Boot.TLSCertFile", Err: err}
	}
	root, err := creds.Root()
	if err != nil {
		return &FieldError{Field: "Boot.TLSCertFile", Err: fmt.Errorf("%s against %s: %w", b.TLSCertFile, b.TLSCAFile, err)}
	}
	a.bootTLS = creds
	a.log.Info("boot over https", "ca", root.Subject.String(), "not_after", creds.Status().NotAfter, "plain_http", !b.RefusePlainHTTP)
	return nil
}

// bootTLSConfig is the boot server's TLS configuration: the boot certificate re-read on
// change, with its CA sent; with Boot.FirmwareHTTPS, the suites UEFI firmware speaks too.
func (a *Agent) bootTLSConfig() *tls.Config {
	cfg := a.bootTLS.OpenServerConfig()
	if a.cfg.Boot.FirmwareHTTPS {
		cfg.CipherSuites = bootserver.FirmwareCipherSuites()
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

// bootCertStatus describes the boot certificate in use for /healthz; nil without one.
func (a *Agent) bootCertStatus() *sitetls.CertReport {
	if a.bootTLS == nil {
		return nil
	}
	return a.bootTLS.Report(a.cfg.Boot.tlsExpiryWarning())
}
