package agent

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

// bootServer composes proxy DHCP, TFTP and the /boot/ and /cache/ HTTP server with
// package bootserver: the lease fence on every part, the boot nonces as proxy DHCP's
// Binder and as the binding of every script request (with the IPv6 passes and the signed
// GRUB's keys), the assertions signed by the agent's issuer, the cache grants under the
// agent's URLs (IPv6 ones for a request that came over IPv6). The agent adds its
// machines (ipxeEntry), their tokens over its link, and the signed chain.
func (a *Agent) bootServer() error {
	b := a.cfg.Boot
	boot := ipxe.Config{
		Entries: ipxe.EntriesFunc(a.ipxeEntry),
		Tokens:  bootserver.Tokens(a.link, a.cfg.NodeID),
		// The site's ramdisk comes from the cache, under the same boot grant as bc.cache.
		Kernel:       ipxe.CacheImage(b.Kernel.SHA256),
		Initrds:      []string{ipxe.CacheImage(b.Initrd.SHA256)},
		Params:       ipxe.SiteParams(a.cfg.Boot.Params),
		Cmdline:      b.Cmdline,
		OnDiscovered: bootserver.DiscoveredHTTP(a.found),
		Clock:        a.clock,
		Logger:       a.log.With("component", "ipxe"),
	}
	if boot.Syslog = bootserver.SyslogTarget(b.SyslogListen, b.ServerIP); a.bootTLS != nil && boot.Syslog.IsValid() {
		// bootserver points iPXE's console nowhere over https (its syslog is in clear).
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
		// The machines being booted: the boot listeners keep room for their next requests.
		Prefer:   a.prefer,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	if a.bootTLS != nil {
		c.TLS, c.RefusePlainHTTP = a.bootTLSConfig(), b.RefusePlainHTTP
	}
	if a.dhcp != nil {
		c.DHCP, c.Nonces, c.Passes = a.dhcp, a.nonces, a.v6.passes
		c.OnNonce = func(hwid.MAC, netip.Addr) { a.keeper.Wake() }
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
	return a.machines.Entry(ctx, q)
}

// cacheBase is the URL machines reach the image cache at over IPv4.
func (a *Agent) cacheBase() string {
	if a.cfg.Boot.CacheURL != "" {
		return strings.TrimSuffix(a.cfg.Boot.CacheURL, "/")
	}
	return a.httpBase + "/cache"
}
