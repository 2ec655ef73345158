package imagecache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bettercompute/siteboot/imagecache"
)

// countingServer is an HTTP server on addr that counts the requests it got.
func countingServer(t *testing.T, addr string, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

func port(srv *httptest.Server) string {
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return p
}

// ownAddress returns an address of this host that is neither loopback nor link-local nor in
// not, if it has one.
func ownAddress(not netip.Prefix) (netip.Addr, bool) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err == nil && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() && !not.Contains(p.Addr()) {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// With no network allowed, sources on loopback (by address, by a name resolving to it, or
// in an IPv4-mapped spelling), link-local, unspecified, multicast and broadcast addresses,
// the host's own addresses and the management networks are refused, before any byte is
// sent: the loopback server never sees a request.
func TestSourcePolicyRefuses(t *testing.T) {
	body := []byte("an internal page")
	srv, hits := countingServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	p := port(srv)
	cfg := fastConfig(t)
	cfg.AllowedSourceNetworks = nil
	mgmt := netip.MustParsePrefix("203.0.113.0/28")
	cfg.ManagementNetworks = []netip.Prefix{mgmt}
	c := open(t, cfg)
	tests := []struct{ url, reason string }{
		{"http://127.0.0.1:" + p + "/x", "loopback"},
		{"http://127.1.2.3:" + p + "/x", "loopback"},
		{"http://localhost:" + p + "/x", "loopback"}, // a name: refused when dialled
		{"http://[::1]:" + p + "/x", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + p + "/x", "loopback"},
		{"http://169.254.169.254/latest/meta-data", "link-local"},
		{"http://[fe80::1%25lo]:" + p + "/x", "link-local"},
		{"http://0.0.0.0:" + p + "/x", "unspecified"},
		{"http://[::]:" + p + "/x", "unspecified"},
		{"http://224.0.0.1/x", "multicast"},
		{"http://[ff02::1]/x", "multicast"},
		{"http://255.255.255.255/x", "multicast"},
		{"http://203.0.113.10/firmware.bin", "management-network"},
		// IPv6 spellings that embed a refused IPv4 address.
		{"http://[::127.0.0.1]:" + p + "/x", "loopback"}, // IPv4-compatible
		{"http://[::7f00:1]:" + p + "/x", "loopback"},
		{"http://[0:0:0:0:0:0:127.0.0.1]:" + p + "/x", "loopback"},
		{"http://[::ffff:0:127.0.0.1]:" + p + "/x", "loopback"}, // IPv4-translated
		{"http://[64:ff9b::127.0.0.1]:" + p + "/x", "loopback"}, // NAT64
		{"http://[64:ff9b:1::7f00:1]:" + p + "/x", "loopback"},
		{"http://[2002:7f00:1::1]:" + p + "/x", "loopback"}, // 6to4
		{"http://[::169.254.169.254]/latest/meta-data", "link-local"},
		{"http://[64:ff9b::a9fe:a9fe]/latest/meta-data", "link-local"},
		{"http://[::ffff:169.254.169.254]/latest/meta-data", "link-local"},
		{"http://[::0.0.0.2]:" + p + "/x", "unspecified"},
		{"http://[::203.0.113.10]/firmware.bin", "management-network"},
		{"http://[64:ff9b::cb00:710a]/firmware.bin", "management-network"},
	}
	if a, ok := ownAddress(mgmt); ok {
		tests = append(tests, struct{ url, reason string }{"http://" + netip.AddrPortFrom(a, 80).String() + "/x", "own-address"})
	}
	for i, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			d := imagecache.Digest(sha256.Sum256([]byte{byte(i)}))
			err := c.Pull(context.Background(), imagecache.Image{URL: tt.url, SHA256: d})
			var se *imagecache.SourceError
			if !errors.Is(err, imagecache.ErrSourceRefused) || !errors.As(err, &se) {
				t.Fatalf("Pull = %v, want a *SourceError", err)
			}
			if se.Reason != tt.reason {
				t.Errorf("reason %q, want %q (%v)", se.Reason, tt.reason, err)
			}
			if got := imagecache.ReasonOf(err); got != "source-refused" {
				t.Errorf("Reason = %q", got)
			}
			var pe *imagecache.PullError
			if errors.As(err, &pe) && pe.Attempts != 1 {
				t.Errorf("a refusal was retried: %d attempts", pe.Attempts)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests", n)
	}
	if s := c.Stats(); s.SourceRefused != uint64(len(tests)) {
		t.Errorf("SourceRefused %d, want %d", s.SourceRefused, len(tests))
	}
}

// A network listed as allowed is pulled from; redirects from it are checked like the first
// URL: to a refused address (literal or by name) or another scheme they fail, and the
// refused server never sees a request; to another allowed address they work.
func TestSourceRedirects(t *testing.T) {
	body := randomBytes(930, 10000)
	d := imagecache.Digest(sha256.Sum256(body))
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	refused, refusedHits := countingServer(t, "127.0.0.1:0", serve)
	allowed2, _ := countingServer(t, "127.0.0.3:0", serve)
	targets := map[string]string{
		"/literal": "http://127.0.0.1:" + port(refused) + "/image",
		"/name":    "http://localhost:" + port(refused) + "/image",
		"/scheme":  "file:///etc/passwd",
		"/allowed": "http://127.0.0.3:" + port(allowed2) + "/image",
	}
	front, _ := countingServer(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/direct" {
			w.Write(body)
			return
		}
		http.Redirect(w, r, targets[r.URL.Path], http.StatusFound)
	}))
	base := "http://127.0.0.2:" + port(front)
	cfg := fastConfig(t)
	cfg.AllowedSourceNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("127.0.0.3/32")}
	tests := []struct {
		path   string
		reason string // "": the pull works
	}{
		{"/direct", ""},
		{"/allowed", ""},
		{"/literal", "loopback"},
		{"/name", "loopback"},
		{"/scheme", "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			cfg := cfg
			cfg.Dir = t.TempDir()
			c := open(t, cfg)
			err := c.Pull(context.Background(), imagecache.Image{URL: base + tt.path, SHA256: d})
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Pull: %v", err)
				}
				return
			}
			var se *imagecache.SourceError
			if !errors.As(err, &se) || se.Reason != tt.reason {
				t.Fatalf("Pull = %v, want a *SourceError for %s", err, tt.reason)
			}
		})
	}
	if n := refusedHits.Load(); n != 0 {
		t.Errorf("the refused server got %d requests", n)
	}
}

