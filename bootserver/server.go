package bootserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/internal/errname"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/tftpd"
)

// Errors of the package.
var (
	// ErrServerClosed is what Serve returns after Shutdown or Close.
	ErrServerClosed = errors.New("bootserver: server closed")
	// ErrInvalid is what every refused configuration wraps.
	ErrInvalid = errors.New("bootserver: invalid configuration")
)

func errInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ReasonOf names the first of the package's errors in err's chain: "closed" or "invalid";
// "" for nil or an error of another package (a part's own error keeps its package's
// ReasonOf).
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrServerClosed, Name: "closed"},
	{Err: ErrInvalid, Name: "invalid"},
}

// Fence tells whether this host is the site's active boot server. *lease.Fence is one.
type Fence interface {
	// Active reports the lease epoch and whether this host holds the lease now. An epoch of
	// zero is never active.
	Active() (epoch uint64, active bool)
}

// FenceFunc adapts a function to [Fence].
type FenceFunc func() (uint64, bool)

// Active calls f.
func (f FenceFunc) Active() (uint64, bool) { return f() }

// Reserved paths of the HTTP mux.
const (
	PathBoot  = "/boot/"  // the boot handler (ipxe)
	PathCache = "/cache/" // the image cache, under grants
)

// Config is what [New] composes. Fence, BaseURL and Boot.Entries are required; the parts
// (DHCP, TFTP, Cache) are optional, each nil meaning the server runs without it. New sets
// fields of the parts it is given (their Fence, proxy DHCP's Binder and HTTPPort, its
// Handler wrapped to issue Passes, TFTP's FS; Serve sets proxy DHCP's TFTPPort to the TFTP
// socket's port when it is zero): a part must not be used by another server.
type Config struct {
	// Fence is the one fence every part takes: proxy DHCP, TFTP and the boot handler get
	// it from New (their own Fence must be nil). The image cache takes it at Open: open
	// the Cache with this fence as its Config.Fence.
	Fence Fence

	// BaseURL is the boot HTTP server's URL as machines reach it, "http://HOST[:PORT]",
	// the Listeners' HTTP socket behind it. Scripts' URLs are under it (unless Boot.BaseURL
	// is set), so is the cache's (unless CacheURL is set), and its port is proxy DHCP's
	// HTTPPort (unless set). Empty: the scripts' URLs are relative to the script's own
	// (ipxe's default), for a host whose machines come from the site's own DHCP server;
	// CacheURL is then required with a Cache.
	BaseURL string

	// BaseURL6, if set, is that URL over IPv6, "http://[2001:db8::1]:8080": a request
	// that came over IPv6 ([ViaIPv6]) is answered by a second boot handler whose URLs are
	// under it (ByFamily), and its cache URL is BaseURL6 + "/cache" unless CacheURL is
	// set. The second handler serves no Boot.Loaders (a signed chain's network is IPv4).
	// Empty: IPv4 URLs for every request.
	BaseURL6 string

	// Boot configures the /boot/ handler. Entries (the host's lookup), Tokens and Kernel
	// are the host's. New fills what the Server owns: Fence; Entries wrapped in [Bind]
	// with the boot nonces when DHCP is set; Signer from Issuer when nil; Cache from Cache
	// and CacheURL when nil; BaseURL from BaseURL when empty.
	Boot ipxe.Config

	// Issuer signs the scripts' discovery assertions when Boot.Signer is nil.
	Issuer *assertion.Issuer

	// Nonces are the boot nonces that bind a script request to the DHCP answer it follows:
	// proxy DHCP's Binder and [Bind]'s store. Nil: a store of bootbind's defaults. Unused
	// without DHCP.
	Nonces *bootbind.Nonces
	// Passes, Loaders and OnBound are [Bind]'s: IPv6 boot passes, the claimers of other
	// loaders' requests, and a hook for each bound request. Nil: none. With DHCP, each
	// answer proxy DHCP gives a machine's firmware (not iPXE: its Handler decided to
	// answer, over DHCPv4 or DHCPv6) issues the MAC's pass, for the address a DHCPv6
	// answer sent straight to the machine goes to: iPXE over DHCPv6 takes its chain URL
	// from the site's DHCPv6 server, which cannot carry a nonce (bootbind.Passes).
	Passes  *bootbind.Passes
	Loaders map[string]Claimer
	OnBound func(ipxe.Query)
	// OnNonce, if set, is called after each nonce proxy DHCP names in an answer, with the
	// MAC and the address the answer goes to (invalid for a broadcast answer): a host that
	// saves the nonces (bootbind.Nonces.SaveFile) wakes its saver here, so a nonce is on
	// disk while its answer goes out. Nil: none.
	OnNonce func(mac hwid.MAC, to netip.Addr)
	// Prefer, when set, is told the address of each machine being booted, whose next HTTP
	// requests the boot listeners keep room for (DESIGN.md S4; [Caps].Prefer): where each
	// answer proxy DHCP names a nonce in goes, and where each chain's script request bound
	// to it came from (its kernel and initrd come next); without DHCP, where each request
	// given a live entry came from. Nil: none.
	Prefer Booting

	// Cache is the image cache served under /cache/ and, under t/, over TFTP; its grants
	// are the scripts' bc.cache. Nil: no cache. The host opens and closes it.
	Cache *imagecache.Cache
	// CacheURL is the URL machines reach the cache at. Empty: BaseURL + "/cache".
	CacheURL string

	// DHCP is the proxy DHCP server, its Handler the host's. Nil: none, and requests are
	// not bound to an answer (there is none).
	DHCP *proxydhcp.Server
	// TFTP is the TFTP server, serving [FS] of Builds, the cache's grants and Mounts. Nil:
	// none. Its FS and Dir must be unset.
	TFTP *tftpd.Server
	// Builds are the iPXE builds served over TFTP. Nil: none.
	Builds fs.FS
	// Mounts are other file systems served over TFTP, each under its directory (FS.Mounts).
	Mounts map[string]fs.FS

	// SecureBoot is the Secure Boot chain (package secureboot) served beside iPXE; it
	// needs DHCP and TFTP, and its Nonces must be the Server's. New mounts its TFTP
	// directories (secureboot.Chain.Mounts) and, with a Cache, the cache's grants under
	// the chain's TFTPCacheDir (unless "."), serves its HTTP paths (secureboot.PathSB and
	// PathConfig), binds secureboot.LoaderName requests with its Keys (the chain claims a
	// GRUB's key before it asks the boot handler, whose binding claims it again), and has
	// TFTP's OnTransfer report each transfer to it after the host's own hook. The host
	// still answers proxy DHCP for the chain's machines (Chain.AnswerDHCP) and stops the
	// chain after the Server. Nil: none.
	SecureBoot *secureboot.Chain

	// Handlers are the host's own HTTP handlers by ServeMux pattern ("GET /metrics"),
	// served beside /boot/ and /cache/ under the same limits. Nil: none.
	Handlers map[string]http.Handler

	// Events, if set, receives every part's boot events: New gives it to proxy DHCP, TFTP,
	// the boot handler (Boot.Events) and [Bind] where their own is nil, so one
	// bootevents.Timeline sees a machine's boot from DHCP to the assertion. Nil: the parts
	// keep their own (none by default).
	Events bootevents.Sink

	// TLS is the configuration of the boot server's HTTPS side (Listeners.HTTPS), such as
	// sitetls.Credentials.OpenServerConfig, which re-reads its files and sends the CA that
	// iPXE checks by fingerprint. Required with Listeners.HTTPS; the same handlers answer
	// both sides. With it, the chain script points iPXE's console nowhere (Boot.Syslog is
	// dropped): the console prints every URL iPXE fetches, cache grants included, and
	// syslog carries it over UDP in clear. Nil: no HTTPS.
	TLS *tls.Config
	// RefusePlainHTTP answers every request that did not come over TLS with 403 and a line
	// saying the site boots over https, counted in Stats.PlainRefused, except the iPXE
	// builds under /boot/files/ (ipxe.PathFiles): they carry no secret and are the files
	// UEFI HTTP boot fetches before anything trusts the site's CA, as they travel over
	// TFTP. False: plain HTTP serves everything, as HTTPS does.
	RefusePlainHTTP bool

	// ErrorLog receives the HTTP server's errors (a failed accept, a handler's panic), as
	// net/http.Server's ErrorLog. Nil: the log package's standard logger.
	ErrorLog *log.Logger
}

