package tftpd_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/lease"
	"github.com/bettercompute/siteboot/tftpd"
)

// The lease's fence is a tftpd.Fence as it is.
var _ tftpd.Fence = (*lease.Fence)(nil)

// TestFence: while the Fence is inactive a read request is answered "access violation"
// without a transfer; once it is active the same request is served.
func TestFence(t *testing.T) {
	var active atomic.Bool
	asked := atomic.Int64{}
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(1000, 3)}}, OnTransfer: rec.hook,
		Fence: tftpd.FenceFunc(func() (uint64, bool) { asked.Add(1); return 7, active.Load() })}
	addr := serve(t, srv, "127.0.0.1")

	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	pkt, from := c.recvFrom(5*time.Second, 0)
	if code, msg := errorOf(t, pkt); code != 2 || msg != "access violation" || from.Port != addr.Port {
		t.Fatalf("fenced: error %d %q from port %d; want 2 \"access violation\" from %d", code, msg, from.Port, addr.Port)
	}
	r := rec.waitN(t, 1)[0]
	if r.Outcome != tftpd.OutcomeDenied || !errors.Is(r.Err, tftpd.ErrFenced) || tftpd.ReasonOf(r.Err) != "fenced" {
		t.Errorf("fenced report: outcome %q err %v (reason %q)", r.Outcome, r.Err, tftpd.ReasonOf(r.Err))
	}
	if s := srv.Stats(); s.Fenced != 1 || s.Denied != 1 || s.Transfers != 0 {
		t.Errorf("after a fenced request: %+v", s)
	}

	active.Store(true)
	c2 := newRawClient(t, "127.0.0.1")
	c2.send(addr, rrq("f", "octet"))
	pkt, tid := c2.recvFrom(5*time.Second, 0)
	c2.download(pkt, tid, 512)
	if r := rec.waitN(t, 2)[1]; r.Outcome != tftpd.OutcomeOK {
		t.Errorf("active: outcome %q err %v, want ok", r.Outcome, r.Err)
	}
	if s := srv.Stats(); s.Fenced != 1 || s.Completed != 1 || asked.Load() != 2 {
		t.Errorf("after a served request: %+v, fence asked %d times", s, asked.Load())
	}
}

func TestReasonOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{tftpd.ErrServerClosed, "server-closed"},
		{fmt.Errorf("f: %w", tftpd.ErrNotFound), "not-found"},
		{&tftpd.OpError{Op: "open", Name: "f", Err: tftpd.ErrDenied}, "denied"},
		{fmt.Errorf("x: %w", tftpd.ErrFenced), "fenced"},
		{tftpd.ErrTimeout, "timeout"},
		{tftpd.ErrEvicted, "evicted"},
		{fmt.Errorf("MaxWindow: %w", tftpd.ErrConfig), "config"},
	} {
		if got := tftpd.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
