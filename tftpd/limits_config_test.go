package tftpd_test

import (
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/tftpd"
)

// TestLimitsValidate: each field out of its bounds is refused naming the field, and
// wraps ErrConfig; the bounds themselves and the zero Limits are accepted.
func TestLimitsValidate(t *testing.T) {
	ok := []tftpd.Limits{
		{},
		{MaxTransfers: tftpd.MaxLimitTransfers, MaxPerSource: tftpd.MaxLimitTransfers, MaxWindow: 65535, FirstRetries: tftpd.MaxLimitFirstRetries},
		{FirstWait: time.Second, EvictAfter: 10 * time.Millisecond, MaxQueued: -1, QueueWait: 100 * time.Millisecond},
		{FirstWait: time.Minute, EvictAfter: 5 * time.Second, MaxQueued: tftpd.MaxLimitQueued, QueueWait: time.Minute},
	}
	for i, l := range ok {
		if err := l.Validate(); err != nil {
			t.Errorf("ok[%d]: %v", i, err)
		}
	}
	bad := []struct {
		field string
		l     tftpd.Limits
	}{
		{"MaxTransfers", tftpd.Limits{MaxTransfers: -1}},
		{"MaxTransfers", tftpd.Limits{MaxTransfers: tftpd.MaxLimitTransfers + 1}},
		{"MaxPerSource", tftpd.Limits{MaxPerSource: -1}},
		{"MaxWindow", tftpd.Limits{MaxWindow: 70000}},
		{"FirstRetries", tftpd.Limits{FirstRetries: 17}},
		{"FirstWait", tftpd.Limits{FirstWait: 10 * time.Millisecond}},
		{"FirstWait", tftpd.Limits{FirstWait: 2 * time.Minute}},
		{"EvictAfter", tftpd.Limits{EvictAfter: time.Millisecond}},
		{"EvictAfter", tftpd.Limits{EvictAfter: 6 * time.Second}},
		{"MaxQueued", tftpd.Limits{MaxQueued: -2}},
		{"MaxQueued", tftpd.Limits{MaxQueued: tftpd.MaxLimitQueued + 1}},
		{"QueueWait", tftpd.Limits{QueueWait: 10 * time.Millisecond}},
		{"QueueWait", tftpd.Limits{QueueWait: time.Hour}},
	}
	for _, tc := range bad {
		err := tc.l.Validate()
		var le *tftpd.LimitError
		if !errors.As(err, &le) || le.Field != tc.field {
			t.Errorf("%+v: err = %v, want a LimitError for %s", tc.l, err, tc.field)
			continue
		}
		if !errors.Is(err, tftpd.ErrConfig) || tftpd.ReasonOf(err) != "config" {
			t.Errorf("%+v: %v does not wrap ErrConfig", tc.l, err)
		}
	}
}

// TestLimitsApply: Apply sets every limit field of a Server, and only those.
func TestLimitsApply(t *testing.T) {
	l := tftpd.Limits{MaxTransfers: 8, MaxPerSource: 2, MaxWindow: 4, FirstRetries: 3, FirstWait: 7 * time.Second,
		EvictAfter: 120 * time.Millisecond, MaxQueued: -1, QueueWait: 2 * time.Second}
	s := &tftpd.Server{Addr: ":6969", MaxBlockSize: 1024}
	l.Apply(s)
	got := tftpd.Limits{MaxTransfers: s.MaxTransfers, MaxPerSource: s.MaxPerSource, MaxWindow: s.MaxWindow, FirstRetries: s.FirstRetries,
		FirstWait: s.FirstWait, EvictAfter: s.EvictAfter, MaxQueued: s.MaxQueued, QueueWait: s.QueueWait}
	if got != l {
		t.Errorf("after Apply: %+v, want %+v", got, l)
	}
	if s.Addr != ":6969" || s.MaxBlockSize != 1024 {
		t.Errorf("Apply changed other fields: Addr %q, MaxBlockSize %d", s.Addr, s.MaxBlockSize)
	}
	if err := s.Validate(); err == nil {
		t.Error("a Server with neither Dir nor FS validated")
	}
}

// TestStatsOutcomes: Stats.Outcomes counts the reports by outcome, one per request
// reported to OnTransfer, and Of reads them by Outcome.
func TestStatsOutcomes(t *testing.T) {
	rec := newRecorder()
	srv := &tftpd.Server{FS: fstest.MapFS{"f": {Data: payload(1500, 3)}}, Timeout: 30 * time.Second, OnTransfer: rec.hook}
	addr := serve(t, srv, "127.0.0.1")
	c := newRawClient(t, "127.0.0.1")
	c.send(addr, rrq("f", "octet"))
	first, tid := c.recvFrom(5*time.Second, 0)
	if got := c.download(first, tid, 512); len(got) != 1500 {
		t.Fatalf("got %d bytes, want 1500", len(got))
	}
	c.send(addr, rrq("missing", "octet"))
	c.send(addr, rrq("f", "netascii"))
	reports := rec.waitN(t, 3)
	want := map[tftpd.Outcome]uint64{}
	for _, r := range reports {
		want[r.Outcome]++
	}
	got := srv.Stats().Outcomes
	for _, o := range tftpd.Outcomes() {
		if got.Of(o) != want[o] {
			t.Errorf("Outcomes.Of(%q) = %d, want %d (reports %v)", o, got.Of(o), want[o], want)
		}
	}
	if got.OK != 1 || got.NotFound != 1 || got.Refused != 1 {
		t.Errorf("Outcomes = %+v, want one ok, one not-found, one refused", got)
	}
	if got.Of("no-such-outcome") != 0 {
		t.Error("Of of an unknown outcome is not 0")
	}
}
