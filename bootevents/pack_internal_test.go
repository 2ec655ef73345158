package bootevents

import (
	"net/netip"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// FuzzPackRoundTrip: a Timeline's record of any event, packed against any context, reads
// back as the event, and skip finds where it ends.
func FuzzPackRoundTrip(f *testing.F) {
	f.Add(uint8(StageDHCPv4), uint8(OutcomeOK), int64(14_600_000), uint64(300), int64(534731), uint16(7),
		[]byte{127, 1, 0, 1}, uint16(68), []byte{127, 1, 0, 1}, "ipxe.efi", []byte("nonce"), true, uint8(0), "", true)
	f.Add(uint8(200), uint8(9), int64(-1), uint64(1<<64-1), int64(-1<<63), uint16(0xffff),
		[]byte("\xfe\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"), uint16(546),
		[]byte("\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10"), "détail", []byte{}, false, uint8(3), "eth0", false)
	f.Fuzz(func(t *testing.T, stage, outcome uint8, offset int64, bytes uint64, dur int64, arch uint16,
		peer []byte, port uint16, addr []byte, detail string, nonce []byte, machineUUID bool, uuidByte uint8, zone string, home bool) {
		toAddr := func(b []byte) netip.Addr {
			a, _ := netip.AddrFromSlice(b)
			return a
		}
		e := Event{
			Time: time.Unix(0, 1_800_000_000_000_000_000).Add(time.Duration(offset % (1 << 50))), Stage: Stage(stage), Outcome: Outcome(outcome),
			Bytes: bytes, Duration: time.Duration(dur), Arch: hwid.Arch(arch), HasArch: arch%2 == 0,
			UUID: hwid.UUID{uuidByte}, HasUUID: uuidByte%3 != 0, IPXE: port%2 == 1, BootID: BootIDOf(string(nonce)),
			Detail: Printable(detail, MaxDetail), Addr: toAddr(addr),
		}
		if !e.HasArch {
			e.Arch = 0 // kept only with HasArch, as the UUID with HasUUID
		}
		if !e.HasUUID {
			e.UUID = hwid.UUID{}
		}
		if p := toAddr(peer); p.IsValid() {
			if p.Is6() && len(zone) <= maxZone {
				p = p.WithZone(Printable(zone, maxZone))
			}
			e.Peer = netip.AddrPortFrom(p, port)
		}
		c := packCtx{ids: &[IDsPerBoot]BootID{}, detail: -1}
		if machineUUID {
			c.uuid, c.hasUUID = hwid.UUID{uuidByte}, true
			c.ids[1] = e.BootID
		}
		if home {
			c.home = e.Addr.WithZone("")
		}
		details := []string{"x"}
		if detail != "" && uuidByte%2 == 0 {
			details = append(details, e.Detail)
			c.detail = 1
		}
		start := int64(1_800_000_000_000_000_000)
		b := pack([]byte{0xaa}, &e, start, 0, &c) // after another record's last byte
		c.details = details
		u := unpacker{b: b[1:]}
		var got Event
		if !u.next(&got, hwid.MAC{}, start, []string{""}, &c) || len(u.b) != 0 {
			t.Fatalf("record of %+v does not read back whole (%d bytes left)", e, len(u.b))
		}
		if !got.Time.Equal(e.Time) {
			t.Fatalf("time %v read back, want %v", got.Time, e.Time)
		}
		got.Time = e.Time
		if got != e {
			t.Fatalf("read back\n%+v\nwant\n%+v", got, e)
		}
		if from, to := skip(b[1:], 0); from != 0 || to != len(b)-1 {
			t.Fatalf("skip = %d, %d; want 0, %d", from, to, len(b)-1)
		}
	})
}
