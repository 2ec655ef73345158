package proxydhcp_test

// Quirks of real firmware that broke other network-boot projects, one test each, named after
// the quirk; the table in doc.go ("Firmware quirks") lists them with their sources.

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// respondTo answers one DHCPv4 packet sent to port 67 from a client without an address.
func respondTo(t *testing.T, srv *proxydhcp.Server, p []byte) proxydhcp.Response {
	t.Helper()
	return srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: p, Port: proxydhcp.PortDHCP,
		Source: netip.MustParseAddrPort("0.0.0.0:68"), Local: netip.MustParseAddr(serverIP)})
}

// A chained iPXE sends option 60 "PXEClient" on its first DHCP, as the firmware's PXE did
// (ipxe/ipxe #1527). It is still iPXE (option 77 "iPXE", option 175) and must get the chain
// script's URL, not the iPXE binary again (which would loop).
func TestQuirk_ChainedIPXESendsOption60PXEClient(t *testing.T) {
	srv := newServer(answerAll)
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"efi", ipxeEFI(t, "52:54:00:00:40:01")},
		{"bios-rom", seabiosIPXE(t, "52:54:00:00:40:02")},
		{"bare-PXEClient", build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:40:03", 0x40, arch(iana.EFI_X86_64),
			vendorClass("PXEClient"), dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := respondTo(t, srv, tc.pkt)
			if resp.Reply == nil {
				t.Fatalf("silent (%v), want the chain URL", resp.Reason)
			}
			if !resp.Request.IPXE {
				t.Errorf("not recognised as iPXE")
			}
			f := fieldsOf(t, resp)
			if want := "http://" + serverIP + "/boot/chain.ipxe"; f.File != want {
				t.Errorf("boot file %q, want %q", f.File, want)
			}
		})
	}
}

// Option 93 for x86-64 UEFI is 7 on some firmware and 9 on others (RFC 4578 errata 4624;
// danderson/netboot #101 and #30; xCAT #7645 looped on it): both get the x86-64 UEFI file.
func TestQuirk_Option93X86_64UEFIIs7Or9(t *testing.T) {
	srv := newServer(answerAll)
	for _, a := range []iana.Arch{7, 9} {
		p := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:40:10", uint32(a), arch(a), undi(3, 0),
			vendorClass("PXEClient:Arch:0000"+string(rune('0'+a))+":UNDI:003000"))
		resp := respondTo(t, srv, p)
		if resp.Reply == nil {
			t.Fatalf("arch %d: silent (%v)", a, resp.Reason)
		}
		if f := fieldsOf(t, resp); f.File != "ipxe.efi" {
			t.Errorf("arch %d: boot file %q, want ipxe.efi", a, f.File)
		}
	}
}

// No option 97: some Intel cards send no client GUID (danderson/netboot, pixiecore #21). The
// request is answered, the reply carries no option 97 of its own making, and the Handler is
// told the request had none (Request.HasUUID false) so that a host with an entry UUID to
// match can decide on the MAC alone and say so.
func TestQuirk_NoOption97(t *testing.T) {
	var mu sync.Mutex
	var seen []bool
	srv := newServer(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		mu.Lock()
		seen = append(seen, r.HasUUID)
		mu.Unlock()
		return proxydhcp.Answer()
	})
	p := build(t, dhcpv4.MessageTypeDiscover, "52:54:00:00:40:20", 0x97, arch(iana.EFI_X86_64), undi(2, 1),
		vendorClass("PXEClient:Arch:00007:UNDI:002001"), dhcpv4.WithBroadcast(true))
	resp := respondTo(t, srv, p)
	if resp.Reply == nil {
		t.Fatalf("silent (%v), want an answer", resp.Reason)
	}
	f := fieldsOf(t, resp)
	if f.Opt97 != "" {
		t.Errorf("reply carries option 97 %s the client never sent", f.Opt97)
	}
	if f.File != "ipxe.efi" {
		t.Errorf("boot file %q, want ipxe.efi", f.File)
	}
	if len(seen) != 1 || seen[0] {
		t.Errorf("Handler saw HasUUID %v, want [false]", seen)
	}
}

