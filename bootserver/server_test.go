package bootserver_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/assertion/assertiontest"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/internal/testlog"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/bettercompute/siteboot/tftpd/tftpdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listen binds loopback sockets for every part.
func listen(t *testing.T) bootserver.Listeners {
	t.Helper()
	var l bootserver.Listeners
	for _, pc := range []*net.PacketConn{&l.DHCP, &l.PXE, &l.TFTP} {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		*pc = c
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.HTTP = ln
	return l
}

// config is a Server's configuration with every part, for the machine mac1 (a cache
// when c is not nil).
func config(t *testing.T, l bootserver.Listeners, c *imagecache.Cache) bootserver.Config {
	p := assertiontest.New("site-a", "agent-a")
	return bootserver.Config{
		Fence: active, BaseURL: "http://" + l.HTTP.Addr().String(), Issuer: p.Issuer, Cache: c,
		Boot: ipxe.Config{
			Entries: ipxe.EntriesFunc(func(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
				return ipxe.Entry{MAC: mac1, Workflow: "wf-1"}, q.MAC == mac1, nil
			}),
			Tokens: ipxe.TokensFunc(func(context.Context, ipxe.Entry) (string, error) { return "token", nil }),
			Kernel: "http://192.0.2.1/vmlinuz",
		},
		DHCP: &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
			return proxydhcp.Answer()
		})},
		TFTP:     &tftpd.Server{},
		Builds:   fstest.MapFS{"ipxe.efi": {Data: []byte("the iPXE build")}},
		Handlers: map[string]http.Handler{"GET /healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })},
	}
}

var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServer serves every part on loopback, shuts down, and leaves no goroutine.
func TestServer(t *testing.T) {
	c, _ := openCache(t, clocktest.New(time.Now()))
	before := goleak.IgnoreCurrent() // the cache's and its origin's
	l := listen(t)
	cfg := config(t, l, c)
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The parts are wired: one fence, the nonces as proxy DHCP's Binder, the HTTP port
	// from BaseURL, the TFTP FS of builds and grants.
	if cfg.DHCP.Fence == nil || cfg.TFTP.Fence == nil || cfg.DHCP.Binder != proxydhcp.Binder(srv.Nonces()) ||
		cfg.DHCP.HTTPPort != l.HTTP.Addr().(*net.TCPAddr).Port {
		t.Errorf("proxy DHCP and TFTP not wired: %+v", cfg.DHCP)
	}
	if f, ok := cfg.TFTP.FS.(bootserver.FS); !ok || f.Grants == nil || f.Builds == nil {
		t.Errorf("TFTP.FS = %T", cfg.TFTP.FS)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	base := cfg.BaseURL
	if st, body := get(t, base+ipxe.PathChain); st != http.StatusOK || !strings.HasPrefix(body, "#!ipxe") {
		t.Errorf("chain script: %d\n%s", st, body)
	}
	// A MAC-only request for a known machine: not bound, no secret.
	if st, body := get(t, base+ipxe.PathBoot+"?mac="+mac1.String()); st != http.StatusOK || !strings.Contains(body, "exit 1") || strings.Contains(body, "token") {
		t.Errorf("unbound script: %d\n%s", st, body)
	}
	if st, _ := get(t, base+"/cache/"+strings.Repeat("0", 64)); st != http.StatusNotFound {
		t.Errorf("plain /cache/SHA256: %d", st)
	}
	if st, body := get(t, base+"/healthz"); st != http.StatusOK || body != "ok" {
		t.Errorf("host handler: %d %q", st, body)
	}
	b, _, err := tftpdtest.Fetch(l.TFTP.LocalAddr().String(), "ipxe.efi", 512)
	if err != nil || string(b) != "the iPXE build" {
		t.Errorf("TFTP ipxe.efi: %q, %v", b, err)
	}
	if _, _, err := tftpdtest.Fetch(l.TFTP.LocalAddr().String(), "t/"+strings.Repeat("0", 32)+"/"+strings.Repeat("0", 64), 512); err == nil {
		t.Errorf("TFTP under a guessed grant served a file")
	}
	st := srv.Stats()
	if st.Boot.Chains != 1 || st.Boot.Unbound != 1 || st.Bind.NoNonce != 1 || st.Bind.Of(bootbind.NoNonce) != 1 ||
		st.Cache.RefusedPath != 1 || st.Cache.RefusedGrant != 1 || st.TFTP.Transfers != 1 || st.TFTP.NotFound != 1 {
		t.Errorf("stats: %+v", st)
	}
	if s := srv.Samples(); len(s) != 0 {
		t.Errorf("Samples() of a server without an HTTPS side: %+v, want none", s)
	}
	// PartSamples are the parts' counters, as Stats has them: proxy DHCP on its IPv4 ports
	// only (no ServerIP6), TFTP, the nonces' refusals and the cache; no IPv6 passes.
	parts := srv.PartSamples()
	if err := metric.Check(parts); err != nil {
		t.Fatal(err)
	}
	byName := map[string]uint64{}
	for _, x := range parts {
		key := x.Name
		for _, v := range x.LabelValues() {
			key += "/" + v
		}
		byName[key] += x.Value
		if x.Name == "boot_v6_passes_total" || x.Label("port") == "547" {
			t.Errorf("PartSamples has %s without IPv6", key)
		}
	}
	if byName["boot_unbound_total/"+bootbind.NoNonce.String()] != 1 || byName["tftp_transfers_total/ok"]+byName["tftp_transfers_total/not-found"] == 0 ||
		byName["cache_refused_total/path"] != 1 {
		t.Errorf("PartSamples: %v", byName)
	}

	if err := srv.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, bootserver.ErrServerClosed) {
		t.Errorf("Serve returned %v, want %v", err, bootserver.ErrServerClosed)
	}
	if _, err := l.HTTP.Accept(); err == nil {
		t.Error("the HTTP listener is open after Shutdown")
	}
	goleak.VerifyNone(t, before)
}