// Validate reports a missing field, a part that brings its own fence, and a mount or
// pattern that collides with the Server's.
func (c Config) Validate() error {
	switch {
	case c.Fence == nil:
		return errInvalid("no Fence")
	case c.Boot.Entries == nil:
		return errInvalid("no Boot.Entries")
	case c.Boot.Fence != nil:
		return errInvalid("Boot.Fence is set: the Server gives every part its Fence")
	}
	if c.BaseURL != "" && !baseURL(c.BaseURL) {
		return errInvalid("BaseURL %q is not http(s)://HOST[:PORT]", c.BaseURL)
	}
	if c.BaseURL == "" && c.Cache != nil && c.CacheURL == "" {
		return errInvalid("no BaseURL and no CacheURL: machines would not know where the cache is")
	}
	if c.BaseURL6 != "" && !baseURL(c.BaseURL6) {
		return errInvalid("BaseURL6 %q is not http(s)://HOST[:PORT]", c.BaseURL6)
	}
	if c.RefusePlainHTTP && c.TLS == nil {
		return errInvalid("RefusePlainHTTP without TLS: nothing would be served")
	}
	if d := c.DHCP; d != nil {
		if d.Fence != nil {
			return errInvalid("DHCP.Fence is set: the Server gives every part its Fence")
		}
		if d.Binder != nil && (c.Nonces == nil || d.Binder != proxydhcp.Binder(c.Nonces)) {
			return errInvalid("DHCP.Binder is not Config.Nonces: requests would not be bound to the answers")
		}
	}
	if t := c.TFTP; t != nil {
		if t.Fence != nil {
			return errInvalid("TFTP.Fence is set: the Server gives every part its Fence")
		}
		if t.FS != nil || t.Dir != "" {
			return errInvalid("TFTP.FS or TFTP.Dir is set: serve files through Builds and Mounts")
		}
	}
	if c.SecureBoot != nil && (c.DHCP == nil || c.TFTP == nil) {
		return errInvalid("SecureBoot without DHCP and TFTP: the chain is bound to proxy DHCP's answers and fetched over TFTP")
	}
	if err := (FS{Mounts: c.Mounts}).validate(); err != nil {
		return err
	}
	for p, h := range c.Handlers {
		if p == PathBoot || p == PathCache || h == nil {
			return errInvalid("Handlers[%q]: %s and %s are the Server's, and a handler is required", p, PathBoot, PathCache)
		}
	}
	return nil
}

