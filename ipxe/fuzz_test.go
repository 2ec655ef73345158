package ipxe_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

// FuzzRender puts arbitrary values in every field of every script kind. For any input the
// renderer either refuses with a *ValueError, or the script has exactly the commands
// expected and every argument (and every kernel parameter, as Linux splits them) is exactly
// what was given.
func FuzzRender(f *testing.F) {
	corpus := loadCorpus(f)
	for i, v := range corpus {
		f.Add(v, corpus[(i+1)%len(corpus)], "bc.token", "console=ttyS0", uint8(i%4))
	}
	f.Add("http://192.0.2.1/vmlinuz", "/initrd.img", "bc.x", "quiet", uint8(2))
	f.Fuzz(func(t *testing.T, url, value, name, token string, attempts uint8) {
		retry := ipxe.Retry{Attempts: int(attempts % 5)}
		cases := []struct {
			r  renderer
			sh func() shape
		}{}
		add := func(r renderer, sh func() shape) {
			cases = append(cases, struct {
				r  renderer
				sh func() shape
			}{r, sh})
		}
		b := ipxe.Boot{
			Kernel:  url,
			Initrds: []string{"/initrd.img", value},
			Params:  []ipxe.Param{{Name: name, Value: value}, {Name: "bc.assertion", Value: token}},
			Cmdline: []string{token, "quiet"},
			Retry:   retry,
			Again:   value,
		}
		add(b, func() shape { return bootShape(b) })
		b2 := ipxe.Boot{Kernel: "/vmlinuz", Params: []ipxe.Param{{Name: "bc.token", Value: value}}, Cmdline: []string{token}, Retry: retry}
		add(b2, func() shape { return bootShape(b2) })
		s := ipxe.Sanboot{URL: url, Again: value, Retry: retry}
		add(s, func() shape { return sanbootShape(s) })
		c := ipxe.Chain{URL: url, Interface: name, VLAN: int(attempts) * 17, Retry: retry}
		add(c, func() shape { return chainShape(c) })
		w := ipxe.Wait{URL: value}
		add(w, func() shape { return waitShape(w) })
		for _, tc := range cases {
			script, err := tc.r.Render()
			if err != nil {
				var ve *ipxe.ValueError
				if !errors.As(err, &ve) || !(errors.Is(err, ipxe.ErrUnsafe) || errors.Is(err, ipxe.ErrInvalid)) {
					t.Fatalf("%T: error %v is not a *ValueError", tc.r, err)
				}
				continue
			}
			if err := tc.sh().check(script); err != nil {
				t.Fatalf("%T rendered a script that is not as given: %v\n%s", tc.r, err, script)
			}
		}
	})
}

