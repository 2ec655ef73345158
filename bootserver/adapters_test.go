package bootserver_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bettercompute/siteboot/assertion/assertiontest"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/imagecache"
	"github.com/bettercompute/siteboot/imagecache/imagecachetest"
	"github.com/bettercompute/siteboot/ipxe"
)

var (
	mac1    = hwid.MAC{0x52, 0x54, 0x00, 0x36, 0x01, 0x01}
	mac2    = hwid.MAC{0x52, 0x54, 0x00, 0x36, 0x01, 0x02}
	machine = netip.MustParseAddr("192.0.2.11")
	other   = netip.MustParseAddr("192.0.2.66")
	t0      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// held is a fence held at epoch 1.
type held struct{}

func (*held) Active() (uint64, bool) { return 1, true }

var active = &held{}

// openCache opens a cache on clk holding the images of bodies, pulled and pinned with
// their formats ("kernel", "iso", ...), and returns it with their images.
func openCache(t *testing.T, clk *clocktest.Fake, formats ...string) (*imagecache.Cache, []imagecache.Image) {
	t.Helper()
	o := imagecachetest.NewOrigin()
	t.Cleanup(o.Close)
	c, err := imagecache.Open(t.Context(), imagecache.Config{
		Dir: t.TempDir(), AllowedSourceNetworks: imagecachetest.Loopback, Fence: active, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var ims []imagecache.Image
	for _, f := range formats {
		ims = append(ims, o.Add([]byte("the "+f+" image"), f))
	}
	if err := c.SetPinned(ims); err != nil {
		t.Fatal(err)
	}
	for _, im := range ims {
		if err := c.Pull(t.Context(), im); err != nil {
			t.Fatal(err)
		}
	}
	return c, ims
}

// fetch GETs u (under base) from the cache's handler and returns the status and body.
func fetch(c *imagecache.Cache, base, u string) (int, string) {
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/cache"+strings.TrimPrefix(u, base), nil))
	return rec.Code, rec.Body.String()
}

// TestCacheGrantPerEntry: one boot grant per MAC and workflow, returned again while it lives;
// it serves until the entry's NotAfter, and an entry past it gets no grant.
func TestCacheGrantPerEntry(t *testing.T) {
	ctx := t.Context()
	clk := clocktest.New(t0)
	c, ims := openCache(t, clk, "kernel")
	const base = "http://192.0.2.1:8080/cache"
	bc := bootserver.Cache{Cache: c, BaseURL: base + "/"}
	e := ipxe.Entry{MAC: mac1, Workflow: "wf-1", NotAfter: t0.Add(time.Hour)}
	u, err := bc.CacheURL(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, base+"/t/") || !strings.HasSuffix(u, "/") || len(u) != len(base+"/t/")+imagecache.TokenLen+1 {
		t.Fatalf("CacheURL = %q, want %s/t/GRANT/", u, base)
	}
	for _, c := range []struct {
		e    ipxe.Entry
		same bool
	}{
		{e, true},
		{ipxe.Entry{MAC: mac1, Workflow: "wf-1", NotAfter: e.NotAfter, UUID: hwid.UUID{1}}, true}, // the key is MAC and workflow
		{ipxe.Entry{MAC: mac1, Workflow: "wf-2", NotAfter: e.NotAfter}, false},
		{ipxe.Entry{MAC: mac2, Workflow: "wf-1", NotAfter: e.NotAfter}, false},
	} {
		got, err := bc.CacheURL(ctx, c.e)
		if err != nil || (got == u) != c.same {
			t.Errorf("CacheURL(%s %s) = %q, %v; same grant as the first: %v, want %v", c.e.MAC, c.e.Workflow, got, err, got == u, c.same)
		}
	}
	if n := c.GrantCount(); n != 3 {
		t.Errorf("%d grants live, want 3 (one per MAC and workflow)", n)
	}
	kernel := u + ims[0].SHA256.String()
	if st, body := fetch(c, base, kernel); st != http.StatusOK || body != "the kernel image" {
		t.Fatalf("GET under the grant: %d %q", st, body)
	}
	clk.Advance(time.Hour)
	if st, _ := fetch(c, base, kernel); st != http.StatusNotFound {
		t.Errorf("GET under the grant at its NotAfter: %d, want 404", st)
	}
	if got, err := bc.CacheURL(ctx, e); !errors.Is(err, imagecache.ErrBadGrant) || got != "" {
		t.Errorf("CacheURL past the entry's NotAfter = %q, %v; want %v", got, err, imagecache.ErrBadGrant)
	}
}

// TestCacheBaseByFamily: the cache's URL under BaseURL6 for a request that came over IPv6.
func TestCacheBaseByFamily(t *testing.T) {
	c, _ := openCache(t, clocktest.New(t0))
	bc := bootserver.Cache{Cache: c, BaseURL: "http://192.0.2.1/cache", BaseURL6: "http://[2001:db8::1]/cache"}
	e := ipxe.Entry{MAC: mac1, Workflow: "wf-1"}
	for _, tc := range []struct {
		name  string
		local net.Addr
		want  string
	}{
		{"no connection", nil, bc.BaseURL},
		{"IPv4", &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 80}, bc.BaseURL},
		{"IPv4 on a dual-stack socket", net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[::ffff:192.0.2.1]:80")), bc.BaseURL},
		{"IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 80}, bc.BaseURL6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.local != nil {
				ctx = context.WithValue(ctx, http.LocalAddrContextKey, tc.local)
			}
			u, err := bc.CacheURL(ctx, e)
			if err != nil || !strings.HasPrefix(u, tc.want+"/t/") {
				t.Errorf("CacheURL = %q, %v; want under %s", u, err, tc.want)
			}
		})
	}
	if _, err := (bootserver.Cache{Cache: c}).CacheURL(t.Context(), e); !errors.Is(err, bootserver.ErrInvalid) {
		t.Errorf("CacheURL without a BaseURL: %v, want %v", err, bootserver.ErrInvalid)
	}
}

// TestCacheSanboot: an ISO is ready only when cached and pinned as "iso"; its sanboot URL
// names it under a grant of that one image, reused for the entry.
func TestCacheSanboot(t *testing.T) {
	ctx := t.Context()
	c, ims := openCache(t, clocktest.New(t0), "iso", "kernel")
	iso, kernel := ims[0].SHA256.String(), ims[1].SHA256.String()
	const base = "http://192.0.2.1/cache"
	bc := bootserver.Cache{Cache: c, BaseURL: base}
	for sha, want := range map[string]bool{iso: true, kernel: false, strings.Repeat("0", 64): false, "not a digest": false} {
		if got, err := bc.ISOReady(ctx, sha); got != want || err != nil {
			t.Errorf("ISOReady(%.12s) = %v, %v; want %v", sha, got, err, want)
		}
	}
	e := ipxe.Entry{MAC: mac1, Workflow: "wf-1", SanbootSHA256: iso, NotAfter: t0.Add(time.Hour)}
	u, err := bc.SanbootURL(ctx, e)
	if err != nil || !strings.HasPrefix(u, base+"/t/") || !strings.HasSuffix(u, "/"+iso) {
		t.Fatalf("SanbootURL = %q, %v", u, err)
	}
	if again, _ := bc.SanbootURL(ctx, e); again != u {
		t.Errorf("SanbootURL again = %q, want the same grant %q", again, u)
	}
	if st, body := fetch(c, base, u); st != http.StatusOK || body != "the iso image" {
		t.Errorf("GET the sanboot URL: %d %q", st, body)
	}
	if st, _ := fetch(c, base, strings.TrimSuffix(u, iso)+kernel); st != http.StatusNotFound {
		t.Errorf("GET another image under the sanboot grant: %d, want 404", st)
	}
}

// TestSigner: the claims of a script become an assertion the control plane verifies.
func TestSigner(t *testing.T) {
	p := assertiontest.New("site-a", "agent-a")
	cl := ipxe.Claims{MAC: mac1, IP: machine, UUID: hwid.UUID{0x4c, 15: 1}, Workflow: "wf-1", Epoch: 1, NotAfter: p.Clock.Now().Add(10 * time.Minute)}
	text, err := bootserver.Signer{Issuer: p.Issuer}.Sign(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	j := p.Join(mac1)
	j.UUID = cl.UUID
	a, err := p.Verifier.Verify(t.Context(), text, j)
	if err != nil {
		t.Fatal(err)
	}
	got := ipxe.Claims{MAC: a.MAC, IP: a.IP, UUID: a.UUID, Workflow: a.Workflow, Epoch: a.Epoch, NotAfter: a.NotAfter}
	if diff := cmp.Diff(cl, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("assertion (-claims +asserted):\n%s", diff)
	}
	if _, err := (bootserver.Signer{}).Sign(t.Context(), cl); !errors.Is(err, bootserver.ErrInvalid) {
		t.Errorf("Sign without an Issuer: %v", err)
	}
}

// claimFunc is a Claimer of a function.
type claimFunc func(string, hwid.MAC, netip.Addr) bootbind.Reason

func (f claimFunc) Claim(tok string, mac hwid.MAC, from netip.Addr) bootbind.Reason {
	return f(tok, mac, from)
}

// TestBind: the host's entry only for a request bound to its DHCP answer; anything else gets
// ipxe.ErrUnbound with bootbind's reason and no entry, and a machine the host does not know
// claims nothing.
func TestBind(t *testing.T) {
	ctx := t.Context()
	entry := ipxe.Entry{MAC: mac1, Workflow: "wf-1"}
	lookup := ipxe.EntriesFunc(func(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
		switch q.MAC {
		case mac1:
			return entry, true, nil
		case mac2:
			return ipxe.Entry{}, false, ipxe.ErrMismatch
		}
		return ipxe.Entry{}, false, nil
	})
	nonces := bootbind.NewNonces(bootbind.Config{Clock: clocktest.New(t0)})
	passes := bootbind.NewPasses(bootbind.Config{Clock: clocktest.New(t0)})
	v6 := netip.MustParseAddr("2001:db8::11")
	passes.Issue(mac1, v6)
	issue := func() string {
		n, err := nonces.Issue(mac1, bootbind.KindChain, machine)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const fresh = "fresh" // a nonce issued for the case
	var bound []ipxe.Query
	b := bootserver.Bind{
		Entries: lookup, Nonces: nonces, Passes: passes,
		Loaders: map[string]bootserver.Claimer{"grub": claimFunc(func(tok string, _ hwid.MAC, _ netip.Addr) bootbind.Reason {
			if tok == "key" {
				return bootbind.Bound
			}
			return bootbind.UnknownNonce
		})},
		OnBound: func(q ipxe.Query) { bound = append(bound, q) },
	}
	for _, c := range []struct {
		name    string
		q       ipxe.Query
		ok      bool
		err     error           // errors.Is
		reason  bootbind.Reason // bootbind's, when refused by it
		claimed bool            // a claim was counted
	}{
		{"bound", ipxe.Query{MAC: mac1, Nonce: fresh, Remote: machine}, true, nil, bootbind.Bound, true},
		{"no nonce", ipxe.Query{MAC: mac1, Remote: machine}, false, ipxe.ErrUnbound, bootbind.NoNonce, true},
		{"nonce from another address", ipxe.Query{MAC: mac1, Nonce: fresh, Remote: other}, false, ipxe.ErrUnbound, bootbind.OtherAddress, true},
		{"unknown nonce", ipxe.Query{MAC: mac1, Nonce: "guessed", Remote: machine}, false, ipxe.ErrUnbound, bootbind.UnknownNonce, true},
		{"unknown machine", ipxe.Query{MAC: hwid.MAC{2}, Remote: machine}, false, nil, bootbind.Bound, false},
		{"mismatch, from the lookup", ipxe.Query{MAC: mac2, Nonce: fresh, Remote: machine}, false, ipxe.ErrMismatch, bootbind.Bound, false},
		{"IPv6 pass", ipxe.Query{MAC: mac1, Remote: v6}, true, nil, bootbind.Bound, false},
		{"IPv6 without a pass", ipxe.Query{MAC: mac1, Remote: netip.MustParseAddr("2001:db8::66")}, false, ipxe.ErrUnbound, bootbind.NoNonce, true},
		{"loader bound by its claimer", ipxe.Query{MAC: mac1, Nonce: "key", Remote: machine, Loader: "grub"}, true, nil, bootbind.Bound, false},
		{"loader refused by its claimer", ipxe.Query{MAC: mac1, Nonce: fresh, Remote: machine, Loader: "grub"}, false, ipxe.ErrUnbound, bootbind.UnknownNonce, false},
		{"loader not listed", ipxe.Query{MAC: mac1, Nonce: fresh, Remote: machine, Loader: "shim"}, false, ipxe.ErrUnbound, bootbind.Bound, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.q.Nonce == fresh {
				c.q.Nonce = issue()
			}
			before, n := claims(nonces), len(bound)
			e, ok, err := b.Entry(ctx, c.q)
			if ok != c.ok || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("Entry = %v, %v; want %v, %v", ok, err, c.ok, c.err)
			}
			want := ipxe.Entry{}
			if c.ok {
				want = entry
			}
			if diff := cmp.Diff(want, e); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
			var r *bootbind.RefusedError
			if errors.As(err, &r) != (c.reason != bootbind.Bound) || (r != nil && r.Reason != c.reason) {
				t.Errorf("error %v, want bootbind's %v", err, c.reason)
			}
			if got := claims(nonces) != before; got != c.claimed {
				t.Errorf("a nonce claim counted: %v, want %v", got, c.claimed)
			}
			if got := len(bound) > n; got != c.ok {
				t.Errorf("OnBound called: %v, want %v", got, c.ok)
			}
		})
	}
	if _, _, err := (bootserver.Bind{Entries: lookup}).Entry(ctx, ipxe.Query{MAC: mac1}); !errors.Is(err, bootserver.ErrInvalid) {
		t.Errorf("Bind without Nonces: %v", err)
	}
}

// claims sums the claims nonces counted, bound or refused.
func claims(n *bootbind.Nonces) uint64 {
	s := n.Refused(bootbind.Bound)
	for _, r := range bootbind.Refusals() {
		s += n.Refused(r)
	}
	return s
}

// peerFS records the peer it was opened for.
type peerFS struct {
	fstest.MapFS
	peer netip.AddrPort
}

func (p *peerFS) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	p.peer = peer
	return p.Open(name)
}