// baseURL reports whether s is http(s)://HOST[:PORT].
func baseURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && (u.Path == "" || u.Path == "/") &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil
}

// Server is a boot server composed by [New]. Its methods are safe for concurrent use.
type Server struct {
	cfg    Config
	boot   *ipxe.Handler
	boot6  *ipxe.Handler // nil without BaseURL6
	nonces *bootbind.Nonces
	web    *http.Server
	plain  atomic.Uint64 // requests refused for coming over plain HTTP

	mu      sync.Mutex
	serving bool
	closed  bool
	running sync.WaitGroup // Serve
}

// New validates c, builds the boot handler and the HTTP server, and wires the parts. It
// does no I/O: the sockets come to Serve.
func New(c Config) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c, err := withChain(c)
	if err != nil {
		return nil, err
	}
	c = preferring(c)
	s := &Server{cfg: c}
	c.BaseURL = strings.TrimSuffix(c.BaseURL, "/")
	c.BaseURL6 = strings.TrimSuffix(c.BaseURL6, "/")
	boot := c.Boot
	boot.Fence = c.Fence
	if c.TLS != nil {
		boot.Syslog = netip.Addr{} // no grant in clear
	}
	if boot.BaseURL == "" {
		boot.BaseURL = c.BaseURL
	}
	if boot.Signer == nil && c.Issuer != nil {
		boot.Signer = Signer{Issuer: c.Issuer}
	}
	if boot.Cache == nil && c.Cache != nil {
		bc := Cache{Cache: c.Cache, BaseURL: c.CacheURL, BaseURL6: c.CacheURL}
		if c.CacheURL == "" {
			// Validate refused a Cache with neither URL.
			bc.BaseURL, bc.BaseURL6 = c.BaseURL+"/cache", ""
			if c.BaseURL6 != "" {
				bc.BaseURL6 = c.BaseURL6 + "/cache"
			}
		}
		boot.Cache = bc
	}
	if c.DHCP != nil {
		if s.nonces = c.Nonces; s.nonces == nil {
			s.nonces = bootbind.NewNonces(bootbind.Config{})
		}
		boot.Entries = Bind{Entries: c.Boot.Entries, Nonces: s.nonces, Passes: c.Passes, Loaders: c.Loaders, OnBound: c.OnBound, Events: c.Events}
	}
	if boot.Events == nil {
		boot.Events = c.Events
	}
	h, err := ipxe.NewHandler(boot)
	if err != nil {
		return nil, err
	}
	s.boot = h
	var bootHandler http.Handler = h
	if c.BaseURL6 != "" {
		boot.BaseURL, boot.Loaders = c.BaseURL6, nil
		if s.boot6, err = ipxe.NewHandler(boot); err != nil {
			return nil, fmt.Errorf("bootserver: boot handler for IPv6: %w", err)
		}
		bootHandler = ByFamily(h, s.boot6)
	}
	mux := http.NewServeMux()
	mux.Handle(PathBoot, bootHandler)
	if c.Cache != nil {
		mux.Handle(PathCache, c.Cache)
	}
	if err := handle(mux, c.Handlers); err != nil {
		return nil, err
	}
	var web http.Handler = mux
	if c.RefusePlainHTTP {
		web = s.refusePlain(mux)
	}
	s.web = ipxe.NewServer(web)
	s.web.ErrorLog = c.ErrorLog

	// Every check passed: the parts are the Server's from here.
	if d := c.DHCP; d != nil {
		d.Fence, d.Binder = c.Fence, s.nonces
		if d.Events == nil {
			d.Events = c.Events
		}
		if c.OnNonce != nil {
			d.Binder = proxydhcp.BinderFunc(func(ctx context.Context, mac hwid.MAC, to netip.Addr) (string, error) {
				n, err := s.nonces.Bind(ctx, mac, to)
				if err == nil {
					c.OnNonce(mac, to)
				}
				return n, err
			})
		}
		if p := c.Passes; p != nil {
			h := d.Handler
			d.Handler = proxydhcp.HandlerFunc(func(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
				dec := h.ServeDHCP(ctx, req)
				if dec.Answer && !req.IPXE {
					var to netip.Addr
					if req.IPv6 && !req.Relay.IsValid() {
						to = req.Source.Addr()
					}
					p.Issue(req.MAC, to)
				}
				return dec
			})
		}
		if u, err := url.Parse(c.BaseURL); err == nil && u.Scheme == "http" && d.HTTPPort == 0 && u.Port() != "" {
			d.HTTPPort, _ = strconv.Atoi(u.Port())
		} else if err == nil && u.Scheme == "https" && d.HTTPSPort == 0 {
			// iPXE takes its chain from the HTTPS side.
			if d.HTTPSPort, _ = strconv.Atoi(u.Port()); d.HTTPSPort == 0 {
				d.HTTPSPort = 443
			}
		}
	}
	if t := c.TFTP; t != nil {
		fsys := FS{Builds: c.Builds, Mounts: c.Mounts}
		if c.Cache != nil {
			fsys.Grants = c.Cache.GrantFS()
		}
		t.Fence, t.FS = c.Fence, fsys
		if ch := c.SecureBoot; ch != nil {
			hook := t.OnTransfer
			t.OnTransfer = func(tr tftpd.Transfer) {
				if hook != nil {
					hook(tr)
				}
				ch.OnTransfer(tr)
			}
		}
		if t.Events == nil {
			t.Events = c.Events
		}
	}
	s.cfg = c
	return s, nil
}

