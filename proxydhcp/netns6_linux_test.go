package proxydhcp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/internal/testpeer"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// dhclient6 runs ISC dhclient in stateless mode (-6 -S: INFORMATION-REQUEST) on eth0 of ns,
// once, configured as a PXE client (vendor class 343 "PXEClient:Arch:00007:UNDI:003000",
// option 61 = 7) asking for option 59, and returns the boot file URL it received, or "" when
// none came. Its DUID is a DUID-LL of eth0's MAC, generated fresh. dhclient is its path:
// callers look it up before they start anything, so that its absence leaves nothing behind.
func dhclient6(t *testing.T, dhclient string, ns *testpeer.Netns) string {
	t.Helper()
	dir := t.TempDir()
	class := "PXEClient:Arch:00007:UNDI:003000"
	conf := fmt.Sprintf("option dhcp6.vendor-class code 16 = { unsigned integer 32, unsigned integer 16, text };\n"+
		"send dhcp6.vendor-class 343 %d \"%s\";\nsend dhcp6.client-arch-type 7;\nalso request dhcp6.bootfile-url;\n", len(class), class)
	script := "#!/bin/sh\nenv > " + dir + "/env.$reason\n"
	for name, body := range map[string]string{"dhclient.conf": conf, "script": script} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := ns.Command(dhclient, "-6", "-S", "-1", "-v", "-d", "-cf", dir+"/dhclient.conf", "-lf", dir+"/leases",
		"-pf", dir+"/pid", "-sf", dir+"/script", "eth0")
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = cmd.CombinedOutput()
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Logf("dhclient did not finish:\n%s", out)
	}
	env, err := os.ReadFile(dir + "/env.RENEW6") // dhclient -S reports its REPLY as RENEW6
	if err != nil {
		names, _ := filepath.Glob(dir + "/*")
		t.Logf("dhclient got no reply (%v, %v):\n%s", err, names, out)
		return ""
	}
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(l, "new_dhcp6_bootfile_url="); ok {
			return strings.Trim(v, "'\"")
		}
	}
	t.Logf("dhclient's reply had no boot file URL:\n%s", env)
	return ""
}

// waitDAD waits (bounded) until every link of ns whose carrier is up has its link-local
// address and no address is tentative any more: dhclient gives up on a link without a usable
// link-local address, and the kernel adds that address only once the veth's carrier is up.
func waitDAD(t *testing.T, ns *testpeer.Netns) {
	t.Helper()
	for range 50 {
		if strings.TrimSpace(ns.Run(t, "ip", "-6", "addr", "show", "tentative")) == "" && linksHaveLinkLocal(t, ns) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("addresses still tentative or missing:\n%s", ns.Run(t, "ip", "-6", "addr"))
}

// linksHaveLinkLocal reports whether every link of ns in operational state UP has an fe80::
// address.
func linksHaveLinkLocal(t *testing.T, ns *testpeer.Netns) bool {
	t.Helper()
	withLL := map[string]bool{}
	for _, l := range strings.Split(ns.Run(t, "ip", "-6", "-o", "addr", "show", "scope", "link"), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			withLL[f[1]] = true
		}
	}
	for _, l := range strings.Split(ns.Run(t, "ip", "-o", "link", "show", "up"), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.Contains(l, " state UP ") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if !withLL[name] {
			return false
		}
	}
	return true
}

