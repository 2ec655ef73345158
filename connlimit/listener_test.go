package connlimit_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/connlimit"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(floodChildEnv); mode != "" {
		os.Exit(floodChild(mode)) // the child process of TestDescriptorFlood
	}
	goleak.VerifyTestMain(m)
}

// rig is a connlimit.Listener on loopback whose accepted connections the test holds.
type rig struct {
	t    *testing.T
	l    *connlimit.Listener
	mu   sync.Mutex
	held []net.Conn
	done chan struct{}
}

func newRig(t *testing.T, lim connlimit.Limits) *rig {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := connlimit.New(inner, lim)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, l: l, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Tell the client it was admitted, then hold the connection.
			c.Write([]byte("ok"))
			r.mu.Lock()
			r.held = append(r.held, c)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-r.done
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.held {
			c.Close()
		}
	})
	return r
}

// dial connects from the loopback address src. A refused connection may be reset before
// the dial returns: then it returns nil.
func (r *rig) dial(src string) net.Conn {
	r.t.Helper()
	c, err := dialFrom(src, r.l.Addr().String())
	if errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// waitSettled waits until the listener has decided on n connections in all.
func (r *rig) waitSettled(n uint64) connlimit.Stats {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := r.l.Stats()
		if s.Accepted+s.Refused() >= n {
			return s
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after 10 s the listener decided %d of %d connections: %+v", s.Accepted+s.Refused(), n, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// admitted reports whether the server admitted c: it reads "ok", or an error (reset or
// EOF) when the connection was refused.
func admitted(t *testing.T, c net.Conn) bool {
	t.Helper()
	if c == nil {
		return false // reset while dialling
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 2)
	_, err := io.ReadFull(c, b)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("no answer in 10 s: neither admitted nor refused")
	}
	return err == nil && string(b) == "ok"
}

// TestCaps: connections beyond the per-source cap or the total are closed; other sources
// still get in while one is at its cap.
func TestCaps(t *testing.T) {
	type dial struct {
		src string
		n   int
	}
	tests := []struct {
		name  string
		lim   connlimit.Limits
		dials []dial
		want  map[string]int // admitted per source
		stats connlimit.Stats
	}{
		{
			name:  "one source over its cap, a second still gets in",
			lim:   connlimit.Limits{PerSource: 4, Total: 10},
			dials: []dial{{"127.0.0.2", 9}, {"127.0.0.3", 1}},
			want:  map[string]int{"127.0.0.2": 4, "127.0.0.3": 1},
			stats: connlimit.Stats{Open: 5, Sources: 2, PeakOpen: 5, Accepted: 5, RefusedPerSource: 5},
		},
		{
			name:  "total reached across sources",
			lim:   connlimit.Limits{PerSource: 4, Total: 6},
			dials: []dial{{"127.0.0.2", 4}, {"127.0.0.3", 4}, {"127.0.0.4", 1}},
			want:  map[string]int{"127.0.0.2": 4, "127.0.0.3": 2},
			stats: connlimit.Stats{Open: 6, Sources: 2, PeakOpen: 6, Accepted: 6, RefusedTotal: 3},
		},
		{
			name:  "defaults: 16 per source",
			dials: []dial{{"127.0.0.5", 20}},
			want:  map[string]int{"127.0.0.5": connlimit.DefaultPerSource},
			stats: connlimit.Stats{Open: 16, Sources: 1, PeakOpen: 16, Accepted: 16, RefusedPerSource: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.lim)
			type client struct {
				src string
				c   net.Conn
			}
			var clients []client
			for _, d := range tt.dials {
				for range d.n {
					clients = append(clients, client{d.src, r.dial(d.src)})
				}
			}
			stats := r.waitSettled(uint64(len(clients)))
			got := map[string]int{}
			for _, c := range clients {
				if admitted(t, c.c) {
					got[c.src]++
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("admitted per source (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.stats, stats); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCloseGivesSlotBack: a closed connection's slot goes back to its source, once.
func TestCloseGivesSlotBack(t *testing.T) {
	r := newRig(t, connlimit.Limits{PerSource: 2, Total: 4})
	a, b := r.dial("127.0.0.2"), r.dial("127.0.0.2")
	r.waitSettled(2)
	if !admitted(t, a) || !admitted(t, b) {
		t.Fatal("the first two were not admitted")
	}
	if c := r.dial("127.0.0.2"); r.waitSettled(3).RefusedPerSource != 1 || admitted(t, c) {
		t.Fatal("the third was admitted")
	}
	r.mu.Lock()
	first := r.held[0]
	r.mu.Unlock()
	first.Close()
	first.Close() // a second Close gives nothing back
	if s := r.l.Stats(); s.Open != 1 {
		t.Fatalf("after closing one twice: %d open, want 1", s.Open)
	}
	d := r.dial("127.0.0.2")
	if r.waitSettled(4); !admitted(t, d) {
		t.Error("a new connection was refused after a slot was given back")
	}
	if e := r.dial("127.0.0.2"); r.waitSettled(5).RefusedPerSource != 2 || admitted(t, e) {
		t.Error("the cap no longer holds after a double Close")
	}
}

// TestSetLimits: lowering a cap keeps open connections and refuses new ones until under it.
func TestSetLimits(t *testing.T) {
	r := newRig(t, connlimit.Limits{PerSource: 8, Total: 8})
	for range 4 {
		if c := r.dial("127.0.0.2"); !admitted(t, c) {
			t.Fatal("refused under the first caps")
		}
	}
	if err := r.l.SetLimits(connlimit.Limits{PerSource: 2, Total: 8}); err != nil {
		t.Fatal(err)
	}
	if c := r.dial("127.0.0.2"); admitted(t, c) {
		t.Error("admitted over the lowered cap")
	}
	if c := r.dial("127.0.0.3"); !admitted(t, c) {
		t.Error("another source refused")
	}
	if s := r.l.Stats(); s.Open != 5 || s.RefusedPerSource != 1 {
		t.Errorf("stats %+v: want 5 open, 1 refused", s)
	}
	if err := r.l.SetLimits(connlimit.Limits{Total: -1}); !errors.Is(err, connlimit.ErrLimits) {
		t.Errorf("SetLimits(Total -1) = %v, want ErrLimits", err)
	}
	if got := r.l.Limits(); got != (connlimit.Limits{PerSource: 2, Total: 8, IPv6PrefixBits: 64, Reserve: 8 / connlimit.DefaultReserveDivisor}) {
		t.Errorf("Limits() = %+v after a refused SetLimits", got)
	}
}

// TestHTTPFlood: an HTTP server behind the listener, flooded with idle connections from
// one source, holds no more than the cap; another source is served meanwhile.
func TestHTTPFlood(t *testing.T) {
	const perSource, flood = 8, 60
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := connlimit.New(inner, connlimit.Limits{PerSource: perSource, Total: 32})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served")
	})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	defer func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	for range flood {
		c, err := dialFrom("127.0.0.2", l.Addr().String())
		if errors.Is(err, syscall.ECONNRESET) {
			continue // refused before the dial returned
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s := l.Stats(); s.Accepted+s.Refused() < flood; s = l.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("flood not settled in 10 s: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}

	other := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}).DialContext}}
	defer other.CloseIdleConnections()
	resp, err := other.Get("http://" + l.Addr().String() + "/boot/ipxe")
	if err != nil {
		t.Fatalf("another source during the flood: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "served" {
		t.Errorf("another source: %d %q", resp.StatusCode, b)
	}
	s := l.Stats()
	if s.PeakOpen > perSource+1 || s.RefusedPerSource != flood-perSource || s.Accepted != perSource+1 {
		t.Errorf("stats %+v: want peak <= %d, %d refused per source, %d accepted", s, perSource+1, flood-perSource, perSource+1)
	}
}

func TestNewRefusesBadLimits(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	for _, lim := range []connlimit.Limits{{PerSource: -1}, {Total: -5}, {IPv6PrefixBits: 129}, {IPv6PrefixBits: -1}, {Reserve: -1}, {Total: 10, Reserve: 11}} {
		if _, err := connlimit.New(inner, lim); !errors.Is(err, connlimit.ErrLimits) {
			t.Errorf("New(%+v) = %v, want ErrLimits", lim, err)
		}
		if err := lim.Validate(); !errors.Is(err, connlimit.ErrLimits) {
			t.Errorf("Validate(%+v) = %v, want ErrLimits", lim, err)
		}
	}
}

func TestBudget(t *testing.T) {
	tests := []struct {
		b       connlimit.Budget
		want    int
		wantErr error
	}{
		{connlimit.Budget{NOFILE: 1024}, connlimit.DefaultTotal, nil},
		{connlimit.Budget{NOFILE: 524288}, 262016, nil},
		{connlimit.Budget{NOFILE: 600, Reserved: 100, PerConn: 1}, 500, nil},
		{connlimit.Budget{NOFILE: 1 << 63}, (1<<30 - 256) / 2, nil},
		{connlimit.Budget{NOFILE: 256}, 0, connlimit.ErrNoRoom},
		{connlimit.Budget{NOFILE: 257}, 0, connlimit.ErrNoRoom},
		{connlimit.Budget{NOFILE: 1024, Reserved: -1}, 0, connlimit.ErrLimits},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.b), func(t *testing.T) {
			got, err := tt.b.Total()
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Total() = %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// wrapped is a listener whose connections embed the *net.TCPConn, as a wrapper that
// replaces one method does (internal/sendfile's).
type wrapped struct{ net.Listener }

type wrappedConn struct{ *net.TCPConn }

func (l wrapped) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrappedConn{c.(*net.TCPConn)}, nil
}

// TestRefusedIsReset: a connection beyond a cap is reset (no FIN_WAIT or TIME_WAIT kept for
// it), also when the inner listener wraps its TCP connections.
func TestRefusedIsReset(t *testing.T) {
	for _, tt := range []struct {
		name string
		wrap func(net.Listener) net.Listener
	}{
		{"net's connections", func(l net.Listener) net.Listener { return l }},
		{"wrapped connections", func(l net.Listener) net.Listener { return wrapped{l} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			l, err := connlimit.New(tt.wrap(inner), connlimit.Limits{PerSource: 1, Total: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					defer c.Close() // held until the listener closes
				}
			}()
			first, err := dialFrom("127.0.0.2", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			second, err := dialFrom("127.0.0.2", l.Addr().String())
			if errors.Is(err, syscall.ECONNRESET) {
				return // reset while dialling
			}
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			second.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = second.Read(make([]byte, 1))
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the refused connection's read: %v, want a reset (ECONNRESET)", err)
			}
		})
	}
}

// TestReserveForPreferred performs the flood of S4: ten sources hold PerSource
// connections each, more than the total cap of 156 that a 600-descriptor budget gives; a
// preferred source (a machine being booted) must still get in, up to its own PerSource, and
// another source that is not preferred must not. Without a Preferrer the same flood keeps
// the preferred source out, as it did before the reserve.
func TestReserveForPreferred(t *testing.T) {
	const (
		total, perSource, flooders = 156, 16, 10
		booting, other             = "127.0.0.50", "127.0.0.51"
		reserve                    = total / connlimit.DefaultReserveDivisor
	)
	for _, tt := range []struct {
		name        string
		prefer      bool
		wantBooting int
		wantFlood   int
		wantStats   connlimit.Stats
	}{
		{
			name: "preferred source keeps its room", prefer: true,
			wantBooting: perSource, wantFlood: total - reserve,
			wantStats: connlimit.Stats{Open: total - reserve + perSource, Sources: (total-reserve+perSource-1)/perSource + 1,
				PeakOpen: total - reserve + perSource, Accepted: total - reserve + perSource,
				AcceptedPreferred: perSource, RefusedReserve: flooders*perSource - (total - reserve) + 1},
		},
		{
			name: "no preference: the flood takes every slot", prefer: false,
			wantBooting: 0, wantFlood: total,
			wantStats: connlimit.Stats{Open: total, Sources: flooders, PeakOpen: total, Accepted: total,
				RefusedTotal: flooders*perSource - total + perSource + 1},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, connlimit.Limits{Total: total, PerSource: perSource})
			if tt.prefer {
				r.l.SetPreferred(connlimit.PreferFunc(func(a netip.Addr) bool { return a == netip.MustParseAddr(booting) }))
			}
			var flood []net.Conn
			for i := range flooders {
				for range perSource {
					flood = append(flood, r.dial(fmt.Sprintf("127.0.0.%d", 10+i)))
				}
			}
			r.waitSettled(uint64(len(flood)))
			var mine []net.Conn
			for range perSource {
				mine = append(mine, r.dial(booting))
			}
			stranger := r.dial(other)
			stats := r.waitSettled(uint64(len(flood) + len(mine) + 1))
			count := func(cs []net.Conn) (n int) {
				for _, c := range cs {
					if admitted(t, c) {
						n++
					}
				}
				return n
			}
			if got := count(flood); got != tt.wantFlood {
				t.Errorf("flooders hold %d connections, want %d", got, tt.wantFlood)
			}
			if got := count(mine); got != tt.wantBooting {
				t.Errorf("the machine being booted got %d of %d connections, want %d", got, perSource, tt.wantBooting)
			}
			if admitted(t, stranger) {
				t.Errorf("a source that is not preferred got in during the flood")
			}
			if diff := cmp.Diff(tt.wantStats, stats); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReserveLimits: Reserve defaults to a quarter of Total, follows a new Total, and a
// non-preferred source gets the whole Total back once the Preferrer is removed.
func TestReserveLimits(t *testing.T) {
	r := newRig(t, connlimit.Limits{Total: 8, PerSource: 8})
	r.l.SetPreferred(connlimit.PreferFunc(func(netip.Addr) bool { return false }))
	if got := r.l.Limits().Reserve; got != 2 {
		t.Errorf("Reserve of Total 8 = %d, want 2", got)
	}
	for range 6 {
		if c := r.dial("127.0.0.2"); !admitted(t, c) {
			t.Fatal("refused below Total-Reserve")
		}
	}
	if c := r.dial("127.0.0.2"); admitted(t, c) {
		t.Fatal("a source that is not preferred took the reserve")
	}
	r.l.SetPreferred(nil)
	if c := r.dial("127.0.0.2"); !admitted(t, c) {
		t.Error("refused with no Preferrer set and room under Total")
	}
	if err := r.l.SetLimits(connlimit.Limits{Total: 20, PerSource: 8, Reserve: 20}); err != nil {
		t.Errorf("Reserve == Total: %v", err)
	}
	if s := r.l.Stats(); s.RefusedReserve != 1 || s.Accepted != 7 {
		t.Errorf("stats %+v: want 1 refused for the reserve, 7 accepted", s)
	}
}
