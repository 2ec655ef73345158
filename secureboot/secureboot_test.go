package secureboot_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/secureboot"
)

// getFrom asks the chain's HTTP handler as a client at from.
func (h *harness) getFrom(from, method, target string) (int, string) {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = netip.AddrPortFrom(netip.MustParseAddr(from), 40000).String()
	w := httptest.NewRecorder()
	h.chain.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestPXE (S1 on the signed chain): the 4011 answer names shim under a boot nonce; the
// first address that fetches under the nonce is the machine; its key file gives it a boot
// key that only that address's transfer activates; the machine's configuration, for that
// key, is the Decider's answer in GRUB's words, with the kernel and initrd over TFTP from
// the cache under the entry's grant. Another address asking the key file, a guessed key, no
// key, and the key over HTTP or over TFTP from another address get no configuration and
// never reach the Decider; each is counted.
func TestPXE(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	h.serveTFTP(t)
	m := mac.String()

	if f := h.dhcp(t, proxydhcp.KindPXE, proxydhcp.PortDHCP); f != "sb/shimx64.efi" {
		t.Errorf("answer on 67: %q, want sb/shimx64.efi", f)
	}
	file := h.dhcp(t, proxydhcp.KindPXE, proxydhcp.PortBoot)
	nonce, ok := strings.CutSuffix(strings.TrimPrefix(file, "sb/"), "/shimx64.efi")
	if !ok || len(nonce) != 32 {
		t.Fatalf("4011 answer names %q, want sb/NONCE/shimx64.efi", file)
	}
	if b, err := h.tftpGet(t, "127.0.0.1", "sb/0123456789abcdef0123456789abcdef/shimx64.efi"); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("shim under a nonce never handed out: %d bytes, %v", len(b), err)
	}
	if _, err := h.tftpGet(t, "127.0.0.1", "sb/key?mac="+m); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("key file before shim was fetched: %v", err)
	}
	if got, err := h.tftpGet(t, "127.0.0.1", file); err != nil || !bytes.Equal(got, fakeSh) {
		t.Fatalf("%s: %q, %v; want shim as it lies on disk", file, got, err)
	}
	waitFor(t, "the nonce bound to its fetcher", func() bool { return h.chain.Stats().NonceFetches == 1 })
	for name, want := range map[string][]byte{"sb/grubx64.efi": fakeGr, "sb/shimx64.efi": fakeSh, "ipxe.efi": []byte("MZ ipxe")} {
		if got, err := h.tftpGet(t, "127.0.0.1", name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"sb/revocations_sbat.efi", "sb/" + nonce + "/grubx64.efi/x", "boot/grub.cfg"} {
		if _, err := h.tftpGet(t, "127.0.0.1", name); !errors.Is(err, errTFTPNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	// The shim nonce from another address: not the machine, counted.
	if _, err := h.tftpGet(t, "127.0.0.2", file); err != nil {
		t.Fatal(err) // shim is public; the nonce stays its owner's
	}
	waitFor(t, "the other address counted", func() bool { return h.chain.Stats().OtherAddress == 1 })

	// Another host asks the machine's key file: it gets a key, which is never activated.
	other, err := h.tftpGet(t, "127.0.0.2", "sb/key?mac="+m)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other host's key dropped", func() bool { return h.chain.Stats().Keys.Dropped == 1 })
	b, err := h.tftpGet(t, "127.0.0.1", "sb/key?mac="+m)
	if err != nil {
		t.Fatal(err)
	}
	k := keyRE.FindStringSubmatch(string(b))
	if k == nil {
		t.Fatalf("key file:\n%s", b)
	}
	key := k[1]
	waitFor(t, "the machine's key activated", func() bool { return h.chain.Stats().Keys.Activated == 1 })

	for _, c := range []struct{ from, query string }{
		{"127.0.0.1", "mac=" + m},
		{"127.0.0.1", "mac=" + m + "&n=" + keyRE.FindStringSubmatch(string(other))[1]},
		{"127.0.0.1", "mac=" + m + "&n=0123456789abcdef0123456789abcdef"},
		{"127.0.0.2", "mac=" + m + "&n=" + key}, // tftpd tells the chain who asks (tftpd.PeerFS)
		{"127.0.0.1", "mac=52:54:00:5b:00:32&n=" + key},
	} {
		if body, err := h.tftpGet(t, c.from, "boot/grub.cfg?"+c.query); !errors.Is(err, errTFTPNotFound) || hasSecret(string(body)) {
			t.Errorf("%s from %s: %v\n%s", c.query, c.from, err, body)
		}
	}
	// A query no Chain sends (two keys) is given up on: the exit configuration, as a
	// decision's give-up, with nothing claimed or decided.
	if body, err := h.tftpGet(t, "127.0.0.1", "boot/grub.cfg?mac="+m+"&n="+key+"&n="+key); err != nil ||
		!strings.HasSuffix(string(body), "\nexit 1\n") || hasSecret(string(body)) {
		t.Errorf("a query with two keys: %v\n%s", err, body)
	}
	if st, body := h.getFrom("127.0.0.2", http.MethodGet, "/boot/grub.cfg?mac="+m+"&n="+key); st != http.StatusNotFound || hasSecret(body) {
		t.Errorf("the key over HTTP from another address: status %d\n%s", st, body)
	}
	want := secureboot.UnboundCounts{NoKey: 1, UnknownKey: 2, OtherAddress: 2, OtherMAC: 1}
	if diff := cmp.Diff(want, h.chain.Stats().Unbound); diff != "" || len(h.d.asked()) != 0 {
		t.Errorf("refusals (-want +got):\n%s\nthe Decider was asked %d times", diff, len(h.d.asked()))
	}

	cfg, err := h.tftpGet(t, "127.0.0.1", "boot/grub.cfg?mac="+m+"&n="+key)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"linux '(tftp,127.0.0.1)/cache/t/" + grant + "/" + kernel + "'", "initrd '(tftp,127.0.0.1)/cache/t/" + grant + "/" + initrd + "'",
		"'bc.token=TOKEN'", "'bc.assertion=ASSERTION'",
	} {
		if !strings.Contains(string(cfg), w) {
			t.Errorf("the machine's configuration lacks %q:\n%s", w, cfg)
		}
	}
	if q := h.d.asked(); len(q) != 1 || q[0].Remote != netip.MustParseAddr("127.0.0.1") || q[0].Loader != secureboot.LoaderName ||
		q[0].MAC != mac || q[0].Nonce != key {
		t.Errorf("the Decider was asked %+v", q)
	}
	for sha, want := range map[string]string{kernel: "the kernel", initrd: "the initrd"} {
		if b, err := h.tftpGet(t, "127.0.0.1", "cache/t/"+grant+"/"+sha); err != nil || string(b) != want {
			t.Errorf("cache image %s over TFTP: %q, %v", sha[:8], b, err)
		}
	}
	if st, body := h.getFrom("127.0.0.1", http.MethodGet, "/boot/grub.cfg?mac="+m+"&n="+key); st != http.StatusOK || !hasSecret(body) {
		t.Errorf("the key over HTTP from the machine's address: status %d\n%s", st, body)
	}
	if st := h.chain.Stats(); st.Boots != 2 || st.AnswersPXE != 2 {
		t.Errorf("boots %d, PXE answers %d; want 2, 2", st.Boots, st.AnswersPXE)
	}
}

// TestHTTPBoot: UEFI HTTP boot is named a RAM disk under a nonce; HEAD tells the size and
// mints nothing; the GET from the first address gets the image with a fresh key for the
// machine, active for that address at once; another address fetching the same nonce gets
// 404; the key opens the machine's configuration for the address that fetched the image.
func TestHTTPBoot(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	h.serveTFTP(t)
	url := h.dhcp(t, proxydhcp.KindHTTP, proxydhcp.PortDHCP)
	path, ok := strings.CutPrefix(url, "http://127.0.0.1:8080")
	if !ok || !strings.HasPrefix(path, "/sb/") || !strings.HasSuffix(path, "/boot.img") {
		t.Fatalf("HTTP boot answer names %q", url)
	}
	if st, _ := h.getFrom("127.0.0.1", http.MethodHead, path); st != http.StatusOK || h.chain.Stats().Keys.Issued != 0 {
		t.Fatalf("HEAD: status %d, %d keys", st, h.chain.Stats().Keys.Issued)
	}
	if st, _ := h.getFrom("127.0.0.1", http.MethodPost, path); st != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d", st)
	}
	if st, _ := h.getFrom("127.0.0.1", http.MethodGet, "/sb/0123456789abcdef0123456789abcdef/boot.img"); st != http.StatusNotFound {
		t.Errorf("a nonce never handed out: status %d", st)
	}
	st, img := h.getFrom("127.0.0.1", http.MethodGet, path)
	if st != http.StatusOK {
		t.Fatalf("GET: status %d", st)
	}
	if st, body := h.getFrom("127.0.0.2", http.MethodGet, path); st != http.StatusNotFound || len(body) > 100 {
		t.Errorf("the RAM disk from another address: status %d, %d bytes", st, len(body))
	}
	if !bytes.Contains([]byte(img), fakeSh) || !bytes.Contains([]byte(img), fakeGr) {
		t.Error("the image lacks shim or GRUB")
	}
	key := regexpKey.FindStringSubmatch(img)
	if key == nil || !strings.Contains(img, "net_bootp\n") || !strings.Contains(img, "?mac="+mac.String()+"&") {
		t.Fatalf("no configuration with a key in the image")
	}
	body, err := h.tftpGet(t, "127.0.0.1", "boot/grub.cfg?mac="+mac.String()+"&n="+key[1])
	if err != nil || !hasSecret(string(body)) {
		t.Fatalf("the machine's configuration with the image's key: %v\n%s", err, body)
	}
	if body, err := h.tftpGet(t, "127.0.0.2", "boot/grub.cfg?mac="+mac.String()+"&n="+key[1]); !errors.Is(err, errTFTPNotFound) {
		t.Errorf("the image's key from another address: %v\n%s", err, body)
	}
	if st := h.chain.Stats(); st.Images != 1 || st.OtherAddress != 1 || st.AnswersHTTP != 1 || st.Keys.Activated != 1 {
		t.Errorf("images %d, other address %d, answers %d, keys activated %d", st.Images, st.OtherAddress, st.AnswersHTTP, st.Keys.Activated)
	}
}

