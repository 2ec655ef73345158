package agent_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/examples/siteagent/agent"
	"github.com/bettercompute/siteboot/ipxebin"
	"github.com/bettercompute/siteboot/sitetls/sitetlstest"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

// bootTLS gives cfg a boot certificate for 127.0.0.1 from the harness's site CA, its own
// iPXE builds and an HTTPS side on loopback.
func (h *harness) bootTLS(t *testing.T, cfg *agent.Config, hosts ...string) {
	t.Helper()
	p, err := h.tls.CA.Issue(sitetlstest.Request{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := &cfg.Boot
	b.TLSCertFile, b.TLSKeyFile, b.TLSCAFile = filepath.Join(dir, "boot.pem"), filepath.Join(dir, "boot.key"), h.tls.CAFile
	if err := p.WriteFiles(b.TLSCertFile, b.TLSKeyFile); err != nil {
		t.Fatal(err)
	}
	b.HTTPSListen, b.TFTPRoot = netip.MustParseAddrPort("127.0.0.1:0"), ""
}

// TestBootOverHTTPS: with a boot certificate, the scripts' URLs are https, the chain script
// comes over TLS under the site CA with the CA at the end of the chain, a plain request is
// refused (403, counted in /metrics) when the site refuses plain HTTP, and the agent's own
// iPXE build comes over TFTP trusting the site CA.
func TestBootOverHTTPS(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	h.bootTLS(t, cfg, "127.0.0.1")
	cfg.Boot.RefusePlainHTTP = true
	r, _ := h.start(t, cfg, h.plane.Link())

	base := r.HTTPBase()
	if want := "https://" + r.Addrs()["https"]; base != want {
		t.Fatalf("HTTPBase %q, want %q", base, want)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: h.tls.CA.Pool(), MaxVersion: tls.VersionTLS12, Time: h.clk.Now}}}
	resp, err := client.Get(base + "/boot/chain.ipxe")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), base+"/boot/ipxe") {
		t.Errorf("chain over https: %d\n%s", resp.StatusCode, body)
	}
	if pc := resp.TLS.PeerCertificates; !bytes.Equal(pc[len(pc)-1].Raw, h.tls.CA.Cert.Raw) {
		t.Error("the chain does not end with the site CA, which iPXE checks by fingerprint")
	}

	plain := "http://" + r.Addrs()["http"]
	if st := status(t, plain+"/boot/chain.ipxe"); st != http.StatusForbidden {
		t.Errorf("plain chain: %d, want 403", st)
	}
	_, metrics := get(t, "http://"+r.Addrs()["metrics"]+"/metrics")
	if !strings.Contains(metrics, "siteboot_boot_plain_http_refused_total 1\n") {
		t.Errorf("metrics lack one plain refusal:\n%s", grepLines(metrics, "plain"))
	}

	bin, _, err := tftpdtest.Fetch(r.Addrs()["tftp"], ipxebin.SnponlyX8664, 1468)
	if err != nil {
		t.Fatal(err)
	}
	fp := sha256.Sum256(h.tls.CA.Cert.Raw)
	if !bytes.Contains(bin, fp[:]) || bytes.Contains(bin, ipxebin.PlaceholderFingerprint[:]) {
		t.Error("the iPXE build over TFTP does not trust the site CA")
	}
	kpxe, _, err := tftpdtest.Fetch(r.Addrs()["tftp"], ipxebin.UndionlyKPXE, 1468)
	if want, _ := (&ipxebin.Builds{CA: h.tls.CA.Cert}).ReadFile(ipxebin.UndionlyKPXE); err != nil || want == nil || !bytes.Equal(kpxe, want) {
		t.Errorf("the BIOS build over TFTP (%v) is not the one repacked to trust the site CA", err)
	}
}