// FuzzQuery feeds arbitrary query strings to ParseQuery and to the handler. A query either
// is refused (400, a *QueryError) or parses to values that encode and parse back to the
// same; and whatever the handler answers is a script of the expected shape.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"mac=52:54:00:12:34:56", "mac=52:54:00:12:34:56&uuid=4c4c4544-0031-1020-8030-b1c04f504e32&ip=192.0.2.5",
		"mac=52%3A54%3A00%3A12%3A34%3A56&uuid=&ip=", "mac=52-54-00-12-34-57&ip=2001:db8::1",
		"mac=52:54:00:12:34:56&ip=::ffff:192.0.2.1", "mac=52:54:00:12:34:56&ip=fe80::1%25eth0",
		"mac=52:54:00:12:34:56&mac=52:54:00:12:34:56", "mac=52:54:00:12:34:56;ip=1.2.3.4",
		"uuid=${uuid}&mac=${net0/mac}", "mac=52:54:00:12:34:56%0Areboot", "%zz", "",
		// What the chain script sends (Debian's iPXE in QEMU), and near misses.
		"mac=52-54-00-5b-00-03&uuid=4c4c4544-0031-1020-8030-b1c04f504e34&ip=10.0.2.15&platform=pcbios&buildarch=i386",
		"mac=52-54-00-12-34-56&uuid=&ip=&platform=efi&buildarch=x86_64", "mac=52:54:00:12:34:56&platform=efi&buildarch=arm64",
		"mac=52:54:00:12:34:56&platform=efi&buildarch=mips", "mac=52:54:00:12:34:56&platform=EFI",
		"mac=52:54:00:12:34:56&platform=efi%20boot", "mac=52:54:00:12:34:56&platform=efi&platform=pcbios",
		// The boot nonce the chain URL carries, and near misses.
		"mac=52-54-00-12-34-56&uuid=&ip=192.0.2.1&platform=efi&buildarch=x86_64&n=0123456789abcdef0123456789abcdef",
		"mac=52:54:00:12:34:56&n=", "mac=52:54:00:12:34:56&n=a&n=b", "mac=52:54:00:12:34:56&n=%24%7Bnet0/mac%7D",
		"mac=52:54:00:12:34:56&n=" + strings.Repeat("x", 65), "mac=52:54:00:12:34:56&n=a%0Aexit",
	} {
		f.Add(s)
	}
	host := newFakeHost()
	host.entries[mac2] = ipxe.Entry{MAC: mac2, Workflow: "wf_iso", SanbootSHA256: isoA}
	host.ready[isoA] = true
	h, err := ipxe.NewHandler(host.config())
	if err != nil {
		f.Fatal(err)
	}
	remote := netip.MustParseAddr("192.0.2.1") // httptest.NewRequest's RemoteAddr
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := ipxe.ParseQuery(raw)
		if err != nil {
			var qe *ipxe.QueryError
			if !errors.As(err, &qe) || !errors.Is(err, ipxe.ErrBadQuery) {
				t.Fatalf("error %v is not a *QueryError", err)
			}
		} else {
			if q.MAC == (hwid.MAC{}) {
				t.Fatal("parsed without a MAC")
			}
			again, err := ipxe.ParseQuery(q.Encode())
			if err != nil || again != q {
				t.Fatalf("%q -> %+v -> %q -> %+v, %v", raw, q, q.Encode(), again, err)
			}
		}

		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, ipxe.PathBoot, nil)
		req.URL.RawQuery = raw // as the server would have it, whatever the bytes
		req.RequestURI = ipxe.PathBoot + "?" + raw
		h.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if _, err := parseIPXE(body); err != nil {
			t.Fatalf("status %d: answer is not a clean script: %v\n%s", rec.Code, err, body)
		}
		switch {
		case rec.Code == http.StatusRequestHeaderFieldsTooLarge:
			if len(req.RequestURI) < ipxe.MaxHeaderBytes-64 {
				t.Fatalf("431 for a %d-byte request URI", len(req.RequestURI))
			}
		case err != nil:
			if rec.Code != http.StatusOK || !isExit(body) {
				t.Fatalf("refused query answered %d\n%s", rec.Code, body)
			}
		case (q.MAC == mac1 || q.MAC == mac2) && q.IP.IsValid() && q.IP != remote:
			// The assertion's IP is the connection's; a query that says otherwise gets no secret.
			if !isExit(body) || strings.Contains(string(body), ipxe.ParamToken) {
				t.Fatalf("query IP %s from %s answered %d\n%s", q.IP, remote, rec.Code, body)
			}
		case q.MAC == mac1 && q.UUID != (hwid.UUID{}) && !q.UUID.IsPlaceholder() && !hwid.SameMachine(q.UUID, uuid1):
			if !isExit(body) || strings.Contains(string(body), ipxe.ParamToken) {
				t.Fatalf("query UUID %s, entry's %s, answered %d\n%s", q.UUID, uuid1, rec.Code, body)
			}
		case q.MAC == mac1:
			if rec.Code != http.StatusOK {
				t.Fatalf("known MAC answered %d", rec.Code)
			}
			args := kernelLine(t, body)
			if len(args) != 8 || args[3] != ipxe.ParamToken+"=bcjt_01k5w.c2VjcmV0-wf_1" {
				t.Fatalf("kernel line %q", args)
			}
			// The assertion states what the server knows: the entry's UUID, the
			// connection's address.
			c := decodeClaims(t, args)
			if c.MAC != mac1 || c.IP != remote || c.UUID != uuid1 || c.Epoch != 7 {
				t.Fatalf("claims %+v for query %+v", c, q)
			}
		case q.MAC == mac2:
			if rec.Code != http.StatusOK || !strings.Contains(string(body), "sanboot --no-describe ") {
				t.Fatalf("sanboot MAC answered %d\n%s", rec.Code, body)
			}
		default:
			if rec.Code != http.StatusOK || !isExit(body) {
				t.Fatalf("unknown MAC answered %d\n%s", rec.Code, body)
			}
		}
	})
}

// isExit reports whether body is the exit script.
func isExit(body []byte) bool {
	want, err := ipxe.Exit{}.Render()
	return err == nil && string(body) == string(want)
}