// TestAnswerDHCPRefusals: a machine the chain cannot boot gets silence, counted by reason.
func TestAnswerDHCPRefusals(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	base := proxydhcp.Request{MAC: mac, Kind: proxydhcp.KindPXE, Arch: hwid.ArchX86_64EFI, Port: proxydhcp.PortBoot,
		Source: netip.MustParseAddrPort("127.0.0.1:68"), Server: server}
	v6, bios, arm, v6srv := base, base, base, base
	v6.IPv6 = true
	bios.Arch = hwid.ArchBIOS
	arm.Arch = hwid.ArchARM64EFI
	v6srv.Server = netip.MustParseAddr("2001:db8::1")
	for _, req := range []proxydhcp.Request{v6, bios, arm, v6srv} {
		if d := h.chain.AnswerDHCP(&req); d.Answer || d.Reason != proxydhcp.ReasonDeclined {
			t.Errorf("%+v: %+v, want silence", req, d)
		}
	}
	st := h.chain.Stats()
	if st.RefusedIPv6 != 2 || st.RefusedArch != 2 || h.nonces.Issued() != 0 {
		t.Errorf("refused ipv6 %d, arch %d; %d nonces issued", st.RefusedIPv6, st.RefusedArch, h.nonces.Issued())
	}
}

// TestDecisions: each kind of decision in GRUB's words. Fenced and waiting configurations
// are sent (200), with the delay and, for the wait, the machine's own configuration URL
// again; "no", local boot and the fenced one after its wait boot the local disk (the ESP's
// own configuration, else its loader through shim, exit only without a disk), never
// reboot; a decision GRUB cannot carry out makes the machine wait, counted.
func TestDecisions(t *testing.T) {
	keys := bootbind.NewKeys(bootbind.Config{})
	h := newHarness(t, fakeSh, fakeGr, func(c *secureboot.Config) { c.Keys = keys })
	from := netip.MustParseAddrPort("192.0.2.10:1024")
	key, err := keys.Issue(mac, from.Addr())
	if err != nil {
		t.Fatal(err)
	}
	name := "boot/grub.cfg?mac=" + mac.String() + "&uuid=4c4c4544-0031-3510-8052-b4c04f4e4b33&n=" + key
	again := "configfile '(tftp,127.0.0.1)/boot/grub.cfg?mac=" + mac.String() + "&uuid=4c4c4544-0031-3510-8052-b4c04f4e4b33&n=" + key + "'"
	disk := []string{"if search --no-floppy --file --set=root '/EFI/debian/grub.cfg'; then\n\tconfigfile '/EFI/debian/grub.cfg'\nfi\n",
		"if search --no-floppy --file --set=root '/EFI/BOOT/BOOTX64.EFI'; then\n\tif test \"$root\" != \"$siteboot_self\"; then\n\t\tchainloader '/EFI/BOOT/BOOTX64.EFI'\n\t\tboot\n\tfi\nfi\n",
		"\nexit 1\n"}
	for _, c := range []struct {
		name   string
		answer ipxe.Answer
		want   []string // "" for not found
		reboot bool     // the configuration may reboot
	}{
		{"fenced", ipxe.Answer{Kind: ipxe.AnswerFenced, Status: 503, Delay: 10 * time.Second}, append([]string{"sleep 10"}, disk...), false},
		{"wait", ipxe.Answer{Kind: ipxe.AnswerWait, Status: 503, Delay: 5 * time.Second}, []string{"sleep 5", again}, true},
		{"exit", ipxe.Answer{Kind: ipxe.AnswerExit, Status: 404}, disk, false},
		{"local", ipxe.Answer{Kind: ipxe.AnswerLocal, Status: 200}, disk, false},
		{"unknown kind", ipxe.Answer{Kind: 99, Status: 503}, []string{"sleep 1", again}, true},
		{"sanboot", ipxe.Answer{Kind: ipxe.AnswerSanboot, Status: 200, URL: cache + "/t/" + grant + "/" + kernel}, []string{"sleep 1", again}, true},
		{"kernel elsewhere", ipxe.Answer{Kind: ipxe.AnswerBoot, Status: 200, Kernel: "http://198.51.100.1/vmlinuz"}, []string{"sleep 1", again}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.d.set(func(context.Context, ipxe.Query) ipxe.Answer { return c.answer })
			f, err := h.chain.OpenFrom(name, from)
			if c.want == nil {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("open: %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(f)
			for _, w := range c.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("configuration lacks %q:\n%s", w, b)
				}
			}
			if !c.reboot && strings.Contains(string(b), "reboot") {
				t.Errorf("the configuration reboots into the same network boot:\n%s", b)
			}
		})
	}
	if st := h.chain.Stats(); st.Fenced != 1 || st.Waits != 1 || st.Exits != 1 || st.Errors != 3 {
		t.Errorf("fenced %d, waits %d, exits %d, errors %d", st.Fenced, st.Waits, st.Exits, st.Errors)
	}
}

