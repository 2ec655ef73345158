package connlimit_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/connlimit"
	"github.com/google/go-cmp/cmp"
)

// chanListener hands out the connections a test pushes, in order.
type chanListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn, 64), closed: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// markConn is a connection that records its Close.
type markConn struct {
	net.Conn // nil: only Close is called
	id       int
	closes   atomic.Int32
}

func (c *markConn) Close() error { c.closes.Add(1); return nil }

// TestGiveWay: at the cap the oldest open connection is closed for the new one; a
// connection closed by its holder leaves the list and frees its slot; a closed-for-room
// connection's own Close later changes nothing.
func TestGiveWay(t *testing.T) {
	type step struct {
		accept int // accept connection #accept (>0), or
		close  int // close connection #close (>0)
	}
	for _, tc := range []struct {
		name       string
		max        int
		steps      []step
		wantClosed []int // connections closed, by id, in id order
		want       connlimit.GiveWayStats
	}{
		{
			name:  "under the cap nothing gives way",
			max:   3,
			steps: []step{{accept: 1}, {accept: 2}, {accept: 3}},
			want:  connlimit.GiveWayStats{Open: 3, Accepted: 3},
		},
		{
			name:       "the oldest gives way",
			max:        2,
			steps:      []step{{accept: 1}, {accept: 2}, {accept: 3}, {accept: 4}},
			wantClosed: []int{1, 2},
			want:       connlimit.GiveWayStats{Open: 2, Accepted: 4, GaveWay: 2},
		},
		{
			name:       "a closed connection frees its slot",
			max:        2,
			steps:      []step{{accept: 1}, {accept: 2}, {close: 1}, {accept: 3}},
			wantClosed: []int{1},
			want:       connlimit.GiveWayStats{Open: 2, Accepted: 3},
		},
		{
			name:       "the oldest still open gives way, not the oldest accepted",
			max:        2,
			steps:      []step{{accept: 1}, {accept: 2}, {close: 1}, {accept: 3}, {accept: 4}},
			wantClosed: []int{1, 2},
			want:       connlimit.GiveWayStats{Open: 2, Accepted: 4, GaveWay: 1},
		},
		{
			name:       "closing a connection that gave way changes nothing",
			max:        1,
			steps:      []step{{accept: 1}, {accept: 2}, {close: 1}, {accept: 3}},
			wantClosed: []int{1, 2},
			want:       connlimit.GiveWayStats{Open: 1, Accepted: 3, GaveWay: 2},
		},
		{
			name:       "zero is the default cap",
			max:        0,
			steps:      []step{{accept: 1}, {accept: 2}},
			wantClosed: nil,
			want:       connlimit.GiveWayStats{Open: 2, Accepted: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := newChanListener()
			l, err := connlimit.NewGiveWay(inner, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			raw := map[int]*markConn{}
			got := map[int]net.Conn{}
			for _, s := range tc.steps {
				if s.accept > 0 {
					raw[s.accept] = &markConn{id: s.accept}
					inner.ch <- raw[s.accept]
					c, err := l.Accept()
					if err != nil {
						t.Fatal(err)
					}
					got[s.accept] = c
				} else {
					got[s.close].Close()
				}
			}
			var closed []int
			for id := 1; id <= len(raw); id++ {
				if raw[id].closes.Load() > 0 {
					closed = append(closed, id)
				}
			}
			if diff := cmp.Diff(tc.wantClosed, closed); diff != "" {
				t.Errorf("closed connections (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, l.Stats()); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewGiveWayRefusesNegative(t *testing.T) {
	if _, err := connlimit.NewGiveWay(newChanListener(), -1); !errors.Is(err, connlimit.ErrLimits) {
		t.Fatalf("NewGiveWay(-1): %v, want ErrLimits", err)
	}
	l, err := connlimit.NewGiveWay(newChanListener(), 0)
	if err != nil || l.Max() != connlimit.DefaultGiveWay {
		t.Fatalf("NewGiveWay(0): max %d, %v; want %d", l.Max(), err, connlimit.DefaultGiveWay)
	}
}

// TestGiveWayConcurrent: accepts and closes from many goroutines keep the count within the
// cap and consistent (run with -race).
func TestGiveWayConcurrent(t *testing.T) {
	inner := newChanListener()
	l, _ := connlimit.NewGiveWay(inner, 4)
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 256)
	for range 4 {
		wg.Go(func() {
			for range 50 {
				inner.ch <- &markConn{}
				c, err := l.Accept()
				if err != nil {
					t.Error(err)
					return
				}
				conns <- c
			}
		})
	}
	closers := sync.WaitGroup{}
	closers.Go(func() {
		for c := range conns {
			c.Close()
		}
	})
	wg.Wait()
	close(conns)
	closers.Wait()
	if s := l.Stats(); s.Open != 0 || s.Accepted != 200 || s.GaveWay > 200 {
		t.Fatalf("stats %+v, want 0 open and 200 accepted", s)
	}
}

// TestGiveWayKeepsScraperIn: idle connections holding every slot of a metrics listener
// (behind a connlimit.Listener capping the source) cannot keep a new request out.
func TestGiveWayKeepsScraperIn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped, err := connlimit.New(ln, connlimit.Limits{PerSource: 64, Total: 64})
	if err != nil {
		t.Fatal(err)
	}
	l, err := connlimit.NewGiveWay(capped, 4)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "metrics")
	}), ReadHeaderTimeout: time.Minute}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	defer func() { srv.Close(); <-done }()

	var idle []net.Conn
	for range 4 { // every slot held by a connection that sends nothing
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	for deadline := time.Now().Add(10 * time.Second); l.Stats().Accepted < 4; {
		if time.Now().After(deadline) {
			t.Fatal("idle connections not accepted")
		}
		time.Sleep(time.Millisecond)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + l.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("a scrape with every slot held: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "metrics" {
		t.Fatalf("body %q", body)
	}
	// The oldest idle connection was closed for it.
	idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the oldest idle connection: read %v, want EOF", err)
	}
	if s := l.Stats(); s.GaveWay < 1 {
		t.Errorf("stats %+v: nothing gave way", s)
	}
}