// TestFS: builds at the root with their subdirectories, grants under t/, mounts under their
// directory (shadowing a builds directory of that name), a PeerFS mount asked with the peer.
func TestFS(t *testing.T) {
	grub := &peerFS{MapFS: fstest.MapFS{"grub.cfg": {Data: []byte("grub")}}}
	f := bootserver.FS{
		Builds: fstest.MapFS{"ipxe.efi": {Data: []byte("ipxe")}, "efi64/snp.efi": {Data: []byte("snp")},
			"grub/shadowed.cfg": {Data: []byte("shadowed")}},
		Grants: fstest.MapFS{"t/abc/def": {Data: []byte("granted")}},
		Mounts: map[string]fs.FS{"grub": grub, "shim": fstest.MapFS{"shimx64.efi": {Data: []byte("shim")}}},
	}
	peer := netip.MustParseAddrPort("192.0.2.11:1024")
	for name, want := range map[string]string{
		"ipxe.efi": "ipxe", "efi64/snp.efi": "snp", "t/abc/def": "granted", "grub/grub.cfg": "grub", "shim/shimx64.efi": "shim",
		"grub/shadowed.cfg": "",
		"grub.cfg":          "", "t/abc/other": "", "other/ipxe.efi": "", "../ipxe.efi": "", "/ipxe.efi": "",
	} {
		for _, open := range []func(string) (fs.File, error){f.Open, func(n string) (fs.File, error) { return f.OpenFrom(n, peer) }} {
			file, err := open(name)
			if want == "" {
				if err == nil {
					file.Close()
					t.Errorf("Open(%q) served a file", name)
				} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
					t.Errorf("Open(%q): %v", name, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("Open(%q): %v", name, err)
				continue
			}
			b, _ := io.ReadAll(file)
			file.Close()
			if string(b) != want {
				t.Errorf("Open(%q) read %q, want %q", name, b, want)
			}
		}
	}
	if grub.peer != peer {
		t.Errorf("the grub mount was opened for %v, want %v", grub.peer, peer)
	}
	if err := fstest.TestFS(bootserver.FS{Builds: fstest.MapFS{"ipxe.efi": {Data: []byte("x")}}}, "ipxe.efi"); err != nil {
		t.Error(err)
	}
}

// TestByFamily: a request that came over IPv6 goes to the IPv6 handler.
func TestByFamily(t *testing.T) {
	named := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, s) })
	}
	h := bootserver.ByFamily(named("v4"), named("v6"))
	for local, want := range map[string]string{"192.0.2.1:80": "v4", "[::ffff:192.0.2.1]:80": "v4", "[2001:db8::1]:80": "v6"} {
		r := httptest.NewRequest(http.MethodGet, "/boot/chain.ipxe", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(local))))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Body.String() != want {
			t.Errorf("a request to %s went to %s, want %s", local, rec.Body.String(), want)
		}
	}
	if bootserver.ByFamily(named("v4"), nil) == nil {
		t.Error("ByFamily(v4, nil) is nil")
	}
}
