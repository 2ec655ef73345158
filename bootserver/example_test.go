package bootserver_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing/fstest"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/tftpd"
)

// A host composes a boot server from its machines, its fence and the sockets it bound: the
// Server wires proxy DHCP, TFTP and the /boot/ handler, binds each script request to the
// DHCP answer it follows, and signs each script's assertion.
func Example() {
	machine := hwid.MustParseMAC("52:54:00:12:34:56")
	entries := map[hwid.MAC]ipxe.Entry{machine: {MAC: machine, Workflow: "wf-1"}}
	// The fence: this host holds the site's boot lease at epoch 1 (a *lease.Fence, in a
	// host linked to its control plane).
	fence := bootserver.FenceFunc(func() (uint64, bool) { return 1, true })
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		log.Fatal(err)
	}

	// The sockets: UDP 67, 4011 and 69 and TCP 80 of the boot segment's address on a real
	// site; loopback and any port here.
	var udp [3]net.PacketConn
	for i := range udp {
		if udp[i], err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
			log.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()

	srv, err := bootserver.New(bootserver.Config{
		Fence:   fence,
		BaseURL: base,
		Boot: ipxe.Config{
			Entries: ipxe.EntriesFunc(func(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
				e, ok := entries[q.MAC]
				return e, ok, nil
			}),
			Tokens: ipxe.TokensFunc(func(context.Context, ipxe.Entry) (string, error) { return "the-token", nil }),
			Kernel: "http://192.0.2.1/vmlinuz",
		},
		Issuer: &assertion.Issuer{Site: "site-a", Agent: "agent-a", Signer: key},
		DHCP: &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(func(_ context.Context, req *proxydhcp.Request) proxydhcp.Decision {
			if _, ok := entries[req.MAC]; !ok {
				return proxydhcp.Silence(proxydhcp.ReasonUnknown)
			}
			return proxydhcp.Answer()
		})},
		TFTP:   &tftpd.Server{},
		Builds: fstest.MapFS{"ipxe.efi": {Data: []byte("an iPXE build")}},
	})
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(bootserver.Listeners{DHCP: udp[0], PXE: udp[1], TFTP: udp[2], HTTP: ln})
	}()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{ipxe.PathChain, ipxe.PathBoot + "?mac=" + machine.String()} {
		resp, err := client.Get(base + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %d, a secret: %v\n", strings.SplitN(path, "?", 2)[0], resp.StatusCode, strings.Contains(string(body), "the-token"))
	}
	st := srv.Stats()
	fmt.Println("unbound:", st.Boot.Unbound, "no-nonce:", st.Bind.NoNonce)

	if err := srv.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-served)
	// Output:
	// /boot/chain.ipxe: 200, a secret: false
	// /boot/ipxe: 200, a secret: false
	// unbound: 1 no-nonce: 1
	// bootserver: server closed
}

// Bind gives the host's entry only to a request that presents the boot nonce of the DHCP
// answer, from the address the answer went to.
func ExampleBind() {
	machine := hwid.MustParseMAC("52:54:00:12:34:56")
	nonces := bootbind.NewNonces(bootbind.Config{})
	b := bootserver.Bind{
		Entries: ipxe.EntriesFunc(func(_ context.Context, q ipxe.Query) (ipxe.Entry, bool, error) {
			return ipxe.Entry{MAC: q.MAC, Workflow: "wf-1"}, q.MAC == machine, nil
		}),
		Nonces: nonces,
	}
	at := netip.MustParseAddr("192.0.2.11")
	// Proxy DHCP named this nonce in its answer to the machine at 192.0.2.11 (nonces is its
	// Binder).
	nonce, _ := nonces.Bind(context.Background(), machine, at)
	for _, q := range []ipxe.Query{
		{MAC: machine, Remote: at},
		{MAC: machine, Nonce: nonce, Remote: netip.MustParseAddr("192.0.2.66")},
		{MAC: machine, Nonce: nonce, Remote: at},
	} {
		e, ok, err := b.Entry(context.Background(), q)
		var r *bootbind.RefusedError
		if errors.As(err, &r) {
			fmt.Println("refused:", r.Reason, errors.Is(err, ipxe.ErrUnbound))
			continue
		}
		fmt.Println("entry:", ok, e.Workflow)
	}
	// Output:
	// refused: no-nonce true
	// refused: nonce-other-address true
	// entry: true wf-1
}
