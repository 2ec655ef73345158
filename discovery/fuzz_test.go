package discovery_test

import (
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

// FuzzSeen feeds a list arbitrary typed fields, as proxy DHCP and the boot handler hand
// them over: a zero MAC is dropped, and every other field is stored exactly in its canonical
// form (the UUID's text, the arch's name, the relay unmapped, without a zone or none).
func FuzzSeen(f *testing.F) {
	// What real firmware and iPXE send (see shared/PEERS.md), and near misses.
	f.Add([]byte{0x52, 0x54, 0, 0, 0, 1}, []byte("LLED\x001\x10\x80R\xb4\xc0ONK2"), uint16(7), true, "0.0.0.0", uint8(0))
	f.Add([]byte{0x52, 0x54, 0, 0, 0, 1}, make([]byte, 16), uint16(0), false, "", uint8(0))
	f.Add([]byte{0x52, 0x54, 0, 0, 0, 1}, []byte{}, uint16(16), true, "198.51.100.1", uint8(1))
	f.Add(make([]byte, 6), []byte{}, uint16(65535), true, "fe80::1%eth0", uint8(0))
	f.Add([]byte{0x3c, 0xec, 0xef, 0x12, 0x34, 0x56}, []byte{}, uint16(11), true, "::ffff:203.0.113.5", uint8(2))
	f.Fuzz(func(t *testing.T, macb, uuidb []byte, arch uint16, hasArch bool, relay string, via uint8) {
		var mac hwid.MAC
		copy(mac[:], macb)
		var uuid hwid.UUID
		copy(uuid[:], uuidb)
		r, _ := netip.ParseAddr(relay)
		l, err := discovery.NewList(discovery.Config{Clock: newFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		s := discovery.Sighting{MAC: mac, UUID: uuid, Arch: hwid.Arch(arch), HasArch: hasArch, Relay: r, Via: discovery.Via(via % 3)}
		recorded := l.Seen(s)
		if recorded != !mac.IsZero() {
			t.Fatalf("Seen(%v) = %v", mac, recorded)
		}
		snap := l.Snapshot()
		if snap.Digest != discovery.DigestOf(snap.Entries) {
			t.Fatalf("snapshot digest does not match its entries")
		}
		if mac.IsZero() {
			if len(snap.Entries) != 0 {
				t.Fatalf("zero MAC stored: %+v", snap.Entries)
			}
			return
		}
		if len(snap.Entries) != 1 {
			t.Fatalf("%d entries after one sighting", len(snap.Entries))
		}
		e := snap.Entries[0]
		checkWellFormed(t, e)
		if e.MAC != mac {
			t.Errorf("MAC %v stored as %v", mac, e.MAC)
		}
		wantUUID := ""
		if uuid != (hwid.UUID{}) {
			wantUUID = uuid.String()
		}
		if e.ProductUUID != wantUUID {
			t.Errorf("UUID %v stored as %q, want %q", uuid, e.ProductUUID, wantUUID)
		}
		wantArch := ""
		if hasArch {
			wantArch = hwid.Arch(arch).String()
		}
		if e.Arch != wantArch {
			t.Errorf("arch %d stored as %q, want %q", arch, e.Arch, wantArch)
		}
		if back, ok := hwid.ParseArch(e.Arch); hasArch && (!ok || back != hwid.Arch(arch)) {
			t.Errorf("arch %q does not parse back to %d", e.Arch, arch)
		}
		want := r.Unmap()
		if r.Zone() != "" || r.IsMulticast() || want.IsUnspecified() || want.Is6() && want.IsLinkLocalUnicast() {
			want = netip.Addr{}
		}
		if e.Relay != want {
			t.Errorf("relay %v stored as %v, want %v", r, e.Relay, want)
		}
	})
}