// TestBootCertMustNameServerIP: a boot certificate for another address is refused at start,
// naming the field, since iPXE would refuse it.
func TestBootCertMustNameServerIP(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	h.bootTLS(t, cfg, "192.0.2.9")
	_, err := agent.New(t.Context(), cfg, h.plane.Link(), agent.Options{Signer: h.key, Clock: h.clk})
	var fe *agent.FieldError
	if !errors.As(err, &fe) || fe.Field != "Boot.TLSCertFile" || !errors.Is(err, agent.ErrBootCertAddress) {
		t.Errorf("New: %v, want a Boot.TLSCertFile error wrapping ErrBootCertAddress", err)
	}
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOwnBuildsPlain: without a boot certificate and without a TFTP root, the agent serves
// siteboot's builds as built, BIOS included, and its URLs stay plain http.
func TestOwnBuildsPlain(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.Boot.TFTPRoot = ""
	r, _ := h.start(t, cfg, h.plane.Link())
	if base := r.HTTPBase(); !strings.HasPrefix(base, "http://") {
		t.Errorf("HTTPBase %q, want plain http", base)
	}
	if _, ok := r.Addrs()["https"]; ok {
		t.Error("an HTTPS socket without a boot certificate")
	}
	bin, _, err := tftpdtest.Fetch(r.Addrs()["tftp"], ipxebin.UndionlyKPXE, 1468)
	if err != nil || len(bin) == 0 {
		t.Fatalf("BIOS build over TFTP: %d bytes, %v", len(bin), err)
	}
	efi, _, err := tftpdtest.Fetch(r.Addrs()["tftp"], ipxebin.SnponlyX8664, 1468)
	if err != nil || !bytes.Contains(efi, ipxebin.PlaceholderFingerprint[:]) {
		t.Errorf("x86-64 build over TFTP: %v; want it as built, trusting only the placeholder", err)
	}
	for _, name := range []string{ipxebin.SnponlyX8664, ipxebin.SnponlyARM64} {
		if st := status(t, "http://"+r.Addrs()["http"]+"/boot/files/"+name); st != http.StatusOK {
			t.Errorf("/boot/files/%s: %d", name, st)
		}
	}
}

// TestFirmwareSuites: a client offering only RSA key exchange (as EDK2 firmware of 2022
// does, besides DHE) is served with firmware_https and refused without; a client offering
// ECDHE still gets ECDHE.
func TestFirmwareSuites(t *testing.T) {
	for _, firmware := range []bool{false, true} {
		t.Run(strconv.FormatBool(firmware), func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(t.TempDir())
			h.bootTLS(t, cfg, "127.0.0.1")
			cfg.Boot.FirmwareHTTPS = firmware
			key, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			p, err := h.tls.CA.Issue(sitetlstest.Request{Hosts: []string{"127.0.0.1"}, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WriteFiles(cfg.Boot.TLSCertFile, cfg.Boot.TLSKeyFile); err != nil {
				t.Fatal(err)
			}
			r, _ := h.start(t, cfg, h.plane.Link())
			dial := func(suites ...uint16) (uint16, error) {
				c, err := tls.Dial("tcp", r.Addrs()["https"], &tls.Config{RootCAs: h.tls.CA.Pool(), MaxVersion: tls.VersionTLS12,
					CipherSuites: suites, Time: h.clk.Now})
				if err != nil {
					return 0, err
				}
				defer c.Close()
				return c.ConnectionState().CipherSuite, nil
			}
			got, err := dial(tls.TLS_RSA_WITH_AES_128_GCM_SHA256)
			if firmware && (err != nil || got != tls.TLS_RSA_WITH_AES_128_GCM_SHA256) {
				t.Errorf("RSA key exchange with firmware_https: %x, %v", got, err)
			}
			if !firmware && err == nil {
				t.Error("RSA key exchange served without firmware_https")
			}
			if got, err := dial(tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_128_GCM_SHA256); err != nil || got != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
				t.Errorf("a client offering ECDHE got %x, %v; want ECDHE", got, err)
			}
		})
	}
}

// TestBootOverHTTPSNoSyslog: iPXE's console, which prints every URL it fetches (cache grants
// included), is pointed at the syslog receiver over plain HTTP boot, and not over https,
// since syslog goes over UDP in clear.
func TestBootOverHTTPSNoSyslog(t *testing.T) {
	for _, https := range []bool{false, true} {
		t.Run(strconv.FormatBool(https), func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(t.TempDir())
			cfg.Boot.SyslogListen = netip.MustParseAddrPort("127.0.0.1:514")
			client := http.DefaultClient
			if https {
				h.bootTLS(t, cfg, "127.0.0.1")
				client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
					TLSClientConfig: &tls.Config{RootCAs: h.tls.CA.Pool(), Time: h.clk.Now}}}
			}
			r, _ := h.start(t, cfg, h.plane.Link())
			resp, err := client.Get(r.HTTPBase() + "/boot/chain.ipxe")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := strings.Contains(string(body), "syslog"); got == https {
				t.Errorf("chain script names the syslog receiver: %v, want %v\n%s", got, !https, body)
			}
		})
	}
}