// TestServerClose: Close ends Serve; Serve after Close closes its sockets at once.
func TestServerClose(t *testing.T) {
	l := listen(t)
	srv, err := bootserver.New(config(t, l, nil))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	if st, _ := get(t, "http://"+l.HTTP.Addr().String()+ipxe.PathChain); st != http.StatusOK {
		t.Fatalf("chain script: %d", st)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-served; !errors.Is(err, bootserver.ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
	l2 := listen(t)
	if err := srv.Serve(l2); !errors.Is(err, bootserver.ErrServerClosed) {
		t.Errorf("Serve after Close returned %v", err)
	}
	if _, _, err := l2.PXE.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a socket Serve refused is open: %v", err)
	}
	goleak.VerifyNone(t)
}

// brokenListener fails its first Accept.
type brokenListener struct{ net.Listener }

var errBroken = errors.New("the listener broke")

func (brokenListener) Accept() (net.Conn, error) { return nil, errBroken }

// TestServerPartFails: a part whose socket fails ends Serve with its error and closes the
// other parts.
func TestServerPartFails(t *testing.T) {
	l := listen(t)
	srv, err := bootserver.New(config(t, l, nil))
	if err != nil {
		t.Fatal(err)
	}
	l.HTTP = brokenListener{l.HTTP}
	if err := srv.Serve(l); !errors.Is(err, errBroken) {
		t.Errorf("Serve returned %v, want %v", err, errBroken)
	}
	if _, _, err := l.TFTP.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("TFTP's socket is open after the HTTP part failed: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	goleak.VerifyNone(t)
}

// TestServeRefusesSockets: a socket for a part the Server lacks, or no HTTP listener.
func TestServeRefusesSockets(t *testing.T) {
	for name, drop := range map[string]func(*bootserver.Config, *bootserver.Listeners){
		"TFTP socket without TFTP":  func(c *bootserver.Config, _ *bootserver.Listeners) { c.TFTP = nil },
		"DHCP sockets without DHCP": func(c *bootserver.Config, _ *bootserver.Listeners) { c.DHCP = nil },
		"no HTTP listener":          func(_ *bootserver.Config, l *bootserver.Listeners) { l.HTTP.Close(); l.HTTP = nil },
	} {
		t.Run(name, func(t *testing.T) {
			l := listen(t)
			c := config(t, l, nil)
			drop(&c, &l)
			srv, err := bootserver.New(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Serve(l); !errors.Is(err, bootserver.ErrInvalid) {
				t.Errorf("Serve returned %v, want %v", err, bootserver.ErrInvalid)
			}
			if _, _, err := l.PXE.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
				t.Errorf("a socket Serve refused is open: %v", err)
			}
			srv.Close()
		})
	}
}

// TestConfigValidate: what New refuses, before it touches a part.
func TestConfigValidate(t *testing.T) {
	for name, spoil := range map[string]func(*bootserver.Config){
		"no fence":         func(c *bootserver.Config) { c.Fence = nil },
		"no entries":       func(c *bootserver.Config) { c.Boot.Entries = nil },
		"boot fence":       func(c *bootserver.Config) { c.Boot.Fence = active },
		"DHCP fence":       func(c *bootserver.Config) { c.DHCP.Fence = active },
		"TFTP fence":       func(c *bootserver.Config) { c.TFTP.Fence = active },
		"DHCP binder":      func(c *bootserver.Config) { c.DHCP.Binder = bootbind.NewNonces(bootbind.Config{}) },
		"TFTP FS":          func(c *bootserver.Config) { c.TFTP.FS = fstest.MapFS{} },
		"TFTP Dir":         func(c *bootserver.Config) { c.TFTP.Dir = t.TempDir() },
		"relative BaseURL": func(c *bootserver.Config) { c.BaseURL = "/boot" },
		"BaseURL path":     func(c *bootserver.Config) { c.BaseURL = "http://192.0.2.1/x" },
		"mount t":          func(c *bootserver.Config) { c.Mounts = map[string]fs.FS{bootserver.GrantDir: fstest.MapFS{}} },
		"mount a/b":        func(c *bootserver.Config) { c.Mounts = map[string]fs.FS{"a/b": fstest.MapFS{}} },
		"handler /boot/": func(c *bootserver.Config) {
			c.Handlers = map[string]http.Handler{bootserver.PathBoot: http.NotFoundHandler()}
		},
		"handler conflict": func(c *bootserver.Config) {
			c.Handlers = map[string]http.Handler{"/boot/{x...}": http.NotFoundHandler()}
		},
		"no signer": func(c *bootserver.Config) { c.Issuer = nil },
	} {
		t.Run(name, func(t *testing.T) {
			l := listen(t)
			defer closeAll(l)
			c := config(t, l, nil)
			spoil(&c)
			binder, dhcpFence, tftpFence := c.DHCP.Binder, c.DHCP.Fence, c.TFTP.Fence
			if _, err := bootserver.New(c); err == nil {
				t.Fatal("New accepted it")
			} else if !errors.Is(err, bootserver.ErrInvalid) && !errors.Is(err, ipxe.ErrInvalid) {
				t.Errorf("New: %v, want %v", err, bootserver.ErrInvalid)
			}
			if _, wired := c.TFTP.FS.(bootserver.FS); c.DHCP.Binder != binder || c.DHCP.Fence != dhcpFence ||
				c.TFTP.Fence != tftpFence || wired {
				t.Error("New changed a part it refused")
			}
		})
	}
}

// closeAll closes the sockets of l.
func closeAll(l bootserver.Listeners) {
	for _, c := range []net.PacketConn{l.DHCP, l.PXE, l.TFTP} {
		c.Close()
	}
	l.HTTP.Close()
}

// TestServerIPv6: with BaseURL6, a request that came over IPv6 gets URLs under it, from
// the second boot handler, and a bound machine's cache URL there too.
func TestServerIPv6(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	c, _ := openCache(t, clocktest.New(time.Now()))
	before := goleak.IgnoreCurrent()
	cfg := config(t, bootserver.Listeners{HTTP: ln}, c)
	cfg.BaseURL, cfg.BaseURL6 = "http://192.0.2.1:8080", "http://"+ln.Addr().String()
	cfg.DHCP, cfg.TFTP = nil, nil // a script request is the lookup's alone: no DHCP answer to bind to
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(bootserver.Listeners{HTTP: ln}) }()
	if st, body := get(t, cfg.BaseURL6+ipxe.PathChain); st != http.StatusOK || !strings.Contains(body, cfg.BaseURL6+ipxe.PathBoot) {
		t.Errorf("chain script over IPv6: %d, not under %s\n%s", st, cfg.BaseURL6, body)
	}
	st, body := get(t, cfg.BaseURL6+ipxe.PathBoot+"?mac="+mac1.String())
	if st != http.StatusOK || !strings.Contains(body, ipxe.ParamCache+"="+cfg.BaseURL6+"/cache/t/") {
		t.Errorf("script over IPv6: %d, bc.cache not under %s\n%s", st, cfg.BaseURL6, body)
	}
	if s := srv.Stats(); s.Boot6.Chains != 1 || s.Boot6.Scripts != 1 || s.Boot.Requests != 0 || srv.Boot6() == nil {
		t.Errorf("stats: IPv4 %+v, IPv6 %+v", s.Boot, s.Boot6)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	if err := <-served; !errors.Is(err, bootserver.ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
	goleak.VerifyNone(t, before)
}

// TestReasonOf names the package's errors, and no other.
func TestReasonOf(t *testing.T) {
	_, invalid := bootserver.New(bootserver.Config{})
	for err, want := range map[error]string{
		nil: "", invalid: "invalid", bootserver.ErrServerClosed: "closed",
		errors.Join(errors.New("x"), bootserver.ErrServerClosed): "closed", ipxe.ErrUnbound: "", http.ErrServerClosed: "",
	} {
		if got := bootserver.ReasonOf(err); got != want {
			t.Errorf("ReasonOf(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestServerHooks: OnNonce hears of each nonce proxy DHCP names, which stays claimable;
// ErrorLog receives the HTTP server's errors.
func TestServerHooks(t *testing.T) {
	l := listen(t)
	cfg := config(t, l, nil)
	type issued struct {
		mac hwid.MAC
		to  netip.Addr
	}
	var heard []issued
	cfg.OnNonce = func(mac hwid.MAC, to netip.Addr) { heard = append(heard, issued{mac, to}) }
	var logged testlog.Buffer
	cfg.ErrorLog = log.New(&logged, "", 0)
	cfg.Handlers = map[string]http.Handler{"GET /panic": http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bad handler") })}
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := netip.MustParseAddr("192.0.2.11")
	n, err := cfg.DHCP.Binder.Bind(t.Context(), mac1, at)
	if err != nil {
		t.Fatal(err)
	}
	if want := []issued{{mac1, at}}; !slices.Equal(heard, want) {
		t.Errorf("OnNonce heard %v, want %v", heard, want)
	}
	if r := srv.Nonces().Claim(n, mac1, at); r != bootbind.Bound {
		t.Errorf("the nonce proxy DHCP named: %v, want bound", r)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	if _, err := client.Get(cfg.BaseURL + "/panic"); err == nil {
		t.Error("a panicking handler answered")
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	<-served
	if s := logged.String(); !strings.Contains(s, "a bad handler") {
		t.Errorf("ErrorLog got %q, want the handler's panic", s)
	}
	goleak.VerifyNone(t)
}

// preferred records the addresses a Server prefers.
type preferred struct {
	mu    sync.Mutex
	addrs []netip.Addr
}

func (p *preferred) Add(a netip.Addr) { p.mu.Lock(); p.addrs = append(p.addrs, a); p.mu.Unlock() }

func (p *preferred) got() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.addrs)
}

// TestServerPrefer: the machines being booted are preferred: with proxy DHCP, where an
// answer's nonce goes and where a script request bound to it comes from; without, where
// a request given a live entry comes from; a refused request is not.
func TestServerPrefer(t *testing.T) {
	local := netip.MustParseAddr("127.0.0.1")
	run := func(t *testing.T, dhcp bool, do func(srv *bootserver.Server, cfg bootserver.Config)) []netip.Addr {
		l := listen(t)
		cfg := config(t, l, nil)
		if !dhcp {
			cfg.DHCP, l.DHCP, l.PXE = nil, nil, nil
		}
		p := &preferred{}
		cfg.Prefer = p
		srv, err := bootserver.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		do(srv, cfg)
		srv.Shutdown(t.Context())
		<-served
		return p.got()
	}
	t.Run("proxy DHCP", func(t *testing.T) {
		got := run(t, true, func(srv *bootserver.Server, cfg bootserver.Config) {
			if st, _ := get(t, cfg.BaseURL+ipxe.PathBoot+"?mac="+mac1.String()); st != http.StatusOK {
				t.Fatalf("unbound request: %d", st)
			}
			n, err := cfg.DHCP.Binder.Bind(t.Context(), mac1, local)
			if err != nil {
				t.Fatal(err)
			}
			if st, body := get(t, cfg.BaseURL+ipxe.PathBoot+"?mac="+mac1.String()+"&"+ipxe.ParamNonce+"="+n); st != http.StatusOK || !strings.Contains(body, "token") {
				t.Fatalf("bound request: %d\n%s", st, body)
			}
		})
		if want := []netip.Addr{local, local}; !slices.Equal(got, want) {
			t.Errorf("preferred %v, want %v (the nonce's address, then the bound request's)", got, want)
		}
	})
	t.Run("no proxy DHCP", func(t *testing.T) {
		got := run(t, false, func(srv *bootserver.Server, cfg bootserver.Config) {
			get(t, cfg.BaseURL+ipxe.PathBoot+"?mac=52:54:00:00:00:99") // no entry
			get(t, cfg.BaseURL+ipxe.PathBoot+"?mac="+mac1.String())
		})
		if want := []netip.Addr{local}; !slices.Equal(got, want) {
			t.Errorf("preferred %v, want %v (the live entry's request only)", got, want)
		}
	})
}

// TestServerPXE6: the DHCPv6 boot server port is served with proxy DHCP and closed when
// Serve returns; without proxy DHCP it is refused.
func TestServerPXE6(t *testing.T) {
	for _, withDHCP := range []bool{true, false} {
		l := listen(t)
		cfg := config(t, l, nil)
		l.DHCP.Close()
		l.PXE.Close()
		l.DHCP, l.PXE = nil, nil
		pxe6, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l.PXE6 = pxe6
		if !withDHCP {
			cfg.DHCP = nil
		}
		srv, err := bootserver.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		if !withDHCP {
			if err := <-served; !errors.Is(err, bootserver.ErrInvalid) {
				t.Errorf("PXE6 without DHCP: Serve returned %v, want %v", err, bootserver.ErrInvalid)
			}
			srv.Close()
			continue
		}
		// A datagram on PXE6 is read by proxy DHCP's boot port.
		sender, err := net.Dial("udp", pxe6.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for srv.Stats().DHCP.Boot.Received == 0 && time.Now().Before(deadline) {
			sender.Write([]byte("not DHCP"))
			time.Sleep(10 * time.Millisecond)
		}
		sender.Close()
		if srv.Stats().DHCP.Boot.Received == 0 {
			t.Error("nothing read from PXE6")
		}
		if err := srv.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, bootserver.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		if _, _, err := pxe6.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("PXE6 is open after Serve returned: %v", err)
		}
	}
	goleak.VerifyNone(t)
}

// TestServerNoBaseURL: without BaseURL the scripts' URLs are relative and the cache is
// named by CacheURL, which a Cache then needs.
func TestServerNoBaseURL(t *testing.T) {
	c, _ := openCache(t, clocktest.New(time.Now()))
	before := goleak.IgnoreCurrent()
	l := listen(t)
	cfg := config(t, l, c)
	cfg.BaseURL, cfg.DHCP = "", nil
	if _, err := bootserver.New(cfg); !errors.Is(err, bootserver.ErrInvalid) {
		t.Errorf("a Cache with neither BaseURL nor CacheURL: %v, want %v", err, bootserver.ErrInvalid)
	}
	cfg.CacheURL = "http://cache.example.net/images/"
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(bootserver.Listeners{HTTP: l.HTTP, TFTP: l.TFTP}) }()
	base := "http://" + l.HTTP.Addr().String()
	if st, body := get(t, base+ipxe.PathChain); st != http.StatusOK || strings.Contains(body, base) {
		t.Errorf("chain script: %d, absolute URLs\n%s", st, body)
	}
	if st, body := get(t, base+ipxe.PathBoot+"?mac="+mac1.String()); st != http.StatusOK ||
		!strings.Contains(body, ipxe.ParamCache+"=http://cache.example.net/images/t/") {
		t.Errorf("script: %d, bc.cache not under CacheURL\n%s", st, body)
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	<-served
	l.DHCP.Close()
	l.PXE.Close()
	goleak.VerifyNone(t, before)
}

// TestServerPasses: with Passes, an answer proxy DHCP's Handler gives a machine's
// firmware issues the MAC's IPv6 boot pass; an answer to iPXE and a silence do not; Serve
// names the TFTP socket's port in proxy DHCP's TFTPPort.
func TestServerPasses(t *testing.T) {
	l := listen(t)
	cfg := config(t, l, nil)
	answer := true
	cfg.DHCP.Handler = proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision {
		if answer {
			return proxydhcp.Answer()
		}
		return proxydhcp.Silence(proxydhcp.ReasonUnknown)
	})
	cfg.Passes = bootbind.NewPasses(bootbind.Config{})
	srv, err := bootserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddrPort("[2001:db8::5]:546")
	for _, tc := range []struct {
		name   string
		req    proxydhcp.Request
		answer bool
		issued uint64
	}{
		{"ipxe", proxydhcp.Request{MAC: mac1, IPXE: true, IPv6: true, Source: src}, true, 0},
		{"silence", proxydhcp.Request{MAC: mac1, IPv6: true, Source: src}, false, 0},
		{"firmware over dhcpv6", proxydhcp.Request{MAC: mac1, IPv6: true, Source: src}, true, 1},
		{"firmware over dhcpv4", proxydhcp.Request{MAC: mac1}, true, 2},
	} {
		answer = tc.answer
		req := tc.req
		if d := cfg.DHCP.Handler.ServeDHCP(t.Context(), &req); d.Answer != tc.answer {
			t.Errorf("%s: decision %+v, want the host's", tc.name, d)
		}
		if got := cfg.Passes.Stats().Issued; got != tc.issued {
			t.Errorf("%s: passes issued %d, want %d", tc.name, got, tc.issued)
		}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	<-served
	if want := l.TFTP.LocalAddr().(*net.UDPAddr).Port; cfg.DHCP.TFTPPort != want {
		t.Errorf("DHCP.TFTPPort = %d, want the TFTP socket's %d", cfg.DHCP.TFTPPort, want)
	}
	goleak.VerifyNone(t)
}
