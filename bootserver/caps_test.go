package bootserver_test

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/connlimit"
	"github.com/bettercompute/siteboot/tftpd"
)

func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestCapsFromBudget: the total cap is what the descriptor budget leaves after the
// reserve, the host's own share and TFTP's extra transfers; an HTTPS listener takes three
// quarters of it; both listeners are replaced by capped ones that keep room for the
// preferred addresses.
func TestCapsFromBudget(t *testing.T) {
	const nofile = 4096
	budget := func(reserved int) int {
		n, err := connlimit.Budget{NOFILE: nofile, Reserved: reserved}.Total()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	clk := clocktest.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	t.Run("plain", func(t *testing.T) {
		l := bootserver.Listeners{HTTP: listenTCP(t)}
		got, caps, err := l.Cap(bootserver.CapsConfig{NOFILE: nofile, Window: time.Minute, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if got.HTTP != caps.HTTP || caps.HTTPS != nil || caps.NOFILE != nofile {
			t.Fatalf("listeners %+v, caps %+v", got, caps)
		}
		want := budget(connlimit.DefaultReserved)
		if lim := caps.HTTP.Limits(); lim.Total != want || lim.PerSource != connlimit.DefaultPerSource {
			t.Errorf("limits %+v, want total %d", lim, want)
		}
		a := netip.MustParseAddr("192.0.2.7")
		caps.Prefer.Add(a)
		if !caps.Prefer.Preferred(a) {
			t.Error("an address added is not preferred")
		}
		clk.Advance(2 * time.Minute)
		if caps.Prefer.Preferred(a) {
			t.Error("an address is preferred past the window")
		}
	})
	t.Run("https, metrics and more transfers", func(t *testing.T) {
		l := bootserver.Listeners{HTTP: listenTCP(t), HTTPS: listenTCP(t)}
		got, caps, err := l.Cap(bootserver.CapsConfig{NOFILE: nofile, Reserved: 64, TFTPTransfers: tftpd.DefaultMaxTransfers + 10, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if got.HTTP != caps.HTTP || got.HTTPS != caps.HTTPS || caps.HTTPS == nil {
			t.Fatalf("listeners not replaced: %+v", got)
		}
		total := budget(connlimit.DefaultReserved + 64 + 20)
		if h, s := caps.HTTP.Limits().Total, caps.HTTPS.Limits().Total; h != total/4 || s != total-total/4 {
			t.Errorf("totals http %d, https %d; want %d and %d", h, s, total/4, total-total/4)
		}
	})
	t.Run("no room", func(t *testing.T) {
		if _, _, err := (bootserver.Listeners{HTTP: listenTCP(t)}).Cap(bootserver.CapsConfig{NOFILE: 100}); err == nil {
			t.Error("a budget of 100 descriptors was taken")
		}
	})
}

// TestBases: the base URLs take the ports the listeners got; with an HTTPS listener
// every URL is https and proxy DHCP names both ports; a host's own base URL is kept, its
// port 0 replaced.
func TestBases(t *testing.T) {
	plain, tls := listenTCP(t), listenTCP(t)
	pp, tp := plain.Addr().(*net.TCPAddr).Port, tls.Addr().(*net.TCPAddr).Port
	ip, ip6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	for _, tc := range []struct {
		name      string
		l         bootserver.Listeners
		set, set6 string
		ip6       netip.Addr
		want      bootserver.Bases
	}{
		{"plain", bootserver.Listeners{HTTP: plain}, "", "", netip.Addr{},
			bootserver.Bases{URL: "http://192.0.2.1:" + itoa(pp), HTTPPort: pp}},
		{"plain, IPv6", bootserver.Listeners{HTTP: plain}, "", "", ip6,
			bootserver.Bases{URL: "http://192.0.2.1:" + itoa(pp), URL6: "http://[2001:db8::1]:" + itoa(pp), HTTPPort: pp}},
		{"host's URL", bootserver.Listeners{HTTP: plain}, "http://boot.example", "", netip.Addr{},
			bootserver.Bases{URL: "http://boot.example", HTTPPort: 80}},
		{"host's URL, port 0", bootserver.Listeners{HTTP: plain}, "http://boot.example:0", "", netip.Addr{},
			bootserver.Bases{URL: "http://boot.example:" + itoa(pp), HTTPPort: pp}},
		{"https", bootserver.Listeners{HTTP: plain, HTTPS: tls}, "", "", ip6,
			bootserver.Bases{URL: "https://192.0.2.1:" + itoa(tp), URL6: "https://[2001:db8::1]:" + itoa(tp), HTTPPort: pp, HTTPSPort: tp}},
		{"https, host's URL", bootserver.Listeners{HTTP: plain, HTTPS: tls}, "https://boot.example", "", netip.Addr{},
			bootserver.Bases{URL: "https://boot.example", HTTPPort: pp, HTTPSPort: 443}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.l.Bases(tc.set, tc.set6, ip, tc.ip6)); diff != "" {
				t.Errorf("Bases (-want +got):\n%s", diff)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