// No option 97, and the host's entry names a UUID to match (pixiecore #21: some Intel cards
// send no client GUID). The host answers on the MAC alone and its decision says so: the
// answer's event carries Detail "no-uuid" and Stats counts it apart, while a request that
// sent option 97 is answered plainly. On f49ac1d nothing told the two apart.
func TestQuirk_NoOption97DecisionSaysSo(t *testing.T) {
	events := make(chan bootevents.Event, 4)
	srv := &proxydhcp.Server{
		// A host whose entry names a UUID: it answers, and says when it could not check it.
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			d := proxydhcp.Answer()
			d.NoUUID = !r.HasUUID
			return d
		}),
		Events: bootevents.SinkFunc(func(e bootevents.Event) { events <- e }),
	}
	addr := startServer(t, srv, proxydhcp.PortBoot)
	client := listenClient(t)
	with, without := "52:54:00:00:40:21", "52:54:00:00:40:22"
	for i, mac := range []string{with, without} {
		mods := []dhcpv4.Modifier{arch(iana.EFI_X86_64), undi(3, 10), vendorClass("PXEClient:Arch:00007:UNDI:003010"),
			dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1))}
		if mac == with {
			mods = append(mods, uuidOpt(t, ovmfUUID))
		}
		if _, err := client.WriteTo(build(t, dhcpv4.MessageTypeRequest, mac, uint32(0x4021+i), mods...), addr); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bootevents.Event{}
	for range 2 {
		select {
		case e := <-events:
			got[e.MAC.String()] = e
		case <-time.After(time.Minute): // loopback to a serving socket; only stops a hung test
			t.Fatal("no event")
		}
	}
	if e := got[without]; e.Outcome != bootevents.OutcomeOK || e.Detail != proxydhcp.NoteNoUUID || e.HasUUID {
		t.Errorf("event without option 97: outcome %v detail %q HasUUID %v, want ok %q false", e.Outcome, e.Detail, e.HasUUID, proxydhcp.NoteNoUUID)
	}
	if e := got[with]; e.Outcome != bootevents.OutcomeOK || e.Detail != "" || !e.HasUUID {
		t.Errorf("event with option 97: outcome %v detail %q HasUUID %v, want ok \"\" true", e.Outcome, e.Detail, e.HasUUID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats().Boot; st.Answered != 2 || st.AnsweredNoUUID != 1 {
		t.Errorf("Stats.Boot Answered %d AnsweredNoUUID %d, want 2 and 1", st.Answered, st.AnsweredNoUUID)
	}
}

// A reply delay for firmware that ignores an instant answer, and for sites whose own DHCP
// server must answer first (dnsmasq's --dhcp-reply-delay): settable per arch, default none.
func TestQuirk_ReplyDelay(t *testing.T) {
	const d = 300 * time.Millisecond
	srv := newServer(answerAll)
	if resp := respondTo(t, srv, ovmfPXE(t, "52:54:00:00:40:30")); resp.Reply == nil || resp.Delay != 0 {
		t.Fatalf("default: reply %v delay %v, want an answer at once", resp.Reply != nil, resp.Delay)
	}
	srv = newServer(answerAll)
	srv.ReplyDelay = map[hwid.Arch]time.Duration{hwid.ArchX86_64EFI: d}
	if resp := respondTo(t, srv, ovmfPXE(t, "52:54:00:00:40:31")); resp.Reply == nil || resp.Delay != d {
		t.Errorf("x86-64 UEFI: reply %v delay %v, want %v", resp.Reply != nil, resp.Delay, d)
	}
	if resp := respondTo(t, srv, seabiosIPXE(t, "52:54:00:00:40:32")); resp.Reply == nil || resp.Delay != 0 {
		t.Errorf("BIOS: reply %v delay %v, want none (not listed)", resp.Reply != nil, resp.Delay)
	}

	bad := &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ReplyDelay: map[hwid.Arch]time.Duration{hwid.ArchBIOS: -time.Second}}
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate accepted a negative ReplyDelay")
	}
	bad.ReplyDelay[hwid.ArchBIOS] = proxydhcp.MaxReplyDelay + time.Second
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate accepted a ReplyDelay over MaxReplyDelay")
	}

	// Over a real loopback socket the reply leaves no earlier than the delay, and the worker
	// is not held meanwhile: a second client's undelayed request is answered first.
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv = &proxydhcp.Server{Handler: proxydhcp.HandlerFunc(answerAll), ServerIP: netip.MustParseAddr(serverIP), Workers: 1,
		Segments:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		ReplyDelay: map[hwid.Arch]time.Duration{hwid.ArchX86_64EFI: d}}
	done := make(chan error, 1)
	go func() { done <- srv.ServeBoot(conn) }()
	defer func() {
		srv.Close()
		<-done
	}()
	client, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	slow := build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:40:33", 0x33, arch(iana.EFI_X86_64), vendorClass("PXEClient:Arch:00007:UNDI:003000"),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)))
	fast := build(t, dhcpv4.MessageTypeRequest, "52:54:00:00:40:34", 0x34, arch(iana.INTEL_X86PC), vendorClass("PXEClient:Arch:00000:UNDI:002001"),
		dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)))
	start := time.Now()
	for _, p := range [][]byte{slow, fast} {
		if _, err := client.WriteTo(p, conn.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	var slowAt time.Duration
	buf := make([]byte, 1500)
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(order) < 2 {
		n, _, err := client.ReadFrom(buf)
		if err != nil {
			t.Fatalf("after %v: %v (got %v)", order, err, order)
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, m.ClientHWAddr.String())
		if m.ClientHWAddr.String() == "52:54:00:00:40:33" {
			slowAt = time.Since(start)
		}
	}
	if strings.Join(order, " ") != "52:54:00:00:40:34 52:54:00:00:40:33" {
		t.Errorf("reply order %v, want the undelayed one first", order)
	}
	if slowAt < d {
		t.Errorf("delayed reply after %v, want no earlier than %v", slowAt, d)
	}
}

// No DNS in UEFI HTTP boot: the firmware hands iPXE no DNS server (ipxe/ipxe #1316), so the
// URLs a boot client is given name the server by IP literal unless the site sets a name.
func TestQuirk_NoDNSInUEFIHTTPBoot(t *testing.T) {
	srv := newServer(answerAll)
	for _, p := range [][]byte{ovmfHTTP(t, "52:54:00:00:40:40"), ipxeEFI(t, "52:54:00:00:40:41"), arm64(t, "52:54:00:00:40:42", true)} {
		resp := respondTo(t, srv, p)
		if resp.Reply == nil {
			t.Fatalf("silent (%v)", resp.Reason)
		}
		f := fieldsOf(t, resp)
		if !strings.HasPrefix(f.File, "http://"+serverIP+"/") {
			t.Errorf("%s: boot URL %q does not name the server by its address %s", f.MAC, f.File, serverIP)
		}
	}
}

// arm64 UEFI HTTP boot (arch 19) gets the arm64 URL, and arm64 PXE (arch 11) the arm64 file,
// as AAVMF asks (RFC 4578 / IANA processor architecture types).
func TestQuirk_ARM64UEFIHTTPBoot(t *testing.T) {
	srv := newServer(answerAll)
	for _, tc := range []struct {
		http bool
		want string
	}{{true, "http://" + serverIP + "/boot/files/ipxe-arm64.efi"}, {false, "ipxe-arm64.efi"}} {
		resp := respondTo(t, srv, arm64(t, "52:54:00:00:40:50", tc.http))
		if resp.Reply == nil {
			t.Fatalf("http %v: silent (%v)", tc.http, resp.Reason)
		}
		f := fieldsOf(t, resp)
		if f.File != tc.want {
			t.Errorf("http %v: boot file %q, want %q", tc.http, f.File, tc.want)
		}
		if tc.http && f.Opt60 != "HTTPClient" {
			t.Errorf("option 60 %q, want HTTPClient (EDK2 ignores the URL otherwise)", f.Opt60)
		}
	}
}

// DHCPv6 identities: DUID-LLT (EDK2 without an SMBIOS UUID), DUID-LL (iPXE), DUID-UUID (EDK2
// with one) and a relay's option 79 (RFC 6939) each map to the entry's MAC, or are refused
// with the reason (ReasonNoMAC) when no MAC can be known (RFC 8415 section 11; EDK2
// Dhcp6Utility.c Dhcp6GenerateClientId).
func TestQuirk_DHCPv6Identities(t *testing.T) {
	const mac = "52:54:00:00:40:60"
	var mu sync.Mutex
	var macs []string
	srv := newServer6(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
		mu.Lock()
		macs = append(macs, r.MAC.String())
		mu.Unlock()
		return proxydhcp.Answer()
	})
	link, relay := "2001:db8::1", "2001:db8::3"
	for _, tc := range []struct {
		name   string
		pkt    []byte
		src    string
		answer bool
	}{
		{"duid-llt", edk2PXESolicit(duidLLT(t, mac)), "[fe80::1%eth0]:546", true},
		{"duid-ll", ipxeInfoRequest(t, mac), "[fe80::1%eth0]:546", true},
		{"duid-uuid-relayed-79", relayForw(t, 0, link, "fe80::1", mac, edk2PXESolicit(duidUUID(t, ovmfUUID))), "[" + relay + "]:547", true},
		{"duid-uuid-no-79", relayForw(t, 0, link, "fe80::1", "", edk2PXESolicit(duidUUID(t, ovmfUUID))), "[" + relay + "]:547", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			macs = nil
			mu.Unlock()
			resp := srv.Respond(context.Background(), proxydhcp.Packet{Link: testLink, Data: tc.pkt, Port: proxydhcp.PortDHCPv6,
				Source: netip.MustParseAddrPort(tc.src), Local: netip.MustParseAddr(server6)})
			if !tc.answer {
				if resp.Reply != nil || resp.Reason != proxydhcp.ReasonNoMAC {
					t.Errorf("answered %v reason %v, want silence with %v", resp.Reply != nil, resp.Reason, proxydhcp.ReasonNoMAC)
				}
				return
			}
			if resp.Reply == nil {
				t.Fatalf("silent (%v, %v)", resp.Reason, resp.Err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(macs) != 1 || macs[0] != mac {
				t.Errorf("Handler saw MACs %v, want [%s]", macs, mac)
			}
		})
	}
}