// TestRenderWait: a decision slower than RenderWait (a token on its way) gives the machine
// a configuration that waits and asks the same name again; that ask (however its query is
// spelled) gets the answer made meanwhile, without asking the Decider again.
func TestRenderWait(t *testing.T) {
	keys := bootbind.NewKeys(bootbind.Config{})
	h := newHarness(t, fakeSh, fakeGr, func(c *secureboot.Config) { c.Keys = keys })
	from := netip.MustParseAddrPort("192.0.2.10:1024")
	key, _ := keys.Issue(mac, from.Addr())
	release := make(chan struct{})
	h.d.set(func(ctx context.Context, q ipxe.Query) ipxe.Answer {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return bootAnswer(ctx, q)
	})
	name := "boot/grub.cfg?mac=" + mac.String() + "&n=" + key
	type result struct {
		body []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		f, err := h.chain.OpenFrom(name, from)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(f)
		got <- result{body: b}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.clk.BlockUntilTimer(ctx, secureboot.DefaultRenderWait); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(secureboot.DefaultRenderWait)
	r := <-got
	if r.err != nil || !strings.Contains(string(r.body), "# siteboot: not ready yet") ||
		!strings.Contains(string(r.body), "configfile '(tftp,127.0.0.1)/"+name+"'") {
		t.Fatalf("first ask: %v\n%s", r.err, r.body)
	}
	close(release)
	var body []byte
	// The same query spelled otherwise is the same machine's decision.
	respelled := "boot/grub.cfg?n=" + key + "&mac=" + strings.ToUpper(mac.String())
	waitFor(t, "the decision made", func() bool {
		f, err := h.chain.OpenFrom(respelled, from)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(f)
		return hasSecret(string(body))
	})
	if n := len(h.d.asked()); n != 1 {
		t.Errorf("the Decider was asked %d times, want 1", n)
	}
	if st := h.chain.Stats(); st.ConfigWaits != 1 || st.Boots != 1 {
		t.Errorf("config waits %d, boots %d", st.ConfigWaits, st.Boots)
	}
}

// TestShutdown: Shutdown waits for a decision in the making; Close cancels one; later
// requests are refused (ErrClosed) and start no work.
func TestShutdown(t *testing.T) {
	keys := bootbind.NewKeys(bootbind.Config{})
	h := newHarness(t, fakeSh, fakeGr, func(c *secureboot.Config) { c.Keys = keys })
	from := netip.MustParseAddrPort("192.0.2.10:1024")
	key, _ := keys.Issue(mac, from.Addr())
	h.d.set(func(ctx context.Context, q ipxe.Query) ipxe.Answer {
		<-ctx.Done()
		return ipxe.Answer{Kind: ipxe.AnswerWait, Status: 500, Delay: time.Second}
	})
	go h.chain.OpenFrom("boot/grub.cfg?mac="+mac.String()+"&n="+key, from)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.clk.BlockUntilTimer(ctx, secureboot.DefaultRenderWait); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if err := h.chain.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a decision that never ends: %v", err)
	}
	h.clk.Advance(secureboot.DefaultRenderWait)
	if _, err := h.chain.OpenFrom("boot/grub.cfg?mac="+mac.String()+"&n="+key, from); !errors.Is(err, secureboot.ErrClosed) ||
		!errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Shutdown: %v, want ErrClosed", err)
	}
	if n := len(h.d.asked()); n != 1 {
		t.Errorf("the Decider was asked %d times, want 1", n)
	}
}