// serve6InNetns serves srv on [::]:547 (joined to ff02::1:2 on eth0) and [::]:4011 of ns.
func serve6InNetns(t *testing.T, ns *testpeer.Netns, srv *proxydhcp.Server) (wait func()) {
	t.Helper()
	var c547, c4011 net.PacketConn
	if err := ns.Do(func() (err error) {
		if c547, err = proxydhcp.ListenDHCPv6("", "eth0"); err != nil {
			return err
		}
		c4011, err = net.ListenPacket("udp6", "[::]:4011")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { checkClosed(t, srv.ServeDHCPv6(c547)) })
	wg.Go(func() { checkClosed(t, srv.ServeBoot(c4011)) })
	return wg.Wait
}

// TestNetnsDHCPv6Dhclient answers ISC dhclient (a real DHCPv6 client) on one IPv6 link, beside
// nothing else: its INFORMATION-REQUEST to ff02::1:2 gets the boot file URL, and the host's
// Handler saw the MAC from its DUID-LL. Then EDK2's boot-server REQUEST, sent to one of two
// addresses of the server on UDP 4011, is answered from that address, naming it in the URL
// (IPV6_PKTINFO), and sent again Resend6Delay later. Needs root (namespaces) and
// isc-dhcp-client.
func TestNetnsDHCPv6Dhclient(t *testing.T) {
	dhclient := testpeer.LookPath(t, "dhclient", "isc-dhcp-client")
	server, client := testpeer.NewNetns(t), testpeer.NewNetns(t)
	server.Run(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", client.Name())
	const clientMAC = "52:54:00:dd:00:01"
	client.Run(t, "ip", "link", "set", "eth0", "address", clientMAC)
	server.Run(t, "ip", "addr", "add", "2001:db8::10/64", "dev", "eth0", "nodad")
	server.Run(t, "ip", "addr", "add", "2001:db8::11/64", "dev", "eth0", "nodad")
	client.Run(t, "ip", "addr", "add", "2001:db8::100/64", "dev", "eth0", "nodad")
	server.Run(t, "ip", "link", "set", "eth0", "up")
	client.Run(t, "ip", "link", "set", "eth0", "up")
	waitDAD(t, server)
	waitDAD(t, client)

	var mu sync.Mutex
	var seen []string
	srv := &proxydhcp.Server{
		ServerDUID: serverDUID,
		// The server's sockets live in a namespace the process is not in, so the address of
		// the interface a multicast request came in on cannot be looked up: name it.
		ServerIP6: netip.MustParseAddr("2001:db8::10"),
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			mu.Lock()
			seen = append(seen, r.Type.String()+" "+r.MAC.String()+" "+r.MACSource.String()+" "+r.Arch.String())
			mu.Unlock()
			return proxydhcp.Answer()
		}),
	}
	wait := serve6InNetns(t, server, srv)
	defer func() {
		srv.Close()
		wait()
	}()

	if got, want := dhclient6(t, dhclient, client), "tftp://[2001:db8::10]/ipxe.efi"; got != want {
		t.Errorf("dhclient's boot file URL %q, want %q (server stats %+v)", got, want, srv.Stats().DHCPv6)
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"INFORMATION-REQUEST " + clientMAC + " duid-ll x86_64-efi"}, seen); diff != "" {
		t.Errorf("the handler saw (-want +got):\n%s", diff)
	}
	mu.Unlock()

	// EDK2's boot-server request, to the second address, from port 4011, on a server that
	// names no address of its own.
	srv2 := &proxydhcp.Server{ServerDUID: serverDUID, Handler: proxydhcp.HandlerFunc(answerAll)}
	var c4011 net.PacketConn
	if err := server.Do(func() (err error) { c4011, err = net.ListenPacket("udp6", "[::]:14011"); return err }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); checkClosed(t, srv2.ServeBoot(c4011)) }()
	defer func() {
		srv2.Close()
		<-done
	}()
	var uc net.PacketConn
	if err := client.Do(func() (err error) { uc, err = net.ListenPacket("udp6", "[2001:db8::100]:4011"); return err }); err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	req := edk2BootRequest(duidLLT(t, clientMAC), serverDUID)
	buf := make([]byte, 1500)
	var reply *dhcpv6.Message
	var from net.Addr
	for try := 0; try < 3 && reply == nil; try++ { // the first datagram may wait for neighbour discovery
		if _, err := uc.WriteTo(req, &net.UDPAddr{IP: net.ParseIP("2001:db8::11"), Port: 14011}); err != nil {
			t.Fatal(err)
		}
		uc.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, f, err := uc.ReadFrom(buf)
		if err != nil {
			continue
		}
		from = f
		if reply, err = dhcpv6.MessageFromBytes(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if reply == nil {
		t.Fatalf("no REPLY on port 4011 (stats %+v)", srv2.Stats().Boot)
	}
	got := []string{from.String(), reply.MessageType.String(), reply.Options.BootFileURL()}
	want := []string{"[2001:db8::11]:14011", "REPLY", "tftp://[2001:db8::11]/ipxe.efi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("boot-server REPLY (-want +got):\n%s", diff)
	}
	// The same REPLY again, Resend6Delay later: EDK2 may not have been reading yet.
	first := reply.ToBytes()
	uc.SetReadDeadline(time.Now().Add(proxydhcp.Resend6Delay + 2*time.Second))
	n, _, err := uc.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], first) {
		t.Errorf("second copy: %v, %x, want %x", err, buf[:n], first)
	}
	if st := waitStats(srv2, func(st proxydhcp.Stats) bool { return st.Resent >= 1 }); st.Resent < 1 || st.Boot.Answered < 1 {
		t.Errorf("stats %+v: want the REPLY answered and resent", st)
	}
}

