package agent

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/bootserver"
	siteclock "github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/sitelink"
	"github.com/bettercompute/siteboot/sitetls"
	"github.com/bettercompute/siteboot/syslogd"
	"github.com/bettercompute/siteboot/tftpd"
)

// Options are what a host program hands the agent besides its Config.
type Options struct {
	// Logger receives the agent's and its components' logs; nil discards.
	Logger *slog.Logger
	// Signer is the node key; nil loads (or creates) Config.KeyFile.
	Signer crypto.Signer
	// HTTPClient pulls cache images; nil uses the cache's own.
	HTTPClient *http.Client
	// DHCPClientPort is where proxy DHCP sends replies to port-67 requests; zero means 68.
	// A test or the demo, whose machines cannot bind 68, sets another.
	DHCPClientPort int
	// DrainTimeout bounds the graceful stop of the servers; zero means 5 s.
	DrainTimeout time.Duration
	// Clock is the agent's time (boot entries, the fence, discovery, grants, assertions,
	// the heartbeat); nil means the system clock.
	Clock Clock

	// Sockets the host bound itself (a socket it was handed by systemd, a port chosen by a
	// test, one interface). Each one set is served instead of binding the Config's address
	// for it; the agent closes it when it stops. DHCPConn and PXEConn are used only with
	// Boot.ProxyDHCP, TFTPConn only with Boot.TFTP; MetricsListener serves /metrics even
	// when Metrics.Listen is zero.
	DHCPConn, PXEConn, TFTPConn   net.PacketConn
	HTTPListener, MetricsListener net.Listener
	// HTTPSListener is the boot server's HTTPS socket, used only with Boot.TLSCertFile.
	HTTPSListener net.Listener
	// DHCPv6Conn (UDP 547, from proxydhcp.ListenDHCPv6) and PXE6Conn ([::]:4011) are used
	// only with Boot.DHCPv6. With Boot.ServerIP6, TFTPConn and HTTPListener should be
	// dual-stack sockets (bound to [::] on "udp" and "tcp").
	DHCPv6Conn, PXE6Conn net.PacketConn

	// Credentials are the link's site certificate, when the host built the Link itself
	// (sitelink.LinkConfig.Open): the agent checks them on every heartbeat and
	// reports them in /healthz and /metrics. With a nil Link, New builds its own link from
	// Config.Control and loads them itself.
	Credentials *sitetls.Credentials

	// BMCOpener opens the drivers of bmc.* commands' targets; nil means a registry of
	// bmc/redfish and bmc/ipmi with their defaults.
	BMCOpener bmc.Opener

	// Rand is where the boot nonces of proxy DHCP answers come from; nil means crypto/rand.
	Rand io.Reader
}

// Agent is a running site agent: proxy DHCP, TFTP, the boot and cache HTTP server, the lease
// fence, discovery and assertion signing, fed by the control plane over a Link.
type Agent struct {
	cfg      Config
	opt      Options
	log      *slog.Logger
	link     Link
	clock    Clock
	httpBase string
	bases    bootserver.Bases // httpBase, v6.httpBase and the ports proxy DHCP names

	entries *sitelink.EntryStore
	fence   *lease.Fence
	found   *discovery.List
	issuer  *assertion.Issuer
	cache   *imagecache.Cache
	dhcp    *proxydhcp.Server
	tftp    *tftpd.Server
	srv     *bootserver.Server // proxy DHCP, TFTP and the boot HTTP server, composed (boot.go)
	boot    *ipxe.Handler      // srv's IPv4 boot handler
	root    *os.Root           // Boot.TFTPRoot: the iPXE builds; nil when unset
	metrics *http.Server
	events  *bootevents.Timeline // every component's events about each machine (events.go); nil when off
	sink    bootevents.Sink      // events, or nil: the components' Events
	syslog  *syslogd.Server      // machines' consoles into events; nil when off

	// Sockets bound by New (or handed in), served by Run.
	socks      bootserver.Listeners
	metricsLn  net.Listener
	syslogConn net.PacketConn

	machines *bootserver.Entries // the entries as proxy DHCP's and /boot/'s machines (S3)
	beat     sitelink.Heartbeat  // syncOnce every Control.Heartbeat, or sooner when woken
	report   bootserver.LinkSync // the report's cache, section and discovery list (sync.go)
	nonces   *bootbind.Nonces    // proxy DHCP's boot nonces (S1); nil without proxy DHCP
	// keeper saves the nonces across restarts, woken after each one issued; nil without
	// proxy DHCP.
	keeper      *bootbind.Keeper
	linkTLS     *sitetls.Monitor      // the link's credentials, checked each heartbeat
	httpLimit   *connlimit.Listener   // the caps on socks.HTTP
	prefer      *connlimit.Recent     // the sources httpLimit keeps room for
	silent      *discovery.Silent     // machines answered that asked for nothing
	applier     sitelink.EntryApplier // the boot commands, applied off the heartbeat (sync.go)
	metricLimit *connlimit.Listener   // the caps on metricsLn

	bmc *sitelink.BMCService // bmc.* commands (bmc.go)

	v6 ipv6Part // IPv6 boot (ipv6.go)

	sb *secureboot.Chain // the signed chain (secureboot.go); nil when not served

	bootTLS    *sitetls.Credentials // the boot certificate (boottls.go); nil without HTTPS
	httpsLimit *connlimit.Listener  // the caps on socks.HTTPS
}