// withChain adds the Secure Boot chain's mounts, handlers and loader to copies of c's
// maps, refusing one that collides with the host's.
func withChain(c Config) (Config, error) {
	ch := c.SecureBoot
	if ch == nil {
		return c, nil
	}
	loaders := map[string]Claimer{secureboot.LoaderName: ch.Keys()}
	for k, v := range c.Loaders {
		if k == secureboot.LoaderName {
			return c, errInvalid("Loaders[%q] is SecureBoot's", k)
		}
		loaders[k] = v
	}
	mounts := ch.Mounts()
	if dir := ch.TFTPCacheDir(); c.Cache != nil && dir != "." {
		mounts[dir] = c.Cache.GrantFS()
	}
	for k, v := range c.Mounts {
		if _, ok := mounts[k]; ok {
			return c, errInvalid("Mounts[%q] is SecureBoot's", k)
		}
		mounts[k] = v
	}
	handlers := map[string]http.Handler{secureboot.PathSB: ch, secureboot.PathConfig: ch}
	for k, v := range c.Handlers {
		if _, ok := handlers[k]; ok {
			return c, errInvalid("Handlers[%q] is SecureBoot's", k)
		}
		handlers[k] = v
	}
	c.Loaders, c.Mounts, c.Handlers = loaders, mounts, handlers
	return c, (FS{Mounts: mounts}).validate()
}

