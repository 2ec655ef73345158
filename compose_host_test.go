package siteboot_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"sync/atomic"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootserver"
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

// host is a boot server of library packages alone: bootserver composes proxy DHCP naming a
// boot nonce in each answer to iPXE, TFTP of the iPXE builds and of cached images under a
// grant, the boot decision under bootbind's rule and the assertion issuer, gated by the lease
// epoch; the host adds its machines and the image cache.
type host struct {
	*bootserver.Server
	cfg    hostConfig
	epoch  fence // the boot lease epoch the embedder says this host holds
	cache  *imagecache.Cache
	served chan error // Serve's result
}

// fence is the one fence every part takes: the epoch of the lease held, 0 for none (fenced).
type fence struct{ atomic.Uint64 }

func (f *fence) Active() (uint64, bool) { e := f.Load(); return e, e != 0 }

// newHost pulls the ramdisk into the cache and serves on the embedder's sockets, which the
// server closes when the host closes.
func newHost(ctx context.Context, c hostConfig) (_ *host, err error) {
	h := &host{cfg: c, served: make(chan error, 1)}
	c.Cache.Fence = &h.epoch
	if h.cache, err = imagecache.Open(ctx, c.Cache); err != nil {
		return nil, err
	}
	for _, im := range []imagecache.Image{c.Kernel, c.Initrd} {
		if err := h.cache.Pull(ctx, im); err != nil {
			return nil, errors.Join(err, h.cache.Close())
		}
	}
	if h.Server, err = bootserver.New(bootserver.Config{
		Fence: &h.epoch, BaseURL: "http://" + c.HTTP.Addr().String(), Issuer: c.Issuer, Cache: h.cache,
		Boot: ipxe.Config{Entries: ipxe.EntriesFunc(h.entry), Tokens: c.Tokens,
			Kernel: ipxe.CacheImage(c.Kernel.SHA256.String()), Initrds: []string{ipxe.CacheImage(c.Initrd.SHA256.String())}},
		DHCP: &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(h.answer), ClientPort: c.ClientPort},
		TFTP: &tftpd.Server{}, Builds: c.Builds,
	}); err != nil {
		return nil, errors.Join(err, h.cache.Close())
	}
	go func() {
		h.served <- h.Serve(bootserver.Listeners{DHCP: c.DHCP, PXE: c.PXE, TFTP: c.TFTP, HTTP: c.HTTP})
	}()
	return h, nil
}

// answer is proxy DHCP's decision (the fence came first): a machine with an entry.
func (h *host) answer(ctx context.Context, req *proxydhcp.Request) proxydhcp.Decision {
	if _, ok := h.cfg.Entries[req.MAC]; !ok {
		return proxydhcp.Silence(proxydhcp.ReasonUnknown)
	}
	return proxydhcp.Answer()
}

// entry is the host's lookup; bootserver gives the entry only to a request bound to the
// host's DHCP answer (the answer's boot nonce, from the address the answer went to).
func (h *host) entry(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	e, ok := h.cfg.Entries[q.MAC]
	return e, ok, nil
}

// Close stops the servers, waits for them, and closes the cache.
func (h *host) Close() error {
	err := h.Server.Close()
	if e := <-h.served; !errors.Is(e, bootserver.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return errors.Join(err, h.cache.Close())
}