// TestNetnsDHCPv6DnsmasqRelay puts dhclient on a link behind dnsmasq's DHCPv6 relay
// (dhcp-relay with IPv6 addresses) and the server on another link: the RELAY-FORW is
// answered with a RELAY-REPL to the relay, which hands the REPLY to the client; the URL names
// the address the relay sent to (read per packet, no ServerIP6), and the handler saw the
// relay's link address. Needs root, dnsmasq and isc-dhcp-client.
func TestNetnsDHCPv6DnsmasqRelay(t *testing.T) {
	dnsmasq := testpeer.LookPath(t, "dnsmasq", "dnsmasq")
	dhclient := testpeer.LookPath(t, "dhclient", "isc-dhcp-client")
	server, relay, client := testpeer.NewNetns(t), testpeer.NewNetns(t), testpeer.NewNetns(t)
	relay.Run(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", server.Name())
	relay.Run(t, "ip", "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", client.Name())
	const clientMAC = "52:54:00:dd:00:02"
	client.Run(t, "ip", "link", "set", "eth0", "address", clientMAC)
	server.Run(t, "ip", "addr", "add", "2001:db8::10/64", "dev", "eth0", "nodad")
	relay.Run(t, "ip", "addr", "add", "2001:db8::20/64", "dev", "eth0", "nodad")
	relay.Run(t, "ip", "addr", "add", relayLink+"/64", "dev", "eth1", "nodad")
	for _, ns := range []*testpeer.Netns{server, relay, client} {
		ns.Run(t, "ip", "link", "set", "eth0", "up")
	}
	relay.Run(t, "ip", "link", "set", "eth1", "up")
	server.Run(t, "ip", "-6", "route", "add", "2001:db8:1::/64", "via", "2001:db8::20")
	for _, ns := range []*testpeer.Netns{server, relay, client} {
		waitDAD(t, ns)
	}
	testpeer.Start(t, testpeer.Cmd{
		Path: dnsmasq, Netns: relay,
		Args: []string{"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--log-facility=-", "--log-dhcp",
			"--interface=eth1", "--dhcp-relay=" + relayLink + ",2001:db8::10",
			"--dhcp-leasefile=" + t.TempDir() + "/leases", "--pid-file=" + t.TempDir() + "/pid", "--user=root"},
		ReadyLog: "relay",
	})

	var mu sync.Mutex
	var seen []string
	srv := &proxydhcp.Server{
		ServerDUID: serverDUID,
		Relays:     []netip.Addr{netip.MustParseAddr("2001:db8::20")},
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			mu.Lock()
			seen = append(seen, r.MAC.String()+" "+r.MACSource.String()+" "+r.Relay.String())
			mu.Unlock()
			return proxydhcp.Answer()
		}),
	}
	wait := serve6InNetns(t, server, srv)
	defer func() {
		srv.Close()
		wait()
	}()

	if got, want := dhclient6(t, dhclient, client), "tftp://[2001:db8::10]/ipxe.efi"; got != want {
		t.Errorf("boot file URL through the relay %q, want %q (server stats %+v)", got, want, srv.Stats().DHCPv6)
	}
	mu.Lock()
	if diff := cmp.Diff([]string{clientMAC + " relay-option-79 " + relayLink}, seen); diff != "" {
		t.Errorf("the handler saw (-want +got):\n%s", diff)
	}
	mu.Unlock()
}

// TestNetnsListenAndServeIPv6 runs ListenAndServe with IPv6 set inside a namespace: it binds
// 67 and 4011 for DHCPv4 and [::]:547 (joined to ff02::1:2 on every interface there) and
// [::]:4011 for DHCPv6; dhclient on the link gets its boot file URL, and Shutdown ends
// ListenAndServe with ErrServerClosed. Needs root (namespaces) and isc-dhcp-client.
func TestNetnsListenAndServeIPv6(t *testing.T) {
	dhclient := testpeer.LookPath(t, "dhclient", "isc-dhcp-client")
	server, client := testpeer.NewNetns(t), testpeer.NewNetns(t)
	server.Run(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", client.Name())
	server.Run(t, "ip", "addr", "add", "2001:db8::10/64", "dev", "eth0", "nodad")
	server.Run(t, "ip", "link", "set", "eth0", "up")
	client.Run(t, "ip", "link", "set", "eth0", "up")
	waitDAD(t, server)
	waitDAD(t, client)

	srv := &proxydhcp.Server{IPv6: true, ServerDUID: serverDUID, ServerIP6: netip.MustParseAddr("2001:db8::10"),
		Handler: proxydhcp.HandlerFunc(answerAll)}
	done := make(chan error, 1)
	go func() { done <- server.Do(srv.ListenAndServe) }()
	// ListenAndServe binds as it starts; the first INFORMATION-REQUEST may come before.
	if got, want := dhclient6(t, dhclient, client), "tftp://[2001:db8::10]/ipxe.efi"; got != want {
		t.Errorf("boot file URL %q, want %q (stats %+v)", got, want, srv.Stats().DHCPv6)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, proxydhcp.ErrServerClosed) {
		t.Errorf("ListenAndServe returned %v, want ErrServerClosed", err)
	}
}
