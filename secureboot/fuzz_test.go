package secureboot_test

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/secureboot"
	"github.com/bettercompute/siteboot/tftpd"
)

var nameSeeds = []string{
	"grub/grub.cfg", "grub/x86_64-efi/grub.cfg", "sb/shimx64.efi", "sb/grubx64.efi",
	"sb/0123456789abcdef0123456789abcdef/shimx64.efi", "sb/key?mac=52:54:00:12:34:56",
	"sb/key?mac=52:54:00:12:34:56&mac=x", "sb/key?%zz", "sb/key?mac=52-54-00-12-34-56&x=1",
	"boot/grub.cfg?mac=52:54:00:12:34:56&uuid=4c4c4544-0031-3510-8052-b4c04f4e4b33&n=0123456789abcdef0123456789abcdef",
	"boot/grub.cfg?", "boot/grub.cfg?mac=", "cache/t/x/" + strings.Repeat("0", 64), "cache/t/../../etc/passwd",
	"ipxe.efi", "sb/", "sb//x", "\\sb\\key?mac=1", "/sb/key?mac=52-54-00-12-34-56", "sb/a b/shimx64.efi",
}

// FuzzNames puts arbitrary TFTP names, as a client sends them, through the chain's file
// system and tftpd's reports of them: no name panics, an open either gives a file or fails
// with fs.ErrNotExist or fs.ErrInvalid, and no report activates a key or binds a nonce that
// was never handed out; the Decider is never asked for a name that presents no key.
func FuzzNames(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s, uint8(0))
	}
	h := newHarness(f, fakeSh, fakeGr)
	outcomes := []tftpd.Outcome{tftpd.OutcomeOK, tftpd.OutcomeNotFound, tftpd.OutcomeAborted, tftpd.OutcomeTimeout}
	f.Fuzz(func(t *testing.T, name string, o uint8) {
		if file, err := h.chain.OpenFrom(name, netip.MustParseAddrPort("127.0.0.1:1024")); err == nil {
			if st, err := file.Stat(); err != nil {
				t.Errorf("%q: stat: %v", name, err)
			} else if _, err := io.Copy(io.Discard, file); err != nil && !st.IsDir() {
				t.Errorf("%q: read: %v", name, err)
			}
			file.Close()
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%q: %v", name, err)
		}
		h.chain.OnTransfer(tftpd.Transfer{Requested: name, File: name, Peer: netip.MustParseAddrPort("192.0.2.100:1024"), Outcome: outcomes[o%4]})
		if n := h.chain.Stats().Keys.Activated; n != 0 {
			t.Fatalf("%q: a report activated %d keys", name, n)
		}
		if h.nonces.FetchedAny(hwid.MAC{0x52, 0x54, 0, 0x12, 0x34, 0x56}, bootbind.KindShim) {
			t.Fatalf("%q: a nonce never handed out is bound", name)
		}
		if n := len(h.d.asked()); n != 0 {
			t.Fatalf("%q: the Decider was asked without a key", name)
		}
	})
}

// FuzzParseName: what ParseName reads, written back in the chain's own spelling, reads the
// same; a name it refuses is refused as not served or invalid.
func FuzzParseName(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, err := secureboot.ParseName(name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("%q: %v", name, err)
			}
			return
		}
		var again string
		switch n.Kind {
		case secureboot.NameChain:
			return
		case secureboot.NameKey:
			again = "sb/key?mac=" + n.MAC.String()
		case secureboot.NameLoader:
			again = "sb/" + n.File
			if n.Nonce != "" {
				again = "sb/" + n.Nonce + "/" + n.File
			}
		case secureboot.NameConfig:
			again = "boot/grub.cfg?" + n.Query
		case secureboot.NameCache:
			again = secureboot.DefaultTFTPCacheDir + "/" + n.File
		case secureboot.NameRoot:
			again = n.File
		}
		m, err := secureboot.ParseName(again)
		if err != nil || m != n {
			t.Fatalf("%q reads %+v; written back as %q it reads %+v, %v", name, n, again, m, err)
		}
	})
}

// FuzzServeHTTP puts arbitrary methods, paths and queries through the chain's HTTP handler:
// no panic; with no nonce and no key handed out, every answer is 404 or 405 with no secret,
// or (a configuration query that does not parse) the exit configuration, and the Decider
// is never asked.
func FuzzServeHTTP(f *testing.F) {
	for _, s := range []string{
		"/sb/0123456789abcdef0123456789abcdef/boot.img", "/sb/x/boot.img", "/sb/", "/boot/grub.cfg",
		"/boot/grub.cfg?mac=52:54:00:12:34:56&n=0123456789abcdef0123456789abcdef", "/boot/grub.cfg?mac=%zz",
	} {
		f.Add("GET", s)
	}
	f.Add("HEAD", "/sb/x/boot.img")
	f.Add("POST", "/boot/grub.cfg?mac=52:54:00:12:34:56")
	h := newHarness(f, fakeSh, fakeGr)
	f.Fuzz(func(t *testing.T, method, target string) {
		r, err := http.NewRequest(method, "http://127.0.0.1"+target, nil)
		if err != nil || r.URL.Host != "127.0.0.1" {
			return
		}
		r.RemoteAddr = "127.0.0.1:40000"
		w := httptest.NewRecorder()
		h.chain.ServeHTTP(w, r)
		switch {
		case w.Code == http.StatusNotFound, w.Code == http.StatusMethodNotAllowed:
		case w.Code == http.StatusOK && r.URL.Path == secureboot.PathConfig && strings.HasSuffix(w.Body.String(), "\nexit 1\n"):
		default:
			t.Fatalf("%s %q: status %d\n%s", method, target, w.Code, w.Body)
		}
		if hasSecret(w.Body.String()) || len(h.d.asked()) != 0 {
			t.Fatalf("%s %q: a secret, or the Decider asked", method, target)
		}
	})
}

// FuzzTFTPCacheURL: a URL TFTPCacheURL accepts becomes a TFTP name the chain serves from
// the cache (NameCache), with the same grant and digest; any other is ErrNotCache.
func FuzzTFTPCacheURL(f *testing.F) {
	f.Add("http://192.0.2.1/cache/t/" + grant + "/" + kernel)
	f.Add("http://192.0.2.1/cache/t/a/b/c")
	f.Add("http://192.0.2.1/cache/t/../x")
	f.Add("http://192.0.2.1/cache/t/a/b?c")
	f.Fuzz(func(t *testing.T, u string) {
		got, err := secureboot.TFTPCacheURL(u, "tftp://192.0.2.1/cache", "http://192.0.2.1/cache")
		if err != nil {
			if !errors.Is(err, secureboot.ErrNotCache) {
				t.Fatalf("%q: %v", u, err)
			}
			return
		}
		name, ok := strings.CutPrefix(got, "tftp://192.0.2.1/")
		if !ok {
			t.Fatalf("%q became %q", u, got)
		}
		n, err := secureboot.ParseName(name)
		if err != nil || n.Kind != secureboot.NameCache || "http://192.0.2.1/cache/"+n.File != u {
			t.Fatalf("%q became %q, which reads %+v, %v", u, got, n, err)
		}
	})
}
