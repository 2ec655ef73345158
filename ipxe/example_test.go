package ipxe_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

func ExampleBoot() {
	script, err := ipxe.Boot{
		Kernel:  "http://192.0.2.1/ramdisk/vmlinuz",
		Initrds: []string{"http://192.0.2.1/ramdisk/initrd.img"},
		Params:  []ipxe.Param{{Name: "bc.token", Value: "bcjt_01k5w.c2VjcmV0"}},
		Cmdline: []string{"console=ttyS0"},
		Retry:   ipxe.Retry{Attempts: 2},
		Again:   "/boot/chain.ipxe",
	}.Render()
	if err != nil {
		panic(err)
	}
	fmt.Print(string(script))

	// A value that would add a kernel parameter is refused, not escaped.
	_, err = ipxe.Boot{
		Kernel: "http://192.0.2.1/ramdisk/vmlinuz",
		Params: []ipxe.Param{{Name: "bc.token", Value: "x init=/bin/sh"}},
	}.Render()
	fmt.Println(err, errors.Is(err, ipxe.ErrUnsafe))
	// Output:
	// #!ipxe
	// # siteboot: boot the ramdisk
	// imgfree
	// kernel http://192.0.2.1/ramdisk/vmlinuz initrd=initrd0 bc.token=bcjt_01k5w.c2VjcmV0 console=ttyS0 || goto retry1
	// initrd --name initrd0 http://192.0.2.1/ramdisk/initrd.img || goto retry1
	// boot || goto retry1
	// :retry1
	// echo siteboot: attempt 1 of 2 failed, retrying in 2 s
	// sleep 2
	// imgfree
	// kernel http://192.0.2.1/ramdisk/vmlinuz initrd=initrd0 bc.token=bcjt_01k5w.c2VjcmV0 console=ttyS0 || goto failed
	// initrd --name initrd0 http://192.0.2.1/ramdisk/initrd.img || goto failed
	// boot || goto failed
	// :failed
	// echo siteboot: giving up after 2 attempts
	// chain --replace --autofree /boot/chain.ipxe || goto reboot
	// :reboot
	// sleep 10
	// reboot
	// ipxe: params[bc.token]: white space true
}

// The handler wired to a host: one boot entry, an active fence, a token store and an
// Ed25519 signer standing in for package assertion.
func ExampleNewHandler() {
	mac, _ := hwid.ParseMAC("52:54:00:12:34:56")
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	h, err := ipxe.NewHandler(ipxe.Config{
		Entries: ipxe.EntriesFunc(func(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
			return ipxe.Entry{MAC: q.MAC, Workflow: "wf_1"}, q.MAC == mac, nil
		}),
		Fence: ipxe.FenceFunc(func() (uint64, bool) { return 3, true }),
		Tokens: ipxe.TokensFunc(func(context.Context, ipxe.Entry) (string, error) {
			return "bcjt_01k5w.c2VjcmV0", nil
		}),
		Signer: ipxe.SignerFunc(func(_ context.Context, c ipxe.Claims) (string, error) {
			msg := fmt.Sprintf("%s|%s|%d", c.MAC, c.Workflow, c.Epoch)
			return base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(msg))), nil
		}),
		Kernel:  "http://192.0.2.1/ramdisk/vmlinuz",
		Initrds: []string{"http://192.0.2.1/ramdisk/initrd.img"},
		Params:  []ipxe.Param{{Name: "bc.gateway", Value: "https://gw.example.net"}},
		Cmdline: "console=ttyS0",
		Clock:   clocktest.New(time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(ipxe.NewServer(h).Handler)
	defer srv.Close()

	for _, path := range []string{
		"/boot/chain.ipxe",
		"/boot/ipxe?mac=52:54:00:12:34:56",
		"/boot/ipxe?mac=52:54:00:12:34:57",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Show each answer's status and its first command.
		first := strings.SplitN(string(body), "\n", 4)[2]
		fmt.Printf("%s: %d %.131s\n", path, resp.StatusCode, first)
	}
	fmt.Printf("%+v\n", h.Stats())
	// Output:
	// /boot/chain.ipxe: 200 chain --replace --autofree /boot/ipxe?mac=${netX/mac:hexhyp}&uuid=${uuid}&ip=${netX/ip}&platform=${platform}&buildarch=${buildarch}
	// /boot/ipxe?mac=52:54:00:12:34:56: 200 imgfree
	// /boot/ipxe?mac=52:54:00:12:34:57: 200 exit 1
	// {Requests:3 Chains:1 Scripts:1 Sanboots:0 LocalBoots:0 Unknown:1 Mismatched:0 Unbound:0 UUIDRefused:0 IPRefused:0 Discovered:0 Fenced:0 TokenWaits:0 SanbootWaits:0 TokenFetches:1 BadRequests:0 HeadersTooLarge:0 MethodsRefused:0 NotFound:0 Files:0 Errors:0}
}

// Decide answers a machine outside HTTP: here a host that serves GRUB over TFTP asks for
// the decision for a MAC, as the address the request came from, and spells it itself.
func ExampleHandler_Decide() {
	known, _ := hwid.ParseMAC("52:54:00:12:34:56")
	h, err := ipxe.NewHandler(ipxe.Config{
		Entries: ipxe.EntriesFunc(func(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
			return ipxe.Entry{MAC: q.MAC, Workflow: "wf_1"}, q.MAC == known, nil
		}),
		Fence:   ipxe.FenceFunc(func() (uint64, bool) { return 3, true }),
		Tokens:  ipxe.TokensFunc(func(context.Context, ipxe.Entry) (string, error) { return "bcjt_01k5w.c2VjcmV0", nil }),
		Signer:  ipxe.SignerFunc(func(context.Context, ipxe.Claims) (string, error) { return "signed", nil }),
		Kernel:  "http://192.0.2.1/ramdisk/vmlinuz",
		Initrds: []string{"http://192.0.2.1/ramdisk/initrd.img"},
	})
	if err != nil {
		panic(err)
	}
	from := netip.MustParseAddr("192.0.2.40")
	for _, mac := range []string{"52:54:00:12:34:56", "52:54:00:12:34:57"} {
		m, _ := hwid.ParseMAC(mac)
		a := h.Decide(context.Background(), ipxe.Query{MAC: m, Remote: from, Loader: "grub"})
		fmt.Printf("%s: %s %q %s\n", mac, a.Kind, a.Reason, a.Kernel)
	}
	// Output:
	// 52:54:00:12:34:56: boot "" http://192.0.2.1/ramdisk/vmlinuz
	// 52:54:00:12:34:57: exit "unknown"
}
