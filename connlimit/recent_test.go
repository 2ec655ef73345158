package connlimit_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/connlimit"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// TestRecent: an address is preferred for a window from its last Add, in any spelling
// (IPv4-mapped, with a zone), and the store holds at most Max: the lapsed, else the one
// added longest ago, give way.
func TestRecent(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	type step struct {
		add     netip.Addr
		advance time.Duration
	}
	for _, tc := range []struct {
		name    string
		max     int
		steps   []step
		want    map[netip.Addr]bool
		wantLen int
	}{
		{
			name:  "within the window",
			steps: []step{{add: a}, {advance: time.Minute - 1}},
			want:  map[netip.Addr]bool{a: true, b: false}, wantLen: 1,
		},
		{
			name:  "lapsed at the window",
			steps: []step{{add: a}, {advance: time.Minute}},
			want:  map[netip.Addr]bool{a: false}, wantLen: 1,
		},
		{
			name:  "an Add renews",
			steps: []step{{add: a}, {advance: 50 * time.Second}, {add: a}, {advance: 50 * time.Second}},
			want:  map[netip.Addr]bool{a: true}, wantLen: 1,
		},
		{
			name:  "IPv4-mapped and zoned spellings are one address",
			steps: []step{{add: netip.MustParseAddr("::ffff:192.0.2.1")}, {add: netip.MustParseAddr("fe80::1%eth0")}},
			want:  map[netip.Addr]bool{a: true, netip.MustParseAddr("fe80::1"): true, netip.MustParseAddr("fe80::1%eth1"): true}, wantLen: 2,
		},
		{
			name:  "invalid ignored",
			steps: []step{{add: netip.Addr{}}},
			want:  map[netip.Addr]bool{{}: false}, wantLen: 0,
		},
		{
			name:  "full: the one added longest ago gives way",
			max:   2,
			steps: []step{{add: a}, {add: b}, {add: a}, {add: c}},
			want:  map[netip.Addr]bool{a: true, b: false, c: true}, wantLen: 2,
		},
		{
			name:  "the lapsed give way before anything live",
			max:   3,
			steps: []step{{add: a}, {add: b}, {advance: 2 * time.Minute}, {add: c}},
			want:  map[netip.Addr]bool{a: false, b: false, c: true}, wantLen: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(t0)
			r, err := connlimit.NewRecent(connlimit.RecentConfig{Window: time.Minute, Max: tc.max, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				if s.advance > 0 {
					clk.Advance(s.advance)
				} else {
					r.Add(s.add)
				}
			}
			for addr, want := range tc.want {
				if got := r.Preferred(addr); got != want {
					t.Errorf("Preferred(%v) = %v, want %v", addr, got, want)
				}
			}
			if r.Len() != tc.wantLen {
				t.Errorf("Len %d, want %d", r.Len(), tc.wantLen)
			}
		})
	}
}

// TestRecentWallClockStep: the window is measured on the monotonic clock, so a wall clock
// stepped forward or back neither ends nor extends it.
func TestRecentWallClockStep(t *testing.T) {
	clk := clocktest.New(t0)
	r, _ := connlimit.NewRecent(connlimit.RecentConfig{Window: time.Minute, Clock: clk})
	a := netip.MustParseAddr("192.0.2.1")
	r.Add(a)
	clk.Set(t0.Add(time.Hour))
	if !r.Preferred(a) {
		t.Error("a wall clock stepped forward ended the window")
	}
	clk.Set(t0.Add(-time.Hour))
	clk.Advance(time.Minute)
	if r.Preferred(a) {
		t.Error("a wall clock stepped back extended the window")
	}
}

func TestRecentConfig(t *testing.T) {
	for _, c := range []connlimit.RecentConfig{{Window: -1}, {Max: -1}} {
		if _, err := connlimit.NewRecent(c); !errors.Is(err, connlimit.ErrLimits) {
			t.Errorf("NewRecent(%+v): %v, want ErrLimits", c, err)
		}
	}
	var nilRecent *connlimit.Recent
	nilRecent.Add(netip.MustParseAddr("192.0.2.1"))
	if nilRecent.Preferred(netip.MustParseAddr("192.0.2.1")) || nilRecent.Len() != 0 {
		t.Error("a nil Recent prefers something")
	}
}

// TestRecentBounded: a flood of distinct addresses never holds more than Max, and
// concurrent Add and Preferred are race-free.
func TestRecentBounded(t *testing.T) {
	clk := clocktest.New(t0)
	r, _ := connlimit.NewRecent(connlimit.RecentConfig{Max: 64, Clock: clk})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				a := netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i)})
				r.Add(a)
				r.Preferred(a)
			}
		})
	}
	wg.Wait()
	if r.Len() > 64 {
		t.Fatalf("Len %d, more than Max 64", r.Len())
	}
	if !r.Preferred(netip.AddrFrom4([4]byte{10, 0, 3, 231})) && !r.Preferred(netip.AddrFrom4([4]byte{10, 1, 3, 231})) &&
		!r.Preferred(netip.AddrFrom4([4]byte{10, 2, 3, 231})) && !r.Preferred(netip.AddrFrom4([4]byte{10, 3, 3, 231})) {
		t.Error("no goroutine's last address is preferred")
	}
}

// TestRecentWithListener: a Recent set as a Listener's Preferrer lets its addresses take
// the reserve.
func TestRecentWithListener(t *testing.T) {
	clk := clocktest.New(t0)
	r, _ := connlimit.NewRecent(connlimit.RecentConfig{Clock: clk})
	rg := newRig(t, connlimit.Limits{Total: 2, Reserve: 1, PerSource: 2})
	rg.l.SetPreferred(r)
	r.Add(netip.MustParseAddr("127.0.0.1"))
	if other := rg.dial("127.0.0.2"); !admitted(t, other) {
		t.Fatal("a source that is not preferred was refused the room outside the reserve")
	}
	if machine := rg.dial("127.0.0.1"); !admitted(t, machine) {
		t.Fatal("a preferred source was refused the reserve")
	}
	if s := rg.l.Stats(); s.AcceptedPreferred != 1 || s.Accepted != 2 {
		t.Errorf("stats %+v, want 2 accepted, 1 preferred", s)
	}
}
