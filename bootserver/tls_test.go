package bootserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/metric"
)

// selfSigned is a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "boot"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// TestServerHTTPS: with an HTTPS side and plain HTTP refused, the chain script comes over
// TLS and names https URLs, iPXE is handed the HTTPS port by proxy DHCP, and a plain request
// gets 403 with the reason, counted; the iPXE builds stay on plain HTTP.
func TestServerHTTPS(t *testing.T) {
	cert, pool := selfSigned(t)
	l := listen(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.HTTPS = ln
	cfg := config(t, l, nil)
	cfg.BaseURL = "https://" + ln.Addr().String()
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	cfg.RefusePlainHTTP = true
	cfg.DHCP.HTTPPort = l.HTTP.Addr().(*net.TCPAddr).Port
	cfg.Boot.Files = cfg.Builds
	cfg.Boot.Syslog = netip.MustParseAddr("192.0.2.1") // dropped: iPXE's console is in clear
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.DHCP.HTTPSPort, ln.Addr().(*net.TCPAddr).Port; got != want {
		t.Errorf("proxy DHCP's HTTPSPort %d, want the HTTPS listener's %d", got, want)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		srv.Shutdown(t.Context())
		if err := <-served; !errors.Is(err, bootserver.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12}}}
	resp, err := tlsClient.Get(cfg.BaseURL + ipxe.PathChain)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), cfg.BaseURL+ipxe.PathBoot) {
		t.Errorf("chain over https: %d\n%s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "syslog") {
		t.Errorf("the chain over https sends iPXE's console to syslog:\n%s", body)
	}
	plain := "http://" + l.HTTP.Addr().String()
	if st, body := get(t, plain+ipxe.PathChain); st != http.StatusForbidden || !strings.Contains(body, "https") {
		t.Errorf("plain chain: %d %q, want 403 naming https", st, body)
	}
	if st, body := get(t, plain+ipxe.PathFiles+"ipxe.efi"); st != http.StatusOK || body != "the iPXE build" {
		t.Errorf("plain iPXE build: %d %q", st, body)
	}
	if got := srv.Stats().PlainRefused; got != 1 {
		t.Errorf("PlainRefused = %d, want 1", got)
	}
	// An embedder exports the refusals under the Server's own family.
	samples := srv.Samples()
	if err := metric.Check(samples); err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 || samples[0].Name != "boot_plain_http_refused_total" || samples[0].Value != 1 {
		t.Errorf("Samples() = %+v, want boot_plain_http_refused_total 1", samples)
	}
}

// TestServerTLSConfig: refusing plain HTTP needs an HTTPS side, and an HTTPS socket needs
// its TLS configuration.
func TestServerTLSConfig(t *testing.T) {
	l := listen(t)
	defer closeAll(l)
	cfg := config(t, l, nil)
	cfg.RefusePlainHTTP = true
	if _, err := bootserver.New(cfg); !errors.Is(err, bootserver.ErrInvalid) {
		t.Errorf("RefusePlainHTTP without TLS: %v", err)
	}
	cfg.RefusePlainHTTP = false
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2 := listen(t)
	l2.HTTPS = ln
	if err := srv.Serve(l2); err == nil || errors.Is(err, bootserver.ErrServerClosed) {
		t.Errorf("Serve with HTTPS and no TLS: %v", err)
	}
}
