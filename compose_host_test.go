package siteboot_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/tftpd"
)

// hostConfig is what an embedder hands the host: where it serves, the site's ramdisk, the
// machines to boot, and what the control plane gives (discovery tokens, the node's issuer).
type hostConfig struct {
	IP             netip.Addr              // the boot segment's address every socket binds
	ClientPort     int                     // where port-67 answers go (68 on a real segment)
	CacheDir       string                  // the image cache's directory
	Sources        []netip.Prefix          // image sources the cache's policy would refuse otherwise
	Kernel, Initrd imagecache.Image        // the site's ramdisk, pulled into the cache
	Builds         fs.FS                   // the iPXE builds, served over TFTP
	Entries        map[hwid.MAC]ipxe.Entry // the machines to boot; read-only once the host runs
	Tokens         ipxe.Tokens             // their discovery tokens
	Issuer         *assertion.Issuer       // signs the discovery assertions
}

// host is a boot server composed from library packages alone: proxy DHCP (67 and 4011)
// naming a boot nonce in each answer to iPXE, TFTP of the iPXE builds and of cached images
// under a grant, the boot decision (ipxe's handler) under bootbind's rule, the image cache
// and the assertion issuer, all gated by the lease epoch its embedder sets.
type host struct {
	cfg    hostConfig
	epoch  atomic.Uint64 // the boot lease epoch the embedder says this host holds; 0: fenced
	nonces *bootbind.Nonces
	cache  *imagecache.Cache
	dhcp   *proxydhcp.Server
	boot   *ipxe.Handler
	udp    map[string]net.PacketConn // "dhcp" (67), "pxe" (4011), "tftp"
	ln     net.Listener              // the boot HTTP server's
	base   string                    // its URL
	stop   []func() error
	run    errgroup.Group
}

func (h *host) active() (uint64, bool) { e := h.epoch.Load(); return e, e != 0 }

// newHost pulls the ramdisk into the cache, binds every socket on cfg.IP and serves.
func newHost(ctx context.Context, cfg hostConfig) (*host, error) {
	h := &host{cfg: cfg, nonces: bootbind.NewNonces(bootbind.Config{}), udp: map[string]net.PacketConn{}}
	if err := h.start(ctx); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *host) start(ctx context.Context) (err error) {
	c := h.cfg
	if h.cache, err = imagecache.Open(ctx, imagecache.Config{Dir: c.CacheDir, AllowedSourceNetworks: c.Sources,
		Fence: imagecache.FenceFunc(func() bool { _, ok := h.active(); return ok })}); err != nil {
		return err
	}
	h.stop = append(h.stop, h.cache.Close)
	for _, im := range []imagecache.Image{c.Kernel, c.Initrd} {
		if err := h.cache.Pull(ctx, im); err != nil {
			return err
		}
	}
	for _, name := range []string{"dhcp", "pxe", "tftp"} {
		if h.udp[name], err = net.ListenPacket("udp4", netip.AddrPortFrom(c.IP, 0).String()); err != nil {
			return err
		}
		h.stop = append(h.stop, h.udp[name].Close)
	}
	if h.ln, err = net.Listen("tcp4", netip.AddrPortFrom(c.IP, 0).String()); err != nil {
		return err
	}
	h.stop, h.base = append(h.stop, h.ln.Close), "http://"+h.ln.Addr().String()
	h.dhcp = &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(h.answer), Binder: h.nonces, ServerIP: c.IP,
		HTTPPort: h.ln.Addr().(*net.TCPAddr).Port, ClientPort: c.ClientPort}
	tftp := &tftpd.Server{FS: tftpFS{builds: c.Builds, grants: h.cache.GrantFS()}}
	if h.boot, err = ipxe.NewHandler(ipxe.Config{
		Entries: ipxe.EntriesFunc(h.entry), Fence: ipxe.FenceFunc(h.active), Tokens: c.Tokens, Cache: grants{h},
		Signer: ipxe.SignerFunc(func(ctx context.Context, cl ipxe.Claims) (string, error) {
			return c.Issuer.Issue(ctx, assertion.Fields{Epoch: cl.Epoch, MAC: cl.MAC, IP: cl.IP, UUID: cl.UUID,
				Workflow: cl.Workflow, NotAfter: cl.NotAfter})
		}),
		Kernel: ipxe.CacheImage(c.Kernel.SHA256.String()), Initrds: []string{ipxe.CacheImage(c.Initrd.SHA256.String())},
		BaseURL: h.base,
	}); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/boot/", h.boot)
	mux.Handle("/cache/", h.cache)
	web := ipxe.NewServer(mux)
	h.stop = append(h.stop, h.dhcp.Close, tftp.Close, web.Close)
	serve := func(closed error, run func() error) {
		h.run.Go(func() error {
			if err := run(); !errors.Is(err, closed) {
				return err
			}
			return nil
		})
	}
	serve(proxydhcp.ErrServerClosed, func() error { return h.dhcp.Serve(h.udp["dhcp"]) })
	serve(proxydhcp.ErrServerClosed, func() error { return h.dhcp.ServeBoot(h.udp["pxe"]) })
	serve(tftpd.ErrServerClosed, func() error { return tftp.Serve(h.udp["tftp"]) })
	serve(http.ErrServerClosed, func() error { return web.Serve(h.ln) })
	return nil
}

// answer is proxy DHCP's decision: a machine with an entry, while this host holds the lease.
func (h *host) answer(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
	if _, ok := h.active(); !ok {
		return proxydhcp.Silence(proxydhcp.ReasonFenced)
	}
	if _, ok := h.cfg.Entries[req.MAC]; !ok {
		return proxydhcp.Silence(proxydhcp.ReasonUnknown)
	}
	return proxydhcp.Answer()
}

// entry is the boot decision's host rule: the machine's entry, for a request bound to this
// host's DHCP answer to it (the answer's boot nonce, from the address the answer went to).
func (h *host) entry(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	e, ok := h.cfg.Entries[q.MAC]
	if !ok {
		return ipxe.Entry{}, false, nil
	}
	if r := h.nonces.Claim(q.Nonce, q.MAC, q.Remote); r != bootbind.Bound {
		return ipxe.Entry{}, false, fmt.Errorf("%w: %w", ipxe.ErrUnbound, r.Err())
	}
	return e, true, nil
}

// grants mints the one boot grant of an entry that its scripts carry; no sanboot here.
type grants struct{ h *host }

func (g grants) CacheURL(ctx context.Context, e ipxe.Entry) (string, error) {
	gr, err := g.h.cache.BootGrantFor(e.MAC.String()+"/"+e.Workflow, e.NotAfter)
	if err != nil {
		return "", err
	}
	return g.h.base + "/cache/t/" + gr.Token + "/", nil
}
func (grants) ISOReady(context.Context, string) (bool, error) { return false, nil }
func (grants) SanbootURL(context.Context, ipxe.Entry) (string, error) {
	return "", errors.ErrUnsupported
}

// tftpFS serves the iPXE builds, and cached images under a grant as t/GRANT/SHA256.
type tftpFS struct{ builds, grants fs.FS }

func (f tftpFS) Open(name string) (fs.File, error) {
	if strings.HasPrefix(name, "t/") {
		return f.grants.Open(name)
	}
	return f.builds.Open(name)
}

// Close stops the servers (a socket a server already closed only says so), waits for them,
// and closes the cache.
func (h *host) Close() error {
	for i := len(h.stop) - 1; i >= 0; i-- {
		h.stop[i]()
	}
	return h.run.Wait()
}
