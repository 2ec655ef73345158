package e2e_test

import (
	"context"
	"fmt"
	"github.com/bettercompute/siteboot/sitelink"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/assertion"
	"github.com/bettercompute/siteboot/hwid"
)

// TestE2E_UUIDSpellingsBIOS: SeaBIOS with QEMU's iPXE ROM boots whichever of its UUID's
// three spellings its entry holds (uuidSpellings).
func TestE2E_UUIDSpellingsBIOS(t *testing.T) {
	t.Parallel()
	uuidSpellings(t, fwBIOS, 0x50, sitelink.ArchBIOS)
}

// TestE2E_UUIDSpellingsUEFIPXE: OVMF's EDK2 PXE, then ipxe.efi, the same.
func TestE2E_UUIDSpellingsUEFIPXE(t *testing.T) {
	t.Parallel()
	uuidSpellings(t, fwUEFIPXE, 0x54, sitelink.ArchX86UEFI)
}

var spellingNames = [3]string{"as given", "SMBIOS order", "reversed (IPMI)"}

// uuidSpellings runs three machines whose UUIDs QEMU gives as SMBIOS type 1 fields, each
// with a boot entry that holds its UUID in one of the three spellings (as given, first three
// fields byte-swapped, all 16 bytes reversed). The firmware reports one spelling in option
// 97 and iPXE one in its query, so two of the three entries hold another: every machine
// must still boot (proxy DHCP answers, the script is served), its assertion must carry the
// entry's spelling and verify for a machine that reports any of the three, and no UUID
// mismatch may be counted.
//
// Two machines run at a time (machineSlots); each boot is bounded by bootTimeout, and the
// third machine starts once the first has powered off, within another bootTimeout.
func uuidSpellings(t *testing.T, fw firmware, first byte, arch string) {
	l := newLab(t, 2)
	a := l.startAgent("agent-a", 1)
	l.waitActive(a)
	var ms []*machine
	var entries []sitelink.ProxyDhcpEntry
	for i := range 3 {
		m := newMachine(fmt.Sprintf("uuid-%d-%s", i, fw), fw, first+byte(i))
		m.entryUUID = m.uuid.Spellings()[i]
		ms = append(ms, m)
		entries = append(entries, m.entry(arch))
	}
	l.plane.PrepareRamdisk(a.name, entries)
	l.waitReady(a.name)

	o := bootOpts{smbiosUUID: true}
	start := time.Now()
	l.powerOn(ms[0], o)
	l.powerOn(ms[1], o)
	for i, m := range ms {
		words := m.waitCmdline(t)
		l.checkBooted(m, words, a)
		text := param(words, "bc.assertion")
		for k, reported := range m.uuid.Spellings() {
			v := &assertion.Verifier{Keys: l.keys, Leases: l.plane.LeaseChecker(), Replay: &assertion.MemoryReplayCache{}}
			if _, err := v.Verify(context.Background(), text, assertion.Join{Site: siteID, MACs: m.nics, UUID: reported}); err != nil {
				t.Errorf("%s: the assertion (entry %s, %s) refused for a machine reporting %s (%s): %v",
					m.name, m.entryUUID, spellingNames[i], reported, spellingNames[k], err)
			}
		}
		opt97 := l.option97(m.mac)
		if len(opt97) == 0 {
			t.Errorf("%s: no DHCP request with option 97 on the wire", m.name)
		}
		for _, u := range opt97 {
			if !hwid.SameMachine(u, m.uuid) {
				t.Errorf("%s: option 97 carried %s, not a spelling of QEMU's %s", m.name, u, m.uuid)
			}
		}
		t.Logf("%s (%s): entry holds %s (%s); option 97 carried %v (%s), iPXE's query uuid %v (%s); QEMU's %s; power-on to the ramdisk's command line %v",
			m.name, fw, m.entryUUID, spellingNames[i], opt97, spelled(m.uuid, opt97), l.queryUUIDs(a, m.mac), spelled(m.uuid, l.queryUUIDs(a, m.mac)), m.uuid, timeSince(m.start))
		if next := i + 2; next < len(ms) {
			select {
			case <-m.p.Done():
			case <-time.After(bootTimeout):
				t.Fatalf("%s printed its command line and never powered off within %v", m.name, bootTimeout)
			}
			l.powerOn(ms[next], o)
		}
	}
	mt := a.metrics()
	for _, where := range []string{"dhcp", "http"} {
		if n := mt.sum("siteboot_boot_mismatch_total", `where="`+where+`"`, `reason="uuid-mismatch"`); n != 0 {
			t.Errorf("siteboot_boot_mismatch_total{where=%s,reason=uuid-mismatch} = %v, want 0", where, n)
		}
	}
	t.Logf("%s: three machines, one per spelling, booted in %v", fw, timeSince(start))
}

// spelled names which spellings of u the UUIDs are.
func spelled(u hwid.UUID, us []hwid.UUID) string {
	var names []string
	for _, x := range us {
		name := "no spelling"
		for i, sp := range u.Spellings() {
			if x == sp {
				name = spellingNames[i]
				break
			}
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// option97 returns the distinct UUIDs (RFC 4578 option 97, type 0) of the DHCP requests
// the machine mac sent on the segment, in the order first seen.
func (l *lab) option97(mac hwid.MAC) []hwid.UUID {
	var out []hwid.UUID
	for _, p := range l.udpPayloads("udp and (dst port 67 or dst port 4011) and " + bootpChaddr(mac)) {
		// BOOTP's fixed 236 bytes and the magic cookie, then the options.
		if len(p) < 240 {
			continue
		}
		opts := p[240:]
		for len(opts) > 0 && opts[0] != 255 {
			if opts[0] == 0 {
				opts = opts[1:]
				continue
			}
			if len(opts) < 2 || len(opts) < 2+int(opts[1]) {
				break
			}
			code, val := opts[0], opts[2:2+int(opts[1])]
			opts = opts[2+int(opts[1]):]
			if code != 97 || len(val) != 17 || val[0] != 0 {
				continue
			}
			u, _ := hwid.UUIDFromBytes(val[1:])
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// queryUUIDs returns the distinct uuid parameters of the machine mac's script requests to a
// on the segment (iPXE's ${uuid}; the MAC as ${netX/mac:hexhyp} spells it).
func (l *lab) queryUUIDs(a *labAgent, mac hwid.MAC) []hwid.UUID {
	var out []hwid.UUID
	for _, r := range l.httpRequests(a.host.IP) {
		path, ok := strings.CutPrefix(r, "GET ")
		if !ok {
			continue
		}
		u, err := url.Parse(path)
		if err != nil || u.Path != "/boot/ipxe" || u.Query().Get("mac") != hexhyp(mac) {
			continue
		}
		if id, err := hwid.ParseUUID(u.Query().Get("uuid")); err == nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