// New builds an agent from its config and binds its sockets, so that a host learns at once
// that a port is taken. Run serves them. New keeps its own copy of cfg.
func New(ctx context.Context, cfg *Config, link Link, opt Options) (a *Agent, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.DrainTimeout == 0 {
		opt.DrainTimeout = 5 * time.Second
	}
	clock := opt.Clock
	if clock == nil {
		clock = siteclock.Real
	}
	ag := &Agent{cfg: *cfg, opt: opt, log: log, link: link, clock: clock}
	if !cfg.Boot.tlsOn() && opt.HTTPSListener != nil {
		opt.HTTPSListener.Close() // unused: the agent closes what it was handed
	}
	ag.beat = sitelink.Heartbeat{Every: cfg.Control.Heartbeat, Beat: ag.syncOnce, Clock: clock, Logger: log}
	defer func() {
		if err != nil {
			ag.release()
		}
	}()
	a = ag
	c := &a.cfg

	a.sweepTemps()
	if err := a.setupEvents(); err != nil {
		return nil, err
	}
	if a.silent, err = discovery.NewSilent(discovery.SilentConfig{Window: a.nonceWindow(), Max: maxSilentWatch, Clock: clock}); err != nil {
		return nil, err
	}
	if a.entries, err = sitelink.OpenEntryStore(filepath.Join(c.DataDir, EntriesFileName), clock); err != nil {
		return nil, err
	}
	a.applier = sitelink.EntryApplier{Store: a.entries, OnApplied: a.report.Applied, Logger: log}
	a.machines = &bootserver.Entries{Store: a.entries, Events: a.sink, Clock: clock, Logger: log.With("component", "proxydhcp"),
		// The machine should now ask this agent for its next step within the nonce window.
		OnAnswer:          func(req *proxydhcp.Request, _ sitelink.ParsedEntry) { a.silent.Answered(req.MAC) },
		SecureBootDefault: c.Boot.SecureBoot,
	}
	if d, ok := a.entries.Damage(); ok {
		a.log.Error("boot entries file damaged: set aside, serving the valid entries", "set_aside", d.SetAside,
			"reason", d.Reason, "kept", d.Kept, "dropped", d.Dropped)
	}
	signer := opt.Signer
	if signer == nil {
		if signer, err = LoadOrCreateKey(c.keyFile()); err != nil {
			return nil, err
		}
	}
	if err := a.setupLink(signer.Public()); err != nil {
		return nil, err
	}
	// The issuer's events say why an assertion was refused (no epoch, a lapsed entry), where
	// the boot handler's own event names only an error.
	a.issuer = &assertion.Issuer{Site: c.SiteID, Agent: c.NodeID, Signer: signer, Clock: clock, Events: a.sink}
	if err := a.issuer.Validate(); err != nil {
		return nil, err
	}
	a.fence = &lease.Fence{TTL: c.Lease.TTL, Clock: clock, Logger: log.With("component", "lease")}
	if a.found, err = discovery.NewList(discovery.Config{
		ReportWanted: a.beat.Wake,
		DHCPFirst:    c.Boot.ProxyDHCP,
		Clock:        clock,
		Logger:       log.With("component", "discovery"),
	}); err != nil {
		return nil, err
	}
	if a.cache, err = imagecache.Open(ctx, imagecache.Config{
		Dir:      filepath.Join(c.DataDir, CacheDirName),
		MaxBytes: c.Boot.CacheMaxBytes,
		Client:   opt.HTTPClient,
		// The site's own choice of sources the policy would refuse.
		AllowedSourceNetworks: c.Boot.AllowedSourceNetworks,
		ManagementNetworks:    c.Boot.ManagementNetworks,
		Fence:                 a.fence,
		Events:                a.sink,
		Clock:                 clock,
		Logger:                log.With("component", "imagecache"),
	}); err != nil {
		return nil, err
	}
	a.report = bootserver.LinkSync{Cache: a.cache, Found: a.found, Entries: a.entries, Pinned: []Image{c.Boot.Kernel, c.Boot.Initrd}, Logger: log}
	if err := a.loadBootTLS(); err != nil {
		return nil, err
	}
	if err := a.listen(); err != nil {
		return nil, err
	}
	if err := a.limitListeners(); err != nil {
		return nil, err
	}
	if err := a.setupBMC(); err != nil { // its images' URLs are under the listeners'
		return nil, err
	}
	if c.Boot.ProxyDHCP {
		a.nonces = bootbind.NewNonces(a.bindingConfig())
		a.nonces.Neighbor = bootbind.NeighborMAC // a broadcast offer's nonce (HTTP boot) only for the machine's MAC
		// Saved on the process's clock, as any other write: a nonce's life is on a.clock.
		a.keeper = &bootbind.Keeper{Nonces: a.nonces, Path: filepath.Join(c.DataDir, NoncesFileName), Logger: log}
		a.keeper.Load()
		a.dhcp = &proxydhcp.Server{
			Handler:    proxydhcp.HandlerFunc(a.machines.ServeDHCP),
			Discoverer: bootserver.DiscoveredDHCP(a.found),
			ServerIP:   c.Boot.ServerIP,
			HTTPPort:   a.bases.HTTPPort,
			HTTPSPort:  a.bases.HTTPSPort,
			// Firmware with the site CA enrolled fetches the iPXE build over https too.
			HTTPBootTLS: c.Boot.FirmwareHTTPS,
			Relays:      c.Boot.Relays,
			Segments:    c.Boot.Segments,
			ClientPort:  opt.DHCPClientPort,
			Clock:       clock,
			Logger:      log.With("component", "proxydhcp"),
		}
		if c.Boot.DHCPv6 {
			// bootserver names the TFTP socket's port in the tftp:// URLs of DHCPv6 answers.
			a.dhcp.ServerIP6 = c.Boot.ServerIP6
			a.v6.passes = a.newPasses()
		}
		if c.Boot.TFTPRoot == "" {
			a.dhcp.BootFiles = bootserver.OwnBootFiles()
			a.dhcp.UpgradeIPXE = true // every own build speaks https
		}
		if err := a.dhcp.Validate(); err != nil {
			return nil, err
		}
	}
	if err := a.setupSecureBoot(); err != nil {
		return nil, err
	}
	if c.Boot.TFTP {
		a.tftp = &tftpd.Server{
			Logger: log.With("component", "tftpd"),
		}
		c.Boot.TFTPLimits.Apply(a.tftp)
	}
	if err := a.bootServer(); err != nil {
		return nil, err
	}
	if a.metricsLn != nil {
		a.metrics = ipxe.NewServer(a.metricsHandler())
		a.metrics.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return a, nil
}

// listen binds every socket the config names that the host did not hand in.
func (a *Agent) listen() (err error) {
	b, o := a.cfg.Boot, a.opt
	a.socks = bootserver.Listeners{HTTP: o.HTTPListener}
	if b.tlsOn() {
		a.socks.HTTPS = o.HTTPSListener
	}
	if b.ProxyDHCP {
		a.socks.DHCP, a.socks.PXE = o.DHCPConn, o.PXEConn
		if b.DHCPv6 {
			a.socks.DHCPv6, a.socks.PXE6 = o.DHCPv6Conn, o.PXE6Conn
		}
	}
	if b.TFTP {
		a.socks.TFTP = o.TFTPConn
	}
	if a.socks, err = a.socks.Listen(context.Background(), b.addrs()); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if a.metricsLn = o.MetricsListener; a.metricsLn == nil && a.cfg.Metrics.Listen.IsValid() {
		if a.metricsLn, err = net.Listen("tcp", a.cfg.Metrics.Listen.String()); err != nil {
			return fmt.Errorf("agent: metrics: %w", err)
		}
	}
	// A port of 0 in a base URL takes the port the listener got: the URLs handed to machines
	// need the real one. With HTTPS, every URL handed to iPXE is on the HTTPS side.
	a.bases = a.socks.Bases(b.HTTPBase, b.HTTPBase6, b.ServerIP, b.ServerIP6)
	a.httpBase, a.v6.httpBase = a.bases.URL, a.bases.URL6
	return nil
}

// release undoes a New that failed half-way: sockets closed, the cache unlocked.
func (a *Agent) release() {
	a.closeSockets()
	if a.cache != nil {
		a.cache.Close()
	}
	if a.found != nil {
		a.found.Close()
	}
	if a.bmc != nil {
		a.bmc.Close()
	}
	if a.sb != nil {
		a.sb.Close()
	}
	a.closeRoot()
}

func (a *Agent) closeRoot() {
	if a.root != nil {
		a.root.Close()
	}
}

func (a *Agent) closeSockets() {
	a.socks.Close()
	if a.syslogConn != nil {
		a.syslogConn.Close()
	}
	if a.metricsLn != nil {
		a.metricsLn.Close()
	}
}

// Addrs are the addresses the agent's sockets are bound to, by name (dhcp, pxe, tftp, http,
// metrics, syslog); a host that asked for port 0 reads the ports here.
func (a *Agent) Addrs() map[string]string {
	m := a.socks.Addrs()
	if a.metricsLn != nil {
		m["metrics"] = a.metricsLn.Addr().String()
	}
	if a.syslogConn != nil {
		m["syslog"] = a.syslogConn.LocalAddr().String()
	}
	return m
}

// HTTPBase is the base URL machines use for /boot/ and /cache/.
func (a *Agent) HTTPBase() string { return a.httpBase }

// Fence is the agent's view of the boot lease.
func (a *Agent) Fence() lease.FenceState { return a.fence.State() }

// Discovered is the agent's list of unknown machines.
func (a *Agent) Discovered() discovery.Snapshot { return a.found.Snapshot() }

// Entries are the boot entries the agent holds.
func (a *Agent) Entries() *sitelink.EntryStore { return a.entries }

// Cache is the agent's image cache.
func (a *Agent) Cache() *imagecache.Cache { return a.cache }

// Run serves until ctx ends, then drains the servers and returns nil; or returns the first
// error of a server.
func (a *Agent) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		err := a.srv.Serve(a.socks)
		if errors.Is(err, bootserver.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("agent: %w", err)
	})
	if a.metrics != nil {
		g.Go(func() error {
			if err := a.metrics.Serve(a.metricsLn); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("agent: metrics: %w", err)
			}
			return nil
		})
	}
	if a.syslog != nil {
		g.Go(a.serveSyslog)
	}
	g.Go(func() error { return a.beat.Run(gctx) })
	g.Go(func() error { return a.applier.Run(gctx) })
	if a.keeper != nil {
		g.Go(func() error { return a.keeper.Run(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		a.stop()
		return nil
	})
	a.log.Info("site agent running", "site", a.cfg.SiteID, "node", a.cfg.NodeID, "addrs", a.Addrs())
	return g.Wait()
}

// stop drains every server within DrainTimeout.
func (a *Agent) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), a.opt.DrainTimeout)
	defer cancel()
	servers := []interface{ Shutdown(context.Context) error }{a.srv, a.cache}
	if a.metrics != nil {
		servers = append(servers, a.metrics)
	}
	if a.syslog != nil {
		servers = append(servers, a.syslog)
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.Shutdown(ctx) })
	}
	wg.Wait()
	if a.sb != nil {
		a.sb.Shutdown(ctx)
	}
	if a.keeper != nil {
		a.keeper.Save()
	}
	a.closeRoot()
	a.found.Close()
	a.bmc.Close()
	a.log.Info("site agent stopped")
}
