package bootevents_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
)

func TestExplain(t *testing.T) {
	type ev = bootevents.Event
	ok, refused := bootevents.OutcomeOK, bootevents.OutcomeRefused
	uuid := hwid.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	entryUUID := hwid.UUID{9: 9}
	tests := []struct {
		name     string
		events   []ev
		facts    bootevents.Facts
		wantCode string
		wantLine string // a part of the line
	}{
		{"no dhcp", nil, bootevents.Facts{Entry: true}, bootevents.DiagNoDHCP, "no DHCP request seen from this MAC on any interface: check the relay or the VLAN"},
		{"unknown", []ev{{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "unknown"}}, bootevents.Facts{},
			bootevents.DiagUnknown, "unknown machine: it asked over DHCPv4 but has no boot entry here"},
		{"fenced with holder", []ev{{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "fenced"}}, bootevents.Facts{Entry: true, FenceEpoch: 3, FenceHolder: "agent-b"},
			bootevents.DiagFenced, "fenced: this agent does not hold the boot lease (epoch 3 held by agent-b)"},
		{"arch", []ev{{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "arch-mismatch", Arch: hwid.ArchX86_64EFI, HasArch: true}},
			bootevents.Facts{Entry: true, EntryArch: hwid.ArchBIOS, HasEntryArch: true},
			bootevents.DiagArchMismatch, "entry's arch BIOS, machine asked as x86-64 UEFI"},
		{"host's reason before the server's declined", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "arch-mismatch", Arch: hwid.ArchX86_64EFI, HasArch: true},
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "declined"},
		}, bootevents.Facts{Entry: true, EntryArch: hwid.ArchBIOS, HasEntryArch: true},
			bootevents.DiagArchMismatch, "entry's arch BIOS, machine asked as x86-64 UEFI"},
		{"uuid", []ev{{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "uuid-mismatch", UUID: uuid, HasUUID: true}},
			bootevents.Facts{Entry: true, EntryUUID: entryUUID, HasEntryUUID: true},
			bootevents.DiagUUIDMismatch, "machine's SMBIOS UUID " + uuid.String() + " is not its entry's " + entryUUID.String()},
		{"nonce from another address", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok, IPXE: true},
			{Stage: bootevents.StageBind, Outcome: refused, Reason: "nonce-other-address", Peer: netip.MustParseAddrPort("192.0.2.77:40000")},
		}, bootevents.Facts{Entry: true}, bootevents.DiagNonceOtherAddress, "script refused: the nonce was presented from 192.0.2.77, another address"},
		{"the script's unbound after the binding's reason", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok, IPXE: true},
			{Stage: bootevents.StageBind, Outcome: refused, Reason: "nonce-other-address", Peer: netip.MustParseAddrPort("192.0.2.77:40000")},
			{Stage: bootevents.StageScript, Outcome: refused, Reason: "unbound", Peer: netip.MustParseAddrPort("192.0.2.77:40000")},
		}, bootevents.Facts{Entry: true}, bootevents.DiagNonceOtherAddress, "the nonce was presented from 192.0.2.77, another address"},
		{"the script's mismatch after the host's reason", []ev{
			{Stage: bootevents.StageScript, Outcome: refused, Reason: "arch-mismatch", Arch: hwid.ArchX86_64EFI, HasArch: true},
			{Stage: bootevents.StageScript, Outcome: refused, Reason: "mismatch"},
		}, bootevents.Facts{Entry: true, EntryArch: hwid.ArchBIOS, HasEntryArch: true},
			bootevents.DiagArchMismatch, "entry's arch BIOS, machine asked as x86-64 UEFI"},
		{"the site's server's request ignored after unknown", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "unknown"},
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "ignored"},
		}, bootevents.Facts{}, bootevents.DiagUnknown, "unknown machine: it asked over DHCPv4 but has no boot entry here"},
		{"4011 then no tftp", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok},
			{Stage: bootevents.StageBoot4011, Outcome: ok},
		}, bootevents.Facts{Entry: true}, bootevents.DiagNoTFTPAfter4011, "answered at 4011 but the firmware never asked for the boot file over TFTP"},
		{"dhcp then no tftp", []ev{{Stage: bootevents.StageDHCPv4, Outcome: ok, Arch: hwid.ArchBIOS, HasArch: true}},
			bootevents.Facts{Entry: true}, bootevents.DiagNoTFTP, "answered DHCP but the firmware never asked for the boot file over TFTP"},
		{"tftp then no script", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok},
			{Stage: bootevents.StageTFTP, Outcome: ok, Detail: "undionly.kpxe"},
		}, bootevents.Facts{Entry: true}, bootevents.DiagNoScript, `the boot file "undionly.kpxe" went out over TFTP but no script request followed`},
		{"refusal overcome by a later success", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok},
			{Stage: bootevents.StageTFTP, Outcome: refused, Reason: "not-found", Detail: "autoexec.ipxe"},
			{Stage: bootevents.StageTFTP, Outcome: ok, Detail: "undionly.kpxe", Bytes: 70000},
			{Stage: bootevents.StageDHCPv4, Outcome: ok, IPXE: true},
			{Stage: bootevents.StageScript, Outcome: ok},
			{Stage: bootevents.StageAssertion, Outcome: ok},
		}, bootevents.Facts{Entry: true}, bootevents.DiagBooted, "booted: DHCP to assertion in 5s: dhcpv4 +0s, tftp refused not-found autoexec.ipxe +1s, tftp undionly.kpxe +2s (70000 B)"},
		// The site's DHCP server sends option 60 PXEClient without option 43 (FOG's docs
		// #188): EDK2 asks that offer's next server at 4011, not this agent, and iPXE takes
		// the site's server as its ProxyDHCP server. Seen in e2e TestE2E_SiteDHCPOption60*.
		{"uefi pxe answered on 67, never at 4011", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok, Arch: hwid.ArchX86_64EFI, HasArch: true},
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "ignored", Arch: hwid.ArchX86_64EFI, HasArch: true},
		}, bootevents.Facts{Entry: true}, bootevents.DiagNo4011, "never asked this agent at 4011: it took another server's PXE offer (a DHCP server sending option 60 PXEClient without option 43"},
		{"ipxe answered, never chained", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok, Arch: hwid.ArchX86_64EFI, HasArch: true},
			{Stage: bootevents.StageBoot4011, Outcome: ok, Arch: hwid.ArchX86_64EFI, HasArch: true},
			{Stage: bootevents.StageTFTP, Outcome: ok, Detail: "ipxe.efi"},
			{Stage: bootevents.StageDHCPv4, Outcome: ok, IPXE: true, Arch: hwid.ArchX86_64EFI, HasArch: true},
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "ignored", IPXE: true, Arch: hwid.ArchX86_64EFI, HasArch: true},
		}, bootevents.Facts{Entry: true}, bootevents.DiagIPXENoChain, "iPXE takes that server as its ProxyDHCP server"},
		{"the site's request ignored after an answer decides nothing", []ev{
			{Stage: bootevents.StageDHCPv4, Outcome: ok, Arch: hwid.ArchBIOS, HasArch: true},
			{Stage: bootevents.StageDHCPv4, Outcome: refused, Reason: "ignored"},
		}, bootevents.Facts{Entry: true}, bootevents.DiagNoTFTP, "answered DHCP but the firmware never asked for the boot file over TFTP"},
		{"other refusal", []ev{{Stage: bootevents.StageCache, Outcome: refused, Reason: "grant-expired"}}, bootevents.Facts{Entry: true},
			bootevents.DiagRefused, "cache refused: grant-expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTimeline(t, bootevents.Config{})
			for i, e := range tt.events {
				e.MAC = macA
				e.Time = at(float64(i))
				tl.Emit(e)
			}
			d := tl.Explain(macA, tt.facts)
			if d.Code != tt.wantCode || !strings.Contains(d.Line, tt.wantLine) {
				t.Errorf("Explain = %q %q\nwant code %q, line containing %q", d.Code, d.Line, tt.wantCode, tt.wantLine)
			}
			if len(d.Path) != len(tt.events) {
				t.Errorf("Path has %d steps, want %d", len(d.Path), len(tt.events))
			}
		})
	}
}
