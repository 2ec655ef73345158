package bootserver_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/sitelink"
)

type sinkFunc func(bootevents.Event)

func (f sinkFunc) Emit(e bootevents.Event) { f(e) }

// TestEntries (S3): proxy DHCP and /boot/ answer a live entry only for the machine it
// names; another machine with that MAC is refused, counted by where and why, and its
// refusal is an event naming the mismatch.
func TestEntries(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := sitelink.OpenEntryStore(filepath.Join(t.TempDir(), "entries.json"), clk)
	if err != nil {
		t.Fatal(err)
	}
	mac := hwid.MAC{0x52, 0x54, 0, 0, 0, 7}
	if err := store.Put(sitelink.ProxyDhcpEntry{MAC: mac, Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var events []bootevents.Event
	answered := 0
	e := &bootserver.Entries{Store: store, Clock: clk, Events: sinkFunc(func(ev bootevents.Event) { events = append(events, ev) }),
		OnAnswer: func(*proxydhcp.Request, sitelink.ParsedEntry) { answered++ }}
	ctx := context.Background()

	if d := e.ServeDHCP(ctx, &proxydhcp.Request{MAC: hwid.MAC{0x52, 0x54, 0, 0, 0, 8}}); d != proxydhcp.Silence(proxydhcp.ReasonUnknown) {
		t.Errorf("an unknown MAC: %+v", d)
	}
	if d := e.ServeDHCP(ctx, &proxydhcp.Request{MAC: mac, Arch: hwid.ArchX86_64EFI, HasArch: true}); d != proxydhcp.Answer() || answered != 1 {
		t.Errorf("the entry's machine: %+v, Answer called %d times", d, answered)
	}
	bios := &proxydhcp.Request{MAC: mac, Arch: hwid.ArchBIOS, HasArch: true, Port: proxydhcp.PortBoot}
	if d := e.ServeDHCP(ctx, bios); d != proxydhcp.Silence(proxydhcp.ReasonDeclined) || answered != 1 {
		t.Errorf("a BIOS machine with a UEFI entry: %+v", d)
	}
	if ent, ok, err := e.Entry(ctx, ipxe.Query{MAC: mac, Arch: hwid.ArchX86_64EFI, HasArch: true}); !ok || err != nil || ent.Workflow != "wf" {
		t.Errorf("Entry for the machine: %+v, %v, %v", ent, ok, err)
	}
	if _, ok, err := e.Entry(ctx, ipxe.Query{MAC: mac, Arch: hwid.ArchBIOS, HasArch: true, Remote: netip.MustParseAddr("192.0.2.9")}); ok || !errors.Is(err, ipxe.ErrMismatch) {
		t.Errorf("Entry for a BIOS machine: %v, %v; want ErrMismatch", ok, err)
	}
	// A Secure Boot machine (the site's default) while the host has no chain: its
	// firmware gets silence, counted; its iPXE (the entry says iPXE later) is answered.
	e.SecureBootDefault = true
	fw := &proxydhcp.Request{MAC: mac, Arch: hwid.ArchX86_64EFI, HasArch: true}
	if d := e.ServeDHCP(ctx, fw); d != proxydhcp.Silence(proxydhcp.ReasonDeclined) {
		t.Errorf("a Secure Boot machine's firmware without a chain: %+v", d)
	}
	if d := e.ServeDHCP(ctx, &proxydhcp.Request{MAC: mac, Arch: hwid.ArchX86_64EFI, HasArch: true, IPXE: true}); d != proxydhcp.Answer() {
		t.Errorf("iPXE of a Secure Boot machine: %+v", d)
	}
	if st := e.Stats(); st != (bootserver.MismatchStats{DHCPArch: 1, HTTPArch: 1, SecureBootUnavailable: 1}) {
		t.Errorf("Stats %+v", st)
	}
	if err := metric.Check(e.Stats().Samples()); err != nil {
		t.Error(err)
	}
	if len(events) != 2 || events[0].Stage != bootevents.StageBoot4011 || events[0].Reason != "arch-mismatch" ||
		events[1].Stage != bootevents.StageScript || events[1].Outcome != bootevents.OutcomeRefused || events[0].Time.IsZero() {
		t.Errorf("events %+v", events)
	}
}

// TestEntriesNoOption97 (issue quirk "No option 97", pixiecore #21): a machine whose
// firmware sends no client GUID is answered on its MAC and arch when its entry names a UUID,
// and the answer says so (proxydhcp.Decision.NoUUID); a request that carries the UUID, or an
// entry without one, is answered plainly.
func TestEntriesNoOption97(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := sitelink.OpenEntryStore(filepath.Join(t.TempDir(), "entries.json"), clk)
	if err != nil {
		t.Fatal(err)
	}
	withUUID := hwid.MAC{0x52, 0x54, 0, 0, 0, 9}
	plain := hwid.MAC{0x52, 0x54, 0, 0, 0, 10}
	uuid := "4c4c4544-0042-3510-8051-b3c04f4e4d32"
	for _, ent := range []sitelink.ProxyDhcpEntry{
		{MAC: withUUID, UUID: uuid, Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: clk.Now().Add(time.Hour)},
		{MAC: plain, Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: clk.Now().Add(time.Hour)},
	} {
		if err := store.Put(ent); err != nil {
			t.Fatal(err)
		}
	}
	u, err := hwid.ParseUUID(uuid)
	if err != nil {
		t.Fatal(err)
	}
	e := &bootserver.Entries{Store: store, Clock: clk}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  proxydhcp.Request
		want proxydhcp.Decision
	}{
		{"no option 97, entry names a UUID", proxydhcp.Request{MAC: withUUID, Arch: hwid.ArchX86_64EFI, HasArch: true}, proxydhcp.Decision{Answer: true, NoUUID: true}},
		{"option 97 matches", proxydhcp.Request{MAC: withUUID, Arch: hwid.ArchX86_64EFI, HasArch: true, UUID: u, HasUUID: true}, proxydhcp.Answer()},
		{"no option 97, entry without UUID", proxydhcp.Request{MAC: plain, Arch: hwid.ArchX86_64EFI, HasArch: true}, proxydhcp.Answer()},
	} {
		if got := e.ServeDHCP(ctx, &c.req); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestEntriesFacts: a live entry's arch and UUID are the facts an explanation reads; a
// MAC without one, or whose entry lapsed, has none.
func TestEntriesFacts(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := sitelink.OpenEntryStore(filepath.Join(t.TempDir(), "entries.json"), clk)
	if err != nil {
		t.Fatal(err)
	}
	mac, other := hwid.MAC{0x52, 0x54, 0, 0, 0, 7}, hwid.MAC{0x52, 0x54, 0, 0, 0, 8}
	const uuid = "4c4c4544-0051-3010-8052-b4c04f4e3732"
	if err := store.Put(sitelink.ProxyDhcpEntry{MAC: mac, UUID: uuid, Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e := &bootserver.Entries{Store: store, Clock: clk}
	f := e.Facts(mac)
	if !f.Entry || !f.HasEntryArch || f.EntryArch != hwid.ArchX86_64EFI || !f.HasEntryUUID || f.EntryUUID.String() != uuid {
		t.Errorf("facts of a live entry: %+v", f)
	}
	if f := e.Facts(other); f.Entry || f.HasEntryArch || f.HasEntryUUID {
		t.Errorf("facts of a MAC without an entry: %+v", f)
	}
	clk.Advance(2 * time.Hour)
	if f := e.Facts(mac); f.Entry {
		t.Errorf("facts of a lapsed entry: %+v", f)
	}
}
