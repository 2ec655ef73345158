package sitetls_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
)

// TestCertReport: Report gives the certificate's public parts and its fingerprint, says
// it expires soon once within the warning (by the credentials' clock), and Health names
// the expiry and the file to renew then, and nothing before.
func TestCertReport(t *testing.T) {
	clk := clocktest.New(t0)
	ca := newCA(t, clk)
	dir := t.TempDir()
	p := issue(t, ca, sitetlstest.Request{Hosts: []string{"192.0.2.1", "boot.example"}, NotBefore: t0, Lifetime: 10 * 24 * time.Hour})
	f := write(t, p, dir, "boot")
	creds := load(t, sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: writeCA(t, dir, "ca.pem", ca), Clock: clk})

	fp := sha256.Sum256(p.Cert.Raw)
	want := &sitetls.CertReport{Subject: p.Cert.Subject.String(), Issuer: p.Cert.Issuer.String(), DNSNames: []string{"boot.example"},
		IPAddresses: []string{"192.0.2.1"}, NotBefore: t0, NotAfter: t0.Add(10 * 24 * time.Hour), SHA256: hex.EncodeToString(fp[:])}
	got := creds.Report(7 * 24 * time.Hour)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(sitetls.CertReport{})); diff != "" {
		t.Errorf("Report (-want +got):\n%s", diff)
	}
	if h := got.Health("boot certificate"); h != "" {
		t.Errorf("Health with 10 days left, warning 7: %q", h)
	}

	clk.Advance(4 * 24 * time.Hour) // 6 days left
	got = creds.Report(7 * 24 * time.Hour)
	h := got.Health("boot certificate")
	if !got.ExpiresSoon || !strings.HasPrefix(h, "boot certificate expires "+want.NotAfter.Format(time.RFC3339)) ||
		!strings.HasSuffix(h, "within 168h0m0s: renew "+f.cert) {
		t.Errorf("6 days left, warning 7: expires soon %v, %q", got.ExpiresSoon, h)
	}
	if creds.Report(time.Hour).ExpiresSoon {
		t.Error("6 days left expires soon under a warning of an hour")
	}
	var nilReport *sitetls.CertReport
	if h := nilReport.Health("boot certificate"); h != "" {
		t.Errorf("nil report's health %q", h)
	}

	s := creds.ServerSamples()
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0].Name != "boot_tls_cert_not_after_seconds" || s[0].Value != uint64(want.NotAfter.Unix()) {
		t.Errorf("ServerSamples %+v", s)
	}
}

// TestCheckAddrs: the certificate must name every valid address given as an IP name.
func TestCheckAddrs(t *testing.T) {
	clk := clocktest.New(t0)
	ca := newCA(t, clk)
	dir := t.TempDir()
	f := write(t, issue(t, ca, sitetlstest.Request{Hosts: []string{"192.0.2.1", "2001:db8::1"}}), dir, "boot")
	creds := load(t, sitetls.Config{CertFile: f.cert, KeyFile: f.key, CAFile: writeCA(t, dir, "ca.pem", ca), Clock: clk})
	v4, v6, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.9")
	if err := creds.CheckAddrs(v4, v6, netip.Addr{}); err != nil {
		t.Errorf("named addresses: %v", err)
	}
	err := creds.CheckAddrs(v4, other)
	if !errors.Is(err, sitetls.ErrCertAddress) || !strings.Contains(err.Error(), "192.0.2.9") {
		t.Errorf("another address: %v, want ErrCertAddress naming it", err)
	}
}