// TestBootCertHealth: the boot certificate in use is on /healthz (JSON: subject, SANs,
// validity and fingerprint; never its key) and its expiry in
// siteboot_boot_tls_cert_not_after_seconds. A renewal written over the files is seen on the
// next heartbeat; one that expires within Boot.TLSExpiryWarning (default 7 days) is named
// in a /healthz note, serving going on (200).
func TestBootCertHealth(t *testing.T) {
	for _, tt := range []struct {
		name    string
		margin  time.Duration // Boot.TLSExpiryWarning
		renewed time.Duration // the renewed certificate's lifetime
		warn    bool
	}{
		{"default margin, 3 days left", 0, 72 * time.Hour, true},
		{"default margin, 8 days left", 0, 8 * 24 * time.Hour, false},
		{"1h margin, 3 days left", time.Hour, 72 * time.Hour, false},
		{"4 days margin, 3 days left", 96 * time.Hour, 72 * time.Hour, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config(t.TempDir())
			h.bootTLS(t, cfg, "127.0.0.1")
			cfg.Boot.TLSExpiryWarning = tt.margin
			// Start with a certificate far from its expiry: no warning under any margin.
			first, err := h.tls.CA.Issue(sitetlstest.Request{Hosts: []string{"127.0.0.1"}, NotBefore: h.clk.Now(), Lifetime: 30 * 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if err := first.WriteFiles(cfg.Boot.TLSCertFile, cfg.Boot.TLSKeyFile); err != nil {
				t.Fatal(err)
			}
			r, _ := h.start(t, cfg, h.plane.Link())
			check := func(p *sitetlstest.Pair, warn bool) {
				t.Helper()
				v := gauge(t, r, "siteboot_boot_tls_cert_not_after_seconds")
				if got, err := strconv.ParseFloat(v, 64); err != nil || got != float64(p.Cert.NotAfter.Unix()) {
					t.Errorf("siteboot_boot_tls_cert_not_after_seconds %q, want %d", v, p.Cert.NotAfter.Unix())
				}
				st, text := get(t, "http://"+r.Addrs()["metrics"]+"/healthz")
				if hasNote := strings.Contains(text, "boot certificate expires"); st != http.StatusOK || hasNote != warn {
					t.Errorf("/healthz: %d %q; want 200, a note on the expiry: %v", st, text, warn)
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+r.Addrs()["metrics"]+"/healthz", nil)
				req.Header.Set("Accept", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var got struct {
					Status string   `json:"status"`
					Notes  []string `json:"notes"`
					Cert   struct {
						Subject     string    `json:"subject"`
						IPAddresses []string  `json:"ip_addresses"`
						NotAfter    time.Time `json:"not_after"`
						SHA256      string    `json:"sha256"`
						ExpiresSoon bool      `json:"expires_soon"`
					} `json:"boot_certificate"`
				}
				if err := json.Unmarshal(body, &got); err != nil || resp.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("/healthz in JSON: %v, %q", err, body)
				}
				fp := sha256.Sum256(p.Cert.Raw)
				if got.Status != "ok" || got.Cert.Subject != p.Cert.Subject.String() || strings.Join(got.Cert.IPAddresses, ",") != "127.0.0.1" ||
					!got.Cert.NotAfter.Equal(p.Cert.NotAfter) || got.Cert.SHA256 != hex.EncodeToString(fp[:]) || got.Cert.ExpiresSoon != warn ||
					(len(got.Notes) > 0) != warn {
					t.Errorf("/healthz in JSON: %s\nwant the certificate %s until %v, expires_soon %v", body, p.Cert.Subject, p.Cert.NotAfter, warn)
				}
				key, _ := os.ReadFile(cfg.Boot.TLSKeyFile)
				if bytes.Contains(body, []byte("PRIVATE")) || bytes.Contains(body, key) || bytes.Contains([]byte(text), []byte("PRIVATE")) {
					t.Errorf("/healthz shows key material: %s", body)
				}
			}
			check(first, false)

			renewed, err := h.tls.CA.Issue(sitetlstest.Request{Hosts: []string{"127.0.0.1"}, NotBefore: h.clk.Now(), Lifetime: tt.renewed})
			if err != nil {
				t.Fatal(err)
			}
			if err := renewed.WriteFiles(cfg.Boot.TLSCertFile, cfg.Boot.TLSKeyFile); err != nil {
				t.Fatal(err)
			}
			h.beat(t, r)
			check(renewed, tt.warn)
		})
	}
}

// gauge returns the value of series on r's /metrics, "" when it is not there.
func gauge(t *testing.T, r *running, series string) string {
	t.Helper()
	_, body := get(t, "http://"+r.Addrs()["metrics"]+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}
