package siteboot_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
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

// hostConfig is what an embedder hands the host: the sockets it bound, the site's ramdisk, the
// machines to boot, and what the control plane gives (discovery tokens, the node's issuer).
type hostConfig struct {
	DHCP, PXE, TFTP net.PacketConn          // UDP 67, 4011 and 69 of the boot segment's address
	HTTP            net.Listener            // the boot HTTP server's (port 80)
	ClientPort      int                     // where port-67 answers go (68 on a real segment)
	Cache           imagecache.Config       // the image cache (the host sets its Fence)
	Kernel, Initrd  imagecache.Image        // the site's ramdisk, pulled into the cache
	Builds          fs.FS                   // the iPXE builds, served over TFTP
	Entries         map[hwid.MAC]ipxe.Entry // the machines to boot; read-only once the host runs
	Tokens          ipxe.Tokens             // their discovery tokens
	Issuer          *assertion.Issuer       // signs the discovery assertions
}

// host is a boot server of library packages alone: proxy DHCP naming a boot nonce in each
// answer to iPXE, TFTP of the iPXE builds and of cached images under a grant, the boot decision
// under bootbind's rule, the image cache and the assertion issuer, gated by the lease epoch.
type host struct {
	cfg    hostConfig
	epoch  fence // the boot lease epoch the embedder says this host holds
	nonces *bootbind.Nonces
	cache  *imagecache.Cache
	dhcp   *proxydhcp.Server
	tftp   *tftpd.Server
	boot   *ipxe.Handler
	web    *http.Server
	base   string // the boot HTTP server's URL
	run    errgroup.Group
}

// fence is the one fence every part takes: the epoch of the lease held, 0 for none (fenced).
type fence struct{ atomic.Uint64 }

func (f *fence) Active() (uint64, bool) { e := f.Load(); return e, e != 0 }

// newHost pulls the ramdisk into the cache and serves on the embedder's sockets, which the
// servers close when the host closes.
func newHost(ctx context.Context, c hostConfig) (_ *host, err error) {
	h := &host{cfg: c, nonces: bootbind.NewNonces(bootbind.Config{}), base: "http://" + c.HTTP.Addr().String()}
	if h.boot, err = ipxe.NewHandler(ipxe.Config{
		Entries: ipxe.EntriesFunc(h.entry), Fence: &h.epoch, Tokens: c.Tokens, Cache: h,
		Signer: ipxe.SignerFunc(func(ctx context.Context, cl ipxe.Claims) (string, error) {
			return c.Issuer.Issue(ctx, assertion.Fields{Epoch: cl.Epoch, MAC: cl.MAC, IP: cl.IP, UUID: cl.UUID,
				Workflow: cl.Workflow, NotAfter: cl.NotAfter})
		}),
		Kernel: ipxe.CacheImage(c.Kernel.SHA256.String()), Initrds: []string{ipxe.CacheImage(c.Initrd.SHA256.String())},
		BaseURL: h.base,
	}); err != nil {
		return nil, err
	}
	c.Cache.Fence = &h.epoch
	if h.cache, err = imagecache.Open(ctx, c.Cache); err != nil {
		return nil, err
	}
	for _, im := range []imagecache.Image{c.Kernel, c.Initrd} {
		if err := h.cache.Pull(ctx, im); err != nil {
			return nil, errors.Join(err, h.cache.Close())
		}
	}
	h.dhcp = &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(h.answer), Fence: &h.epoch, Binder: h.nonces,
		ClientPort: c.ClientPort, HTTPPort: c.HTTP.Addr().(*net.TCPAddr).Port}
	h.tftp = &tftpd.Server{FS: tftpFS{builds: c.Builds, grants: h.cache.GrantFS()}, Fence: &h.epoch}
	mux := http.NewServeMux()
	mux.Handle("/boot/", h.boot)
	mux.Handle("/cache/", h.cache)
	h.web = ipxe.NewServer(mux)
	h.run.Go(func() error { return h.dhcp.Serve(c.DHCP) })
	h.run.Go(func() error { return h.dhcp.ServeBoot(c.PXE) })
	h.run.Go(func() error { return h.tftp.Serve(c.TFTP) })
	h.run.Go(func() error { return h.web.Serve(c.HTTP) })
	return h, nil
}

// answer is proxy DHCP's decision (the fence came first): a machine with an entry.
func (h *host) answer(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
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

// CacheURL is the bc.cache of e's scripts: the one boot grant of the entry (ipxe.Cache).
func (h *host) CacheURL(ctx context.Context, e ipxe.Entry) (string, error) {
	g, err := h.cache.BootGrantFor(e.MAC.String()+"/"+e.Workflow, e.NotAfter)
	if err != nil {
		return "", err
	}
	return h.base + "/cache/t/" + g.Token + "/", nil
}

// ISOReady and SanbootURL: this host boots no ISO.
func (*host) ISOReady(context.Context, string) (bool, error)         { return false, nil }
func (*host) SanbootURL(context.Context, ipxe.Entry) (string, error) { return "", fs.ErrNotExist }

// tftpFS serves the iPXE builds, and cached images under a grant as t/GRANT/SHA256.
type tftpFS struct{ builds, grants fs.FS }

func (f tftpFS) Open(name string) (fs.File, error) {
	if strings.HasPrefix(name, "t/") {
		return f.grants.Open(name)
	}
	return f.builds.Open(name)
}

// Close stops the servers, waits for them, and closes the cache.
func (h *host) Close() error {
	err := errors.Join(h.web.Close(), h.dhcp.Close(), h.tftp.Close())
	if e := h.run.Wait(); !errors.Is(e, proxydhcp.ErrServerClosed) && !errors.Is(e, tftpd.ErrServerClosed) &&
		!errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return errors.Join(err, h.cache.Close())
}