// A host's own client is guarded too: its transport's dialer (its own DialContext, or the
// default) is wrapped, so a name resolving to loopback is still refused.
func TestSourcePolicyHostClient(t *testing.T) {
	srv, hits := countingServer(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("x")) }))
	dialer := &net.Dialer{}
	for name, client := range map[string]*http.Client{
		"own DialContext": {Transport: &http.Transport{DialContext: dialer.DialContext}},
		"nil Transport":   {},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := fastConfig(t)
			cfg.AllowedSourceNetworks = nil
			cfg.Client = client
			c := open(t, cfg)
			err := c.Pull(context.Background(), imagecache.Image{URL: "http://localhost:" + port(srv) + "/x", SHA256: sha256.Sum256([]byte("x"))})
			if !errors.Is(err, imagecache.ErrSourceRefused) {
				t.Fatalf("Pull = %v, want ErrSourceRefused", err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests", n)
	}
}

// A source that answers other bytes than the digest asked for fails the pull with a
// *MismatchError ("digest mismatch"); neither the error, the status nor the log names the
// digest of what it sent, which would tell whoever chose the URL the hash of a file they
// cannot read.
func TestMismatchNeverReportsContentDigest(t *testing.T) {
	secret := []byte("an internal page the requester cannot read")
	o := newOrigin(t, secret)
	var logs bytes.Buffer
	cfg := fastConfig(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := open(t, cfg)
	want := imagecache.Digest(sha256.Sum256([]byte("the image the control plane named")))
	img := imagecache.Image{URL: o.URL(), SHA256: want}
	c.SetPinned([]imagecache.Image{img})
	err := c.Pull(context.Background(), img)
	var me *imagecache.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, imagecache.ErrDigestMismatch) || me.Bytes != int64(len(secret)) {
		t.Fatalf("Pull = %v, want a *MismatchError of %d bytes", err, len(secret))
	}
	if !strings.Contains(err.Error(), "digest mismatch") {
		t.Errorf("error %q does not say digest mismatch", err)
	}
	got := sha256.Sum256(secret)
	leak := hex.EncodeToString(got[:])
	st := status(c, want)
	for where, text := range map[string]string{"error": err.Error(), "status": st.Err.Error(), "log": logs.String()} {
		if strings.Contains(strings.ToLower(text), leak) || strings.Contains(text, strings.ToUpper(leak)) {
			t.Errorf("the %s names the content's digest: %s", where, text)
		}
	}
	if !strings.Contains(logs.String(), "digest mismatch") {
		t.Errorf("log does not record the mismatch:\n%s", logs.String())
	}
}