// handle mounts the host's handlers, turning the mux's panic on a bad or conflicting
// pattern into an error.
func handle(mux *http.ServeMux, hs map[string]http.Handler) (err error) {
	p := ""
	defer func() {
		if r := recover(); r != nil {
			err = errInvalid("Handlers[%q]: %v", p, r)
		}
	}()
	for p = range hs {
		mux.Handle(p, hs[p])
	}
	return nil
}

// Boot returns the boot handler, for a host that takes its decision outside HTTP
// (ipxe.Handler.Decide) or reads its counters alone.
func (s *Server) Boot() *ipxe.Handler { return s.boot }

// Boot6 returns the boot handler of requests that came over IPv6; nil without BaseURL6.
func (s *Server) Boot6() *ipxe.Handler { return s.boot6 }

// Nonces returns the boot nonces proxy DHCP names in its answers (nil without DHCP), for
// a host that saves them across a restart (bootbind.Nonces.SaveFile).
func (s *Server) Nonces() *bootbind.Nonces { return s.nonces }

// Listeners are the sockets the embedder bound for Serve, which takes ownership of them.
type Listeners struct {
	DHCP   net.PacketConn // UDP 67 of the boot segment; nil: not served
	PXE    net.PacketConn // UDP 4011; nil: not served
	DHCPv6 net.PacketConn // UDP 547 (proxydhcp.ListenDHCPv6); nil: not served
	PXE6   net.PacketConn // UDP [::]:4011, DHCPv6's boot server port; nil: not served
	TFTP   net.PacketConn // UDP 69; nil: not served
	HTTP   net.Listener   // the boot HTTP server (port 80); required
	HTTPS  net.Listener   // its HTTPS side (port 443), under Config.TLS; nil: not served
}

// part is one server loop of Serve and the error it returns once closed.
type part struct {
	name   string
	serve  func() error
	closed error
}

