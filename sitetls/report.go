package sitetls

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/metric"
)

// ErrCertAddress: the certificate in use does not name an address its clients reach the
// server at, so they would refuse it ([Credentials.CheckAddrs]).
var ErrCertAddress = errors.New("sitetls: the certificate does not name the address")

// CheckAddrs checks that the certificate in use names each valid address of addrs as an
// IP name, as a client that connects to that address (iPXE, UEFI HTTP boot) requires; the
// invalid (zero) addresses are skipped. The error wraps ErrCertAddress and
// crypto/x509's.
func (c *Credentials) CheckAddrs(addrs ...netip.Addr) error {
	leaf := c.Status().Leaf
	for _, ip := range addrs {
		if ip.IsValid() {
			if err := leaf.VerifyHostname(ip.String()); err != nil {
				return fmt.Errorf("%w %v: %w", ErrCertAddress, ip, err)
			}
		}
	}
	return nil
}

// CertReport is what a health page says of a certificate in use ([Credentials.Report]):
// its public parts, never its key.
type CertReport struct {
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	IPAddresses []string  `json:"ip_addresses,omitempty"`
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	// SHA256 is the fingerprint of the certificate (its DER bytes), hex.
	SHA256 string `json:"sha256"`
	// ExpiresSoon: it expires within the warning Report was given (or has expired).
	ExpiresSoon bool `json:"expires_soon"`
	// Error is why the files on disk are not what is served (the last good pair stays in
	// use), or that the one in use has expired.
	Error string `json:"error,omitempty"`

	warn time.Duration // Report's warning
	file string        // Config.CertFile
}

// Report describes the certificate in use at the configured clock's now; it expires soon
// when it expires within warn.
func (c *Credentials) Report(warn time.Duration) *CertReport {
	st := c.Status()
	leaf := st.Leaf
	fp := sha256.Sum256(leaf.Raw)
	r := &CertReport{Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(), DNSNames: leaf.DNSNames,
		NotBefore: leaf.NotBefore.UTC(), NotAfter: leaf.NotAfter.UTC(), SHA256: hex.EncodeToString(fp[:]),
		ExpiresSoon: !c.now().Add(warn).Before(leaf.NotAfter), warn: warn, file: c.cfg.CertFile}
	for _, ip := range leaf.IPAddresses {
		r.IPAddresses = append(r.IPAddresses, ip.String())
	}
	if st.Err != nil {
		r.Error = st.Err.Error()
	}
	return r
}

// Health is the line a health page adds about the certificate it calls name ("boot
// certificate"): "" while it is in order (or r is nil), else why not: a file that does
// not load, or an expiry within Report's warning, naming the file to renew.
func (r *CertReport) Health(name string) string {
	switch {
	case r == nil:
		return ""
	case r.Error != "":
		return name + ": " + r.Error
	case r.ExpiresSoon:
		return name + " expires " + r.NotAfter.Format(time.RFC3339) + ", within " + r.warn.String() + ": renew " + r.file
	}
	return ""
}

var famServerNotAfter = metric.Family{Name: "boot_tls_cert_not_after_seconds",
	Help: "Expiry of the boot certificate in use on the boot server's HTTPS side, in Unix seconds.", Kind: metric.Gauge}

// ServerSamples lists the certificate a boot server presents ([Credentials.OpenServerConfig])
// under the names of package metric's convention: the gauge
// boot_tls_cert_not_after_seconds.
func (c *Credentials) ServerSamples() []metric.Sample {
	return []metric.Sample{famServerNotAfter.Sample(uint64(max(c.Status().NotAfter.Unix(), 0)))}
}
