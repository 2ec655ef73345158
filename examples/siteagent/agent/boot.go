package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/sitelink"
)

// bootHandler is the /boot/ handler: the chain and machine scripts, and the iPXE builds for
// UEFI HTTP boot. It asks the agent's other parts through ipxe's small interfaces.
func (a *Agent) bootHandler() (http.Handler, error) {
	b := a.cfg.Boot
	cfg := ipxe.Config{
		Entries: ipxe.EntriesFunc(a.ipxeEntry),
		Fence:   ipxe.FenceFunc(a.fence.Active),
		Tokens:  ipxe.TokensFunc(a.token),
		Signer:  ipxe.SignerFunc(a.sign),
		Cache:   bootCache{a},
		// The site's ramdisk comes from the cache, under the same boot grant as bc.cache.
		Kernel:  ipxe.CacheImage(b.Kernel.SHA256),
		Initrds: []string{ipxe.CacheImage(b.Initrd.SHA256)},
		Params:  a.params(),
		Cmdline: b.Cmdline,
		BaseURL: a.httpBase,
		// Anyone can fetch a URL: with proxy DHCP running, the discovery list counts a
		// script fetch only for a MAC proxy DHCP already showed (discovery.Config.DHCPFirst,
		// the one place that rule is kept).
		OnDiscovered: func(d ipxe.Discovery) {
			a.found.Seen(discovery.Sighting{MAC: d.MAC, UUID: d.UUID, Arch: d.Arch, HasArch: d.HasArch, Via: discovery.ViaHTTP})
		},
		Clock:  a.clock,
		Logger: a.log.With("component", "ipxe"),
	}
	if b.TFTPRoot != "" {
		root, err := os.OpenRoot(b.TFTPRoot)
		if err != nil {
			return nil, err
		}
		cfg.Files = root.FS()
	}
	// The signed chain's GRUB asks the IPv4 handler only (its network is IPv4).
	v4 := cfg
	if a.sb != nil {
		v4.Loaders = []ipxe.Loader{a.sb.loader()}
	}
	h, err := ipxe.NewHandler(v4)
	if err != nil {
		return nil, err
	}
	a.boot = h
	return a.bootByFamily(cfg, h)
}

// params are the site's bc.* parameters, in a stable order.
func (a *Agent) params() []ipxe.Param {
	names := make([]string, 0, len(a.cfg.Boot.Params))
	for k := range a.cfg.Boot.Params {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]ipxe.Param, 0, len(names))
	for _, k := range names {
		out = append(out, ipxe.Param{Name: "bc." + k, Value: a.cfg.Boot.Params[k]})
	}
	return out
}

// ipxeEntry is /boot/ipxe's decision (I4, S3, S1): the live entry of the machine asking,
// when the machine is the one it names and, with proxy DHCP, the request is bound to this
// agent's DHCP answer to it (its boot nonce, from the address that presented it first; for
// the signed GRUB, its boot key, see secureboot.go).
// The entry's record travels as the ipxe.Entry's Ref, so the token and the grants need no
// second lookup.
func (a *Agent) ipxeEntry(ctx context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
	a.silent.asked(q.MAC)
	r, ok := a.entries.LookupParsed(q.MAC)
	if !ok {
		return ipxe.Entry{}, false, nil
	}
	if m := r.Match(q.Arch, q.HasArch, q.UUID); m != sitelink.NoMismatch {
		a.mismatches.http[m].Add(1)
		return ipxe.Entry{}, false, fmt.Errorf("%w: %s (entry arch %s)", ipxe.ErrMismatch, m, r.Arch)
	}
	bind := a.bindScript
	if q.Loader == loaderGRUB {
		bind = a.bindGRUB
	}
	if err := bind(q); err != nil {
		return ipxe.Entry{}, false, err
	}
	return ipxe.Entry{
		MAC: r.MAC, UUID: r.MachineUUID(), Workflow: r.Workflow, NotAfter: r.NotAfter,
		SanbootSHA256: r.SanbootSHA256, Ref: r,
	}, true, nil
}

// token fetches the machine's discovery token from the control plane; the handler asks once
// per entry and keeps the answer.
func (a *Agent) token(ctx context.Context, e ipxe.Entry) (string, error) {
	r, ok := e.Ref.(record)
	if !ok || r.TokenRef == "" {
		return "", ipxe.ErrNotReady
	}
	t, err := a.link.Token(ctx, sitelink.TokenRequest{Node: a.cfg.NodeID, Workflow: r.Workflow, Ref: r.TokenRef})
	if errors.Is(err, sitelink.ErrNotReady) {
		return "", ipxe.ErrNotReady
	}
	return t, err
}

// sign issues the discovery assertion for one script (I7).
func (a *Agent) sign(ctx context.Context, c ipxe.Claims) (string, error) {
	return a.issuer.Issue(ctx, assertion.Fields{
		Epoch: c.Epoch, MAC: c.MAC, IP: c.IP, UUID: c.UUID, Workflow: c.Workflow, NotAfter: c.NotAfter,
	})
}

// bootCache mints the cache grants scripts carry.
type bootCache struct{ a *Agent }

func (c bootCache) CacheURL(ctx context.Context, e ipxe.Entry) (string, error) {
	// One grant per entry, reused by every script of that boot: a machine asking again
	// cannot fill the grant table.
	g, err := c.a.cache.BootGrantFor(grantKey(e.MAC, e.Workflow), e.NotAfter)
	if err != nil {
		return "", err
	}
	// The ramdisk appends a digest: BASE/t/GRANT/SHA256.
	return c.a.cacheBaseFor(ctx) + "/t/" + g.Token + "/", nil
}

func (c bootCache) ISOReady(ctx context.Context, sha string) (bool, error) {
	d, err := imagecache.ParseDigest(sha)
	if err != nil {
		return false, nil
	}
	if _, ok := c.a.cache.Lookup(d); !ok {
		return false, nil
	}
	// Only an ISO the control plane still names (pins) as one.
	return slices.ContainsFunc(c.a.cache.Status(), func(s imagecache.Status) bool {
		return s.Image.SHA256 == d && s.Image.Format == "iso" && s.State == imagecache.StateReady
	}), nil
}

func (c bootCache) SanbootURL(ctx context.Context, e ipxe.Entry) (string, error) {
	d, err := imagecache.ParseDigest(e.SanbootSHA256)
	if err != nil {
		return "", err
	}
	g, err := c.a.cache.SanbootGrantFor(grantKey(e.MAC, e.Workflow), d, e.NotAfter)
	if err != nil {
		return "", err
	}
	return c.a.cacheBaseFor(ctx) + "/t/" + g.Token + "/" + d.String(), nil
}

// grantKey names the cache grant of one boot entry.
func grantKey(mac hwid.MAC, workflow string) string { return mac.String() + "/" + workflow }

// cacheBase is the URL machines reach the image cache at.
func (a *Agent) cacheBase() string {
	if a.cfg.Boot.CacheURL != "" {
		return strings.TrimSuffix(a.cfg.Boot.CacheURL, "/")
	}
	return a.httpBase + "/cache"
}
