package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/sitelink"
)

// bootServer composes proxy DHCP, TFTP and the /boot/ and /cache/ HTTP server with
// package bootserver: the lease fence on every part, the boot nonces as proxy DHCP's
// Binder and as the binding of every script request (with the IPv6 passes and the signed
// GRUB's keys), the assertions signed by the agent's issuer, the cache grants under the
// agent's URLs (IPv6 ones for a request that came over IPv6). The agent adds its
// machines (ipxeEntry), their tokens, and the signed chain's files and handler.
func (a *Agent) bootServer() error {
	b := a.cfg.Boot
	boot := ipxe.Config{
		Entries: ipxe.EntriesFunc(a.ipxeEntry),
		Tokens:  ipxe.TokensFunc(a.token),
		// The site's ramdisk comes from the cache, under the same boot grant as bc.cache.
		Kernel:  ipxe.CacheImage(b.Kernel.SHA256),
		Initrds: []string{ipxe.CacheImage(b.Initrd.SHA256)},
		Params:  ipxe.SiteParams(a.cfg.Boot.Params),
		Cmdline: b.Cmdline,
		// Anyone can fetch a URL: with proxy DHCP running, the discovery list counts a
		// script fetch only for a MAC proxy DHCP already showed (discovery.Config.DHCPFirst,
		// the one place that rule is kept).
		OnDiscovered: func(d ipxe.Discovery) {
			a.found.Seen(discovery.Sighting{MAC: d.MAC, UUID: d.UUID, Arch: d.Arch, HasArch: d.HasArch, Via: discovery.ViaHTTP})
		},
		Clock:  a.clock,
		Logger: a.log.With("component", "ipxe"),
	}
	boot.Syslog = syslogTarget(b)
	if a.bootTLS != nil && boot.Syslog.IsValid() {
		// iPXE's console prints every URL it fetches, cache grants included, and its
		// syslog goes over UDP in clear: not while the boot is over https.
		boot.Syslog = netip.Addr{}
		a.log.Warn("boot over https: iPXE's console is not sent to the syslog receiver, since it would carry the cache grants in clear",
			"syslog_listen", b.SyslogListen)
	}
	var builds fs.FS
	if b.TFTPRoot != "" {
		root, err := os.OpenRoot(b.TFTPRoot)
		if err != nil {
			return fmt.Errorf("agent: tftp root: %w", err)
		}
		a.root = root
		builds, boot.Files = root.FS(), root.FS()
	} else {
		builds, boot.Files = a.ownBuilds(), a.ownBuilds()
	}
	c := bootserver.Config{
		Fence: a.fence, BaseURL: a.httpBase, BaseURL6: a.v6.httpBase, Boot: boot,
		Issuer: a.issuer, Cache: a.cache, CacheURL: b.CacheURL, Events: a.sink,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	if a.bootTLS != nil {
		c.TLS, c.RefusePlainHTTP = a.bootTLSConfig(), b.RefusePlainHTTP
	}
	if a.dhcp != nil {
		c.DHCP, c.Nonces, c.Passes = a.dhcp, a.nonces, a.v6.passes
		c.OnNonce = func(_ hwid.MAC, to netip.Addr) {
			a.keeper.Wake()
			// The machine's HTTP requests come next: the boot listener keeps room for them.
			a.prefer.Add(to)
		}
		c.OnBound = func(q ipxe.Query) {
			if q.Loader == "" {
				// Its kernel and initrd come next, from the same address.
				a.prefer.Add(q.Remote)
			}
		}
	}
	if a.tftp != nil {
		c.TFTP, c.Builds = a.tftp, builds
	}
	if a.sb != nil {
		// bootserver mounts the chain's TFTP files (and the cache's grants under its
		// directory), serves its HTTP paths, binds its GRUB's key and reports transfers to it.
		c.SecureBoot = a.sb
	}
	srv, err := bootserver.New(c)
	if err != nil {
		return err
	}
	a.srv, a.boot = srv, srv.Boot()
	if a.tftp != nil {
		return a.tftp.Validate()
	}
	return nil
}

// ipxeEntry is the agent's lookup behind /boot/ipxe (I4, S3): a.machines' (the live entry
// of the machine asking, when the machine is the one it names). With proxy DHCP,
// bootserver.Bind then gives it only to a request bound to this agent's DHCP answer (S1:
// its boot nonce, its IPv6 pass, or for the signed GRUB its boot key). Without proxy DHCP
// the site's own DHCP server sends machines here and no nonce exists: whoever can reach
// the agent and knows a MAC with a live entry gets its script (see the package doc, "Boot
// secrets").
func (a *Agent) ipxeEntry(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	a.silent.Asked(q.MAC)
	e, ok, err := a.machines.Entry(ctx, q)
	if ok && a.nonces == nil {
		// A live entry's machine: its kernel and initrd come next, from the same address.
		a.prefer.Add(q.Remote)
	}
	return e, ok, err
}

// token fetches the machine's discovery token from the control plane; the handler asks once
// per entry and keeps the answer.
func (a *Agent) token(ctx context.Context, e ipxe.Entry) (string, error) {
	r, ok := e.Ref.(sitelink.ParsedEntry)
	if !ok || r.TokenRef == "" {
		return "", ipxe.ErrNotReady
	}
	t, err := a.link.Token(ctx, sitelink.TokenRequest{Node: a.cfg.NodeID, Workflow: r.Workflow, Ref: r.TokenRef})
	if errors.Is(err, sitelink.ErrNotReady) {
		return "", ipxe.ErrNotReady
	}
	return t, err
}

// cacheBase is the URL machines reach the image cache at over IPv4.
func (a *Agent) cacheBase() string {
	if a.cfg.Boot.CacheURL != "" {
		return strings.TrimSuffix(a.cfg.Boot.CacheURL, "/")
	}
	return a.httpBase + "/cache"
}

// syslogTarget is where the chain script points iPXE's syslog console: the agent's
// receiver (Boot.SyslogListen, or Boot.ServerIP when it listens on every address), so a
// machine's console reaches its timeline. iPXE's console speaks only to port 514 of one
// IPv4 address: a receiver elsewhere gets no console lines (the zero Addr).
func syslogTarget(b BootConfig) netip.Addr {
	l := b.SyslogListen
	if !l.IsValid() || l.Port() != 514 {
		return netip.Addr{}
	}
	switch ip := l.Addr().Unmap(); {
	case ip.Is4() && !ip.IsUnspecified():
		return ip
	case ip.IsUnspecified() && b.ServerIP.Is4():
		return b.ServerIP
	}
	return netip.Addr{}
}