// TestFilesOnFirstUse: shim and GRUB are read when a machine first asks, not at New; then
// the chain keeps what it read.
func TestFilesOnFirstUse(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	later := []byte("MZ shim written after New")
	if err := writeFile(h.shim, later); err != nil {
		t.Fatal(err)
	}
	open := func(name string) []byte {
		f, err := h.chain.OpenFrom(name, netip.MustParseAddrPort("192.0.2.10:1024"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		return b
	}
	if got := open("sb/shimx64.efi"); !bytes.Equal(got, later) {
		t.Fatalf("first ask: %q, want %q", got, later)
	}
	if err := writeFile(h.shim, fakeSh); err != nil {
		t.Fatal(err)
	}
	if got := open("sb/shimx64.efi"); !bytes.Equal(got, later) {
		t.Errorf("second ask: %q, want what was read for the first, %q", got, later)
	}
}

func TestTFTPCacheURL(t *testing.T) {
	bases := []string{"http://192.0.2.1/cache", "http://192.0.2.1:8080/mirror/"}
	for _, c := range []struct {
		in, want string
	}{
		{"http://192.0.2.1/cache/t/" + grant + "/" + kernel, "tftp://192.0.2.1/cache/t/" + grant + "/" + kernel},
		{"http://192.0.2.1:8080/mirror/t/" + grant + "/" + kernel, "tftp://192.0.2.1/cache/t/" + grant + "/" + kernel},
		{"http://192.0.2.1/cache/" + kernel, ""},
		{"http://192.0.2.1/cache/t/" + grant, ""},
		{"http://192.0.2.1/cache/t/" + grant + "/" + kernel + "/x", ""},
		{"http://192.0.2.1/cache/t/" + grant + "/" + kernel + "?x=1", ""},
		{"http://192.0.2.1/cache/t/../" + kernel, ""},
		{"http://192.0.2.1/cachet/t/" + grant + "/" + kernel, ""},
		{"http://198.51.100.1/vmlinuz", ""},
		{"", ""},
	} {
		got, err := secureboot.TFTPCacheURL(c.in, "tftp://192.0.2.1/cache/", bases...)
		if got != c.want || (c.want == "") != errors.Is(err, secureboot.ErrNotCache) {
			t.Errorf("TFTPCacheURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := secureboot.TFTPCacheURL("http://192.0.2.1/cache/t/"+grant+"/"+kernel, "tftp://192.0.2.1/cache"); !errors.Is(err, secureboot.ErrNotCache) {
		t.Errorf("without a base: %v", err)
	}
	if got, _ := secureboot.TFTPCacheURL("http://192.0.2.1/cache/t/"+grant+"/"+kernel, "tftp://192.0.2.1", bases...); got != "tftp://192.0.2.1/t/"+grant+"/"+kernel {
		t.Errorf("to the TFTP root: %q", got)
	}
}

func TestValidate(t *testing.T) {
	ok := secureboot.Config{Server: server, Nonces: bootbind.NewNonces(bootbind.Config{}), Decider: &decider{answer: bootAnswer}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, f := range map[string]func(*secureboot.Config){
		"no server":      func(c *secureboot.Config) { c.Server = netip.Addr{} },
		"ipv6 server":    func(c *secureboot.Config) { c.Server = netip.MustParseAddr("2001:db8::1") },
		"no nonces":      func(c *secureboot.Config) { c.Nonces = nil },
		"no decider":     func(c *secureboot.Config) { c.Decider = nil },
		"relative shim":  func(c *secureboot.Config) { c.Shim = "shimx64.efi" },
		"relative grub":  func(c *secureboot.Config) { c.GRUB = "grub.efi" },
		"port":           func(c *secureboot.Config) { c.HTTPPort = 70000 },
		"negative wait":  func(c *secureboot.Config) { c.RenderWait = -1 },
		"fraction delay": func(c *secureboot.Config) { c.RetryDelay = 1500 * time.Millisecond },
		"cache slash":    func(c *secureboot.Config) { c.CacheURLs = []string{"http://192.0.2.1/cache/"} },
		"cache scheme":   func(c *secureboot.Config) { c.CacheURLs = []string{"tftp://192.0.2.1/cache"} },
		"cache dir":      func(c *secureboot.Config) { c.TFTPCacheDir = "/cache" },
		"cache dir dots": func(c *secureboot.Config) { c.TFTPCacheDir = "cache/../x" },
	} {
		c := ok
		f(&c)
		err := c.Validate()
		if !errors.Is(err, secureboot.ErrInvalid) || secureboot.ReasonOf(err) != "invalid" {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := secureboot.New(c); !errors.Is(err, secureboot.ErrInvalid) {
			t.Errorf("%s: New: %v", name, err)
		}
	}
	c := ok
	c.Shim = "/nonexistent/shimx64.efi.signed"
	if _, err := secureboot.New(c); !errors.Is(err, secureboot.ErrUnavailable) || secureboot.ReasonOf(err) != "unavailable" ||
		!strings.Contains(err.Error(), "shim-signed") {
		t.Errorf("missing shim: %v", err)
	}
}

func TestReasonOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("other"), ""},
		{fs.ErrNotExist, ""},
		{secureboot.ErrNotServed, "not-served"},
		{&fs.PathError{Op: "open", Path: "x", Err: secureboot.ErrUnbound}, "unbound"},
		{secureboot.ErrBusy, "busy"},
		{secureboot.ErrClosed, "closed"},
		{secureboot.ErrNotCache, "not-cache"},
		{secureboot.ErrUnsupported, "unsupported"},
		{secureboot.ErrUnavailable, "unavailable"},
		{secureboot.ErrInvalid, "invalid"},
	} {
		if got := secureboot.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	// Bind's refusal carries bootbind's reason, and reads as ipxe's ErrUnbound for a host's
	// entry rule.
	h := newHarness(t, fakeSh, fakeGr)
	err := h.chain.Bind(ipxe.Query{MAC: mac, Nonce: "0123456789abcdef0123456789abcdef", Remote: server})
	var re *bootbind.RefusedError
	if !errors.As(err, &re) || re.Reason != bootbind.UnknownNonce || !errors.Is(err, ipxe.ErrUnbound) || secureboot.ReasonOf(err) != "unbound" {
		t.Errorf("Bind: %v", err)
	}
}

// TestImageLayout: the RAM disk served to a machine passes fsck.fat and reads back with
// mtools: shim as the removable-media loader, GRUB beside it under the name shim loads, and
// grub/grub.cfg (GRUB's built-in prefix) a Chain with the machine's MAC and its fresh key,
// configuring the network first.
func TestImageLayout(t *testing.T) {
	mtype := testpeer.LookPath(t, "mtype", "mtools")
	fsck := testpeer.LookPath(t, "fsck.fat", "dosfstools")
	h := newHarness(t, fakeSh, fakeGr)
	url := h.dhcp(t, proxydhcp.KindHTTP, proxydhcp.PortDHCP)
	st, img := h.getFrom("127.0.0.1", http.MethodGet, strings.TrimPrefix(url, "http://127.0.0.1:8080"))
	if st != http.StatusOK {
		t.Fatalf("GET: status %d", st)
	}
	path := filepath.Join(t.TempDir(), "boot.img")
	if err := os.WriteFile(path, []byte(img), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(fsck, "-n", path).CombinedOutput(); err != nil {
		t.Errorf("fsck.fat -n: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		out, err := exec.Command(mtype, "-i", path, "::"+name).Output()
		if err != nil {
			t.Fatalf("mtype %s: %v", name, err)
		}
		return out
	}
	if !bytes.Equal(read("EFI/BOOT/BOOTX64.EFI"), fakeSh) || !bytes.Equal(read("EFI/BOOT/grubx64.efi"), fakeGr) {
		t.Error("the image's shim or GRUB differs from the files")
	}
	cfg := string(read("grub/grub.cfg"))
	key := regexpKey.FindStringSubmatch(cfg)
	bootp, load := strings.Index(cfg, "\nnet_bootp\n"), strings.Index(cfg, "configfile")
	if key == nil || bootp < 0 || load < bootp ||
		!strings.Contains(cfg, `"(tftp,127.0.0.1)/boot/grub.cfg?mac=`+mac.String()+"&") || len(cfg) != secureboot.ConfigSpace {
		t.Fatalf("the image's configuration (%d bytes):\n%s", len(cfg), cfg)
	}
	if r := h.chain.Keys().Claim(key[1], mac, netip.MustParseAddr("127.0.0.1")); r != bootbind.Bound {
		t.Errorf("the image's key: %s, want it bound to the address that fetched the image", r)
	}
}

// TestSpellErrors: what Spell cannot spell is a *SpellError naming the answer, with the
// cause in its chain and the package's reason.
func TestSpellErrors(t *testing.T) {
	h := newHarness(t, fakeSh, fakeGr)
	q := ipxe.Query{MAC: mac, Nonce: "k"}
	for _, c := range []struct {
		a     ipxe.Answer
		cause error
		want  string
	}{
		{ipxe.Answer{Kind: ipxe.AnswerSanboot, URL: cache + "/t/" + grant + "/" + kernel}, secureboot.ErrUnsupported, "unsupported"},
		{ipxe.Answer{Kind: ipxe.AnswerBoot, Kernel: "http://198.51.100.1/vmlinuz"}, secureboot.ErrNotCache, "not-cache"},
		{ipxe.Answer{Kind: ipxe.AnswerBoot, Kernel: cache + "/t/" + grant + "/" + kernel, Cmdline: []string{"a'b"}}, grubcfg.ErrUnsafe, "render"},
	} {
		_, _, err := h.chain.Spell(c.a, q)
		var se *secureboot.SpellError
		if !errors.As(err, &se) || se.Kind != c.a.Kind || !errors.Is(err, c.cause) || secureboot.ReasonOf(err) != c.want {
			t.Errorf("%s: %v (reason %q), want a SpellError for %v", c.a.Kind, err, secureboot.ReasonOf(err), c.cause)
		}
	}
}
