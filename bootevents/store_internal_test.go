package bootevents

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/google/go-cmp/cmp"
)

// TestIndexAgainstMap: the open-addressing index finds what a map holds through any run
// of sets and removals, with hashes chosen to collide and to wrap around its table.
func TestIndexAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x index
	held := map[uint32]int32{}  // key -> slot
	keyOf := map[int32]uint32{} // slot -> key: each slot holds one key
	hash := func(k uint32) uint32 { return k % 37 * 0x9e3779b1 >> 3 }
	for step := range 20000 {
		k := uint32(r.IntN(300))
		holds := func(s int32) bool { return keyOf[s] == k }
		switch r.IntN(3) {
		case 0, 1:
			if _, ok := held[k]; ok {
				break
			}
			s := int32(step)
			keyOf[s], held[k] = k, s
			x.set(hash(k), s, holds)
		case 2:
			if s, ok := held[k]; ok {
				x.remove(hash(k), s)
				delete(held, k)
				delete(keyOf, s)
			}
		}
		if x.n != len(held) {
			t.Fatalf("step %d: n = %d, map holds %d", step, x.n, len(held))
		}
		if step%97 == 0 {
			for k := range uint32(300) {
				s, _, ok := x.lookup(hash(k), func(s int32) bool { return keyOf[s] == k })
				want, wok := held[k]
				if ok != wok || (ok && s != want) {
					t.Fatalf("step %d: lookup(%d) = %d, %v; want %d, %v", step, k, s, ok, want, wok)
				}
			}
		}
	}
	if len(x.tab) > 4*len(held)+64 {
		t.Errorf("table of %d entries for %d keys", len(x.tab), len(held))
	}
}

// TestViewRoundTrip: a machine's data reads back as the view it was written from.
func TestViewRoundTrip(t *testing.T) {
	id1, id2 := BootIDOf("one"), BootIDOf("two")
	views := []view{
		{},
		{hasUUID: true, uuid: hwid.UUID{1, 2, 3, 15: 16}, addrs: [AddrsPerMachine]netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7")},
			boots: []bootView{
				{start: -5, last: 1 << 62, ids: [IDsPerBoot]BootID{id1, id2, id1, id2}, home: netip.MustParseAddr("2001:db8::7"), n: 3, dropped: 1<<32 - 1, progressed: true, recs: []byte("abc")},
				{start: 1_800_000_000_000_000_000, last: 1_800_000_000_000_000_000, recs: []byte{}},
				{start: 7, last: 9, ids: [IDsPerBoot]BootID{id2}, home: netip.MustParseAddr("198.51.100.1"), n: 1, recs: make([]byte, 300)},
			}},
	}
	for i, v := range views {
		data := v.encode(nil)
		var got view
		got.decode(data)
		if diff := cmp.Diff(v, got, cmp.AllowUnexported(view{}, bootView{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
			cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); diff != "" {
			t.Errorf("view %d (-want +got):\n%s", i, diff)
		}
		for _, a := range v.addrs {
			if a.IsValid() && !hasAddr(data, a) {
				t.Errorf("view %d: hasAddr(%v) = false", i, a)
			}
		}
		if hasAddr(data, netip.MustParseAddr("203.0.113.1")) {
			t.Errorf("view %d: hasAddr of an address it does not hold", i)
		}
		if want := len(v.boots) > 0; hasID(data, id2) != want || hasID(data, BootIDOf("three")) {
			t.Errorf("view %d: hasID(two) = %v, want %v; or hasID(three)", i, !want, want)
		}
	}
}