// Serve serves on l until Shutdown or Close, then returns ErrServerClosed. If a part
// fails (a socket error), Serve closes the others and returns that part's error; the
// Server is then closed. A socket of a part the Server lacks (TFTP without Config.TFTP)
// is refused. The sockets are closed when Serve returns. Serve runs once per Server.
func (s *Server) Serve(l Listeners) error {
	parts, err := s.parts(l)
	if err != nil {
		l.Close()
		return err
	}
	s.mu.Lock()
	if s.closed || s.serving {
		closed := s.closed
		s.mu.Unlock()
		l.Close()
		if closed {
			return ErrServerClosed
		}
		return errInvalid("Serve called twice")
	}
	s.serving = true
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()

	errs := make(chan error, len(parts))
	for _, p := range parts {
		go func() {
			err := p.serve()
			if errors.Is(err, p.closed) {
				err = nil
			} else if err != nil {
				err = fmt.Errorf("bootserver: %s: %w", p.name, err)
			}
			errs <- err
		}()
	}
	var first error
	for range parts {
		if err := <-errs; err != nil && first == nil {
			first = err
			// The other parts stop; their loops end and report on errs.
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			s.closeParts()
		}
	}
	if first != nil {
		return first
	}
	return ErrServerClosed
}

// parts are the server loops of l.
func (s *Server) parts(l Listeners) ([]part, error) {
	c := s.cfg
	if l.HTTP == nil {
		return nil, errInvalid("Listeners.HTTP is nil")
	}
	parts := []part{{"http", func() error { return s.web.Serve(l.HTTP) }, http.ErrServerClosed}}
	if l.HTTPS != nil {
		if c.TLS == nil {
			return nil, errInvalid("Listeners.HTTPS without Config.TLS")
		}
		parts = append(parts, part{"https", func() error { return s.web.Serve(tls.NewListener(l.HTTPS, c.TLS)) }, http.ErrServerClosed})
	}
	for _, p := range []struct {
		name  string
		conn  net.PacketConn
		serve func(net.PacketConn) error
	}{
		{"proxy dhcp", l.DHCP, c.DHCP.Serve}, {"proxy dhcp 4011", l.PXE, c.DHCP.ServeBoot}, {"dhcpv6", l.DHCPv6, c.DHCP.ServeDHCPv6},
		{"proxy dhcpv6 4011", l.PXE6, c.DHCP.ServeBoot},
	} {
		if p.conn == nil {
			continue
		}
		if c.DHCP == nil {
			return nil, errInvalid("Listeners for %s without Config.DHCP", p.name)
		}
		parts = append(parts, part{p.name, func() error { return p.serve(p.conn) }, proxydhcp.ErrServerClosed})
	}
	if l.TFTP != nil {
		if c.TFTP == nil {
			return nil, errInvalid("Listeners.TFTP without Config.TFTP")
		}
		// The tftp:// URLs of DHCPv6 answers name the port TFTP is served on.
		if u, ok := l.TFTP.LocalAddr().(*net.UDPAddr); ok && c.DHCP != nil && c.DHCP.TFTPPort == 0 && u.Port != 69 {
			c.DHCP.TFTPPort = u.Port
		}
		parts = append(parts, part{"tftp", func() error { return c.TFTP.Serve(l.TFTP) }, tftpd.ErrServerClosed})
	}
	return parts, nil
}

// Shutdown stops every part gracefully, at once: the HTTP server lets its requests end,
// proxy DHCP answers the requests it is handling, TFTP lets its transfers end. If ctx ends
// first, every part is closed as by Close and Shutdown returns ctx's error. Serve returns
// ErrServerClosed. No goroutine of the Server outlives Shutdown. The cache stays open.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var stops []func() error
	stops = append(stops, func() error {
		err := s.web.Shutdown(ctx)
		if err != nil {
			// net/http leaves the connections open when ctx ends first.
			s.web.Close()
		}
		return err
	})
	if d := s.cfg.DHCP; d != nil {
		stops = append(stops, func() error { return d.Shutdown(ctx) })
	}
	if t := s.cfg.TFTP; t != nil {
		stops = append(stops, func() error { return t.Shutdown(ctx) })
	}
	return s.stop(stops)
}

