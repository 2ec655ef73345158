package agent_test

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/bettercompute/siteboot/hwid"
)

// TestScriptOnlyForTheMachineOfTheEntry (S3): /boot/ipxe compares the entry's arch with the
// firmware iPXE reports (${platform}, ${buildarch}) and its UUID with ${uuid}, when both
// sides have one; a mismatch gets the exit script and no secret, counted by reason. Any of
// the UUID's three spellings matches; a firmware placeholder is never compared.
func TestScriptOnlyForTheMachineOfTheEntry(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	e := entry(4, h.clk.Now().Add(2*time.Hour)) // X86_64_EFI
	e.UUID = u.String()
	h.prepare(t, a, e)
	for _, tc := range []struct {
		name, query string
		status      int
	}{
		{"uefi x86-64 with its uuid", "&uuid=" + u.String() + "&platform=efi&buildarch=x86_64", http.StatusOK},
		{"its uuid as smbios spells it", "&uuid=" + u.SMBIOS().String(), http.StatusOK},
		{"its uuid as ipmi spells it", "&uuid=" + u.Reversed().String(), http.StatusOK},
		{"nothing to compare", "", http.StatusOK},
		{"placeholder uuid not compared", "&uuid=03000200-0400-0500-0006-000700080009", http.StatusOK},
		{"a bios build of ipxe", "&uuid=" + u.String() + "&platform=pcbios&buildarch=i386", http.StatusOK},
		{"an arm64 build of ipxe", "&platform=efi&buildarch=arm64", http.StatusOK},
		{"another machine's uuid", "&uuid=8f1c0e2a-1b2c-4d5e-9f00-112233445566&platform=efi&buildarch=x86_64", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := get(t, scriptURL(a, e)+tc.query)
			if st != tc.status {
				t.Fatalf("status %d, want %d\n%s", st, tc.status, body)
			}
			if secret := strings.Contains(body, "bc.token=") || strings.Contains(body, "bc.assertion="); secret == strings.Contains(body, "\nexit 1") {
				t.Errorf("status %d with a secret in the script: %v\n%s", st, secret, body)
			}
		})
	}
	st := a.Stats()
	if st["boot_arch-mismatch"] != 2 || st["boot_uuid-mismatch"] != 1 || st["boot_unknown"] != 0 {
		t.Errorf("counters: arch %d, uuid %d, unknown %d; want 2, 1, 0", st["boot_arch-mismatch"], st["boot_uuid-mismatch"], st["boot_unknown"])
	}
	if d := a.Discovered(); len(d.Entries) != 0 {
		t.Errorf("a mismatched machine was listed as discovered: %+v", d.Entries)
	}
}

// TestDHCPOnlyForTheMachineOfTheEntry (S3): proxy DHCP answers the entry's MAC only when
// option 93 names the entry's firmware (its PXE or its HTTP-boot number) and option 97 is a
// spelling of the entry's UUID; otherwise silence, counted by reason.
func TestDHCPOnlyForTheMachineOfTheEntry(t *testing.T) {
	h := newHarness(t)
	a, _ := h.start(t, h.config(t.TempDir()), h.plane.Link())
	u := hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")
	e := entry(5, h.clk.Now().Add(2*time.Hour)) // X86_64_EFI
	e.UUID = u.String()
	h.prepare(t, a, e)
	pxe := netip.MustParseAddrPort(a.Addrs()["pxe"])
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func(arch iana.Arch, uuid hwid.UUID) *dhcpv4.DHCPv4 {
		t.Helper()
		req, err := dhcpv4.New(
			dhcpv4.WithHwAddr(net.HardwareAddr(e.MAC[:])),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
			dhcpv4.WithClientIP(net.IPv4(127, 0, 0, 1)),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
			dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, uuid[:]...)),
		)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteToUDPAddrPort(req.ToBytes(), pxe); err != nil {
			t.Fatal(err)
		}
		return req
	}
	silent := func(key string, want uint64) {
		t.Helper()
		waitFor(t, key+" counted", func() bool { return a.Stats()[key] == want })
	}
	ask(iana.INTEL_X86PC, u) // a BIOS PXE ROM
	silent("proxydhcp_silent_arch-mismatch", 1)
	ask(iana.EFI_X86_64, hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566"))
	silent("proxydhcp_silent_uuid-mismatch", 1)

	// The entry's own machine, its UUID as SMBIOS spells it, by UEFI HTTP boot's number.
	req := ask(iana.Arch(16), u.SMBIOS())
	buf := make([]byte, 1500)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no answer for the entry's own machine: %v", err)
		}
		if rep, err := dhcpv4.FromBytes(buf[:n]); err == nil && rep.TransactionID == req.TransactionID {
			break // the first two got no answer: any reply on this socket would have been read here
		}
		t.Fatalf("a reply to a mismatched request arrived")
	}
	if st := a.Stats(); st["proxydhcp_silent_arch-mismatch"] != 1 || st["proxydhcp_silent_uuid-mismatch"] != 1 {
		t.Errorf("counters after the match: %v", st)
	}
}
