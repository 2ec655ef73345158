package discovery_test

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/discovery"
)

// The rules of the list, written independently of its code.
var (
	refMACColon = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)
	refMACDash  = regexp.MustCompile(`^[0-9A-Fa-f]{2}(-[0-9A-Fa-f]{2}){5}$`)
	refUUID     = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
	refArch     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
)

func refRelay(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Unmap().IsUnspecified() {
		return netip.Addr{}
	}
	return a.Unmap()
}

// FuzzSeen feeds raw field strings to a list: nothing malformed is ever stored, and every
// well-formed field is stored in its canonical form.
func FuzzSeen(f *testing.F) {
	// What real firmware and iPXE send (see shared/PEERS.md), and near misses.
	f.Add("52:54:00:00:00:01", "4c4c4544-0031-3510-8052-b4c04f4e4b32", "7", "0.0.0.0", uint8(0))
	f.Add("52:54:00:00:00:01", "00000000-0000-0000-0000-000000000000", "0", "", uint8(0))
	f.Add("52-54-00-00-00-01", "4C4C4544-0031-3510-8052-B4C04F4E4B32", "16", "198.51.100.1", uint8(1))
	f.Add("52:54:00:00:00:01", "${uuid}", "${buildarch}", "${net0/ip}", uint8(1))
	f.Add("52:54:00:00:00:0", "4c4c4544003135108052b4c04f4e4b32", "x86_64 efi", "fe80::1%eth0", uint8(0))
	f.Add("52:54:00:00:00:01", "4c4c4544-0031-3510-8052-b4c04f4e4b32\x00", "X86_64_EFI", "::ffff:203.0.113.5", uint8(0))
	f.Fuzz(func(t *testing.T, mac, uuid, arch, relay string, via uint8) {
		l, err := discovery.NewList(discovery.Config{Clock: newFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		s := discovery.Sighting{MAC: mac, ProductUUID: uuid, Arch: arch, Relay: relay, Via: discovery.Via(via % 3)}
		recorded := l.Seen(s)
		macOK := refMACColon.MatchString(mac) || refMACDash.MatchString(mac)
		if recorded != macOK {
			t.Fatalf("Seen(%q) = %v, want %v", mac, recorded, macOK)
		}
		snap := l.Snapshot()
		if snap.Digest != discovery.DigestOf(snap.Entries) {
			t.Fatalf("snapshot digest does not match its entries")
		}
		if !macOK {
			if len(snap.Entries) != 0 {
				t.Fatalf("malformed MAC %q stored: %+v", mac, snap.Entries)
			}
			return
		}
		if len(snap.Entries) != 1 {
			t.Fatalf("%d entries after one sighting", len(snap.Entries))
		}
		e := snap.Entries[0]
		checkWellFormed(t, e)
		if e.MAC.String() != strings.ToLower(strings.ReplaceAll(mac, "-", ":")) {
			t.Errorf("MAC %q stored as %s", mac, e.MAC)
		}
		wantUUID := ""
		if refUUID.MatchString(uuid) {
			wantUUID = strings.ToLower(uuid)
		}
		if e.ProductUUID != wantUUID {
			t.Errorf("UUID %q stored as %q, want %q", uuid, e.ProductUUID, wantUUID)
		}
		wantArch := ""
		if refArch.MatchString(arch) {
			wantArch = strings.ToLower(arch) // ASCII only, by the pattern
		}
		if e.Arch != wantArch {
			t.Errorf("arch %q stored as %q, want %q", arch, e.Arch, wantArch)
		}
		if want := refRelay(relay); e.Relay != want {
			t.Errorf("relay %q stored as %v, want %v", relay, e.Relay, want)
		}
	})
}