// Close closes every part at once: connections, sockets and transfers. Serve returns
// ErrServerClosed. No goroutine of the Server outlives Close. The cache stays open.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.closeParts()
	s.running.Wait()
	return err
}

// closeParts closes every part at once and waits for them.
func (s *Server) closeParts() error {
	stops := []func() error{s.web.Close}
	if d := s.cfg.DHCP; d != nil {
		stops = append(stops, d.Close)
	}
	if t := s.cfg.TFTP; t != nil {
		stops = append(stops, t.Close)
	}
	return stopAll(stops)
}

// stop runs the parts' stops together, then waits for Serve.
func (s *Server) stop(stops []func() error) error {
	err := stopAll(stops)
	s.running.Wait()
	return err
}

// stopAll runs stops together and joins their errors.
func stopAll(stops []func() error) error {
	errs := make([]error, len(stops))
	var wg sync.WaitGroup
	for i, f := range stops {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stats are the counters of every part: zero for a part the Server lacks.
type Stats struct {
	DHCP  proxydhcp.Stats
	TFTP  tftpd.Stats
	Boot  ipxe.Stats
	Boot6 ipxe.Stats // the IPv6 boot handler's (BaseURL6)
	Cache imagecache.Stats
	Bind  BindStats
	// PlainRefused counts requests refused for coming over plain HTTP (RefusePlainHTTP).
	PlainRefused uint64
}

// BindStats count the boot nonces: issued in proxy DHCP answers, and the script requests
// claimed with one, by bootbind.Reason.
type BindStats struct {
	Issued       uint64 // nonces named in answers
	Bound        uint64 // requests bound to their answer
	NoNonce      uint64 // bootbind.NoNonce
	UnknownNonce uint64 // bootbind.UnknownNonce
	Lapsed       uint64 // bootbind.Lapsed
	OtherMAC     uint64 // bootbind.OtherMAC
	OtherAddress uint64 // bootbind.OtherAddress
	OffSegment   uint64 // bootbind.OffSegment
	NoPass       uint64 // bootbind.NoPass
}

// Of returns the count of r, for a metric labelled by r's name.
func (b BindStats) Of(r bootbind.Reason) uint64 {
	switch r {
	case bootbind.Bound:
		return b.Bound
	case bootbind.NoNonce:
		return b.NoNonce
	case bootbind.UnknownNonce:
		return b.UnknownNonce
	case bootbind.Lapsed:
		return b.Lapsed
	case bootbind.OtherMAC:
		return b.OtherMAC
	case bootbind.OtherAddress:
		return b.OtherAddress
	case bootbind.OffSegment:
		return b.OffSegment
	case bootbind.NoPass:
		return b.NoPass
	}
	return 0
}

func bindStats(n *bootbind.Nonces) BindStats {
	if n == nil {
		return BindStats{}
	}
	return BindStats{
		Issued: n.Issued(), Bound: n.Refused(bootbind.Bound), NoNonce: n.Refused(bootbind.NoNonce),
		UnknownNonce: n.Refused(bootbind.UnknownNonce), Lapsed: n.Refused(bootbind.Lapsed),
		OtherMAC: n.Refused(bootbind.OtherMAC), OtherAddress: n.Refused(bootbind.OtherAddress),
		OffSegment: n.Refused(bootbind.OffSegment), NoPass: n.Refused(bootbind.NoPass),
	}
}

// Stats returns a snapshot of every part's counters.
func (s *Server) Stats() Stats {
	st := Stats{Boot: s.boot.Stats(), Bind: bindStats(s.nonces), PlainRefused: s.plain.Load()}
	if s.boot6 != nil {
		st.Boot6 = s.boot6.Stats()
	}
	if s.cfg.DHCP != nil {
		st.DHCP = s.cfg.DHCP.Stats()
	}
	if s.cfg.TFTP != nil {
		st.TFTP = s.cfg.TFTP.Stats()
	}
	if s.cfg.Cache != nil {
		st.Cache = s.cfg.Cache.Stats()
	}
	return st
}

var famPlainRefused = metric.Family{Name: "boot_plain_http_refused_total",
	Help: "Boot requests refused for coming over plain HTTP to a site that boots over https only."}

// Samples lists the counters the Server keeps itself, under the names of package metric's
// convention: boot_plain_http_refused_total (Stats.PlainRefused) when it has an HTTPS side
// (Config.TLS), none without one. Its parts' counters are their own: each Stats field's
// Samples.
func (s *Server) Samples() []metric.Sample {
	if s.cfg.TLS == nil {
		return nil
	}
	return []metric.Sample{famPlainRefused.Sample(s.plain.Load())}
}

// Booting is told the address of each machine being booted, whose connections the boot
// listeners keep room for (*connlimit.Recent, [Caps].Prefer, is one).
type Booting interface{ Add(addr netip.Addr) }

// preferring is c with its hooks telling c.Prefer of the machines being booted.
func preferring(c Config) Config {
	p := c.Prefer
	if p == nil {
		return c
	}
	onNonce, onBound := c.OnNonce, c.OnBound
	c.OnNonce = func(mac hwid.MAC, to netip.Addr) {
		if onNonce != nil {
			onNonce(mac, to)
		}
		p.Add(to)
	}
	c.OnBound = func(q ipxe.Query) {
		if onBound != nil {
			onBound(q)
		}
		if q.Loader == "" {
			p.Add(q.Remote)
		}
	}
	if c.DHCP == nil {
		entries := c.Boot.Entries
		c.Boot.Entries = ipxe.EntriesFunc(func(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
			e, ok, err := entries.Entry(ctx, q)
			if ok {
				p.Add(q.Remote)
			}
			return e, ok, err
		})
	}
	return c
}

// PartSamples lists the counters of the parts the Server composes ([Server.Stats]), under
// the names of package metric's convention: the boot handlers' (IPv4 and IPv6 summed),
// proxy DHCP's on the ports it serves (DHCPv6's with its ServerIP6), TFTP's, the boot
// nonces' refusals (Config.Nonces), the IPv6 passes' (Config.Passes) and the cache's.
// The Server's own are [Server.Samples]; the Secure Boot chain's are the host's to list,
// with what its Entries counted (secureboot.Stats.Unavailable).
func (s *Server) PartSamples() []metric.Sample {
	st := s.Stats()
	out := st.Boot.Add(st.Boot6).Samples()
	if d := s.cfg.DHCP; d != nil {
		ports := []proxydhcp.Port{proxydhcp.PortDHCP, proxydhcp.PortBoot}
		if d.ServerIP6.IsValid() {
			ports = append(ports, proxydhcp.PortDHCPv6)
		}
		out = append(out, st.DHCP.Samples(ports...)...)
	}
	if s.cfg.TFTP != nil {
		out = append(out, st.TFTP.Samples()...)
	}
	if s.nonces != nil {
		out = append(out, st.Bind.Samples()...)
	}
	if s.cfg.Passes != nil {
		out = append(out, s.cfg.Passes.Stats().Samples()...)
	}
	if s.cfg.Cache != nil {
		out = append(out, st.Cache.Samples()...)
	}
	return out
}

var famUnbound = metric.Family{Name: "boot_unbound_total",
	Help: "Script requests refused any secret for not being bound to this agent's DHCP answer to the machine, by reason.", Labels: []string{"reason"}}

// Samples lists the refusals under the names of package metric's convention:
// boot_unbound_total{reason}, one per bootbind.Refusals.
func (b BindStats) Samples() []metric.Sample {
	out := make([]metric.Sample, 0, 8)
	for _, r := range bootbind.Refusals() {
		out = append(out, famUnbound.Sample(b.Of(r), r.String()))
	}
	return out
}
