package sitelink_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/metric"
	"github.com/bettercompute/siteboot/sitelink"
)

func TestSamples(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := sitelink.OpenEntryStore(filepath.Join(t.TempDir(), "entries.json"), clk)
	if err != nil {
		t.Fatal(err)
	}
	e := sitelink.ProxyDhcpEntry{MAC: hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, Arch: sitelink.ArchX86UEFI, Workflow: "wf", NotAfter: clk.Now().Add(time.Hour)}
	if err := store.Put(e); err != nil {
		t.Fatal(err)
	}
	s := append(store.Samples(), sitelink.HeartbeatStats{Errors: 3}.Samples()...)
	if err := metric.Check(s); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, x := range s {
		got[x.Name] = x.Value
	}
	if got["boot_entries"] != 1 || got["boot_entries_damaged"] != 0 || got["control_sync_errors_total"] != 3 || len(got) != 3 {
		t.Errorf("samples %v", got)
	}
	clk.Advance(2 * time.Hour) // the entry lapses
	if n := store.Samples()[0].Value; n != 0 {
		t.Errorf("boot_entries %d after the entry lapsed, want 0", n)
	}
}

func TestSecureBootBy(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		arch, sanboot string
		word          *bool
		def, want     bool
	}{
		{sitelink.ArchX86UEFI, "", nil, true, true}, {sitelink.ArchX86UEFI, "", nil, false, false},
		{sitelink.ArchBIOS, "", nil, true, false}, {sitelink.ArchX86UEFI, "ab", nil, true, false},
		{sitelink.ArchX86UEFI, "", &no, true, false}, {sitelink.ArchBIOS, "", &yes, false, true},
	} {
		var p sitelink.ParsedEntry
		p.Arch, p.SanbootSHA256, p.SecureBoot = tc.arch, tc.sanboot, tc.word
		if got := p.SecureBootBy(tc.def); got != tc.want {
			t.Errorf("%+v: SecureBootBy = %v", tc, got)
		}
	}
}
