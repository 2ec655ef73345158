package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bettercompute/siteboot/lease"
)

// record is a Sink that keeps what it is handed.
type record struct{ events []lease.Event }

func (r *record) Emit(e lease.Event) { r.events = append(r.events, e) }

// take returns the events kept since the last take.
func (r *record) take() []lease.Event {
	e := r.events
	r.events = nil
	return e
}

func TestFenceEvents(t *testing.T) {
	f, c := newFence()
	var rec record
	f.Events = &rec
	at := func() time.Time { return c.Now() }
	check := func(step string, want []lease.Event) {
		t.Helper()
		if diff := cmp.Diff(want, rec.take(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", step, diff)
		}
	}

	f.Active()
	check("no word yet", nil)

	beat := f.Heartbeat()
	c.Advance(4 * time.Second)
	f.Observe(lease.Word{Holds: true, Epoch: 7, TTL: 15 * time.Second, Beat: beat})
	check("holds", []lease.Event{{Time: at(), Kind: lease.EventFenceActive, Epoch: 7, Remaining: 10 * time.Second}})

	c.Advance(5 * time.Second)
	f.Active()
	f.State()
	check("still active", nil)

	c.Advance(5 * time.Second) // 14 s after the heartbeat: the window has ended
	if _, ok := f.Active(); ok {
		t.Fatal("fence active past its window")
	}
	check("window ended", []lease.Event{{Time: at(), Kind: lease.EventFenceInactive, Epoch: 7, Why: lease.WhyLapsed}})
	f.Active()
	check("reported once", nil)

	beat = f.Heartbeat()
	f.Observe(lease.Word{Holds: true, Epoch: 7, TTL: 15 * time.Second, Beat: beat})
	check("renewed", []lease.Event{{Time: at(), Kind: lease.EventFenceActive, Epoch: 7, Remaining: 14 * time.Second}})

	f.Observe(lease.Word{Holds: false, Epoch: 8})
	check("another holds", []lease.Event{{Time: at(), Kind: lease.EventFenceInactive, Epoch: 8, Why: lease.WhyNotHolder}})

	beat = f.Heartbeat()
	f.Observe(lease.Word{Holds: true, Epoch: 9, TTL: 15 * time.Second, Beat: beat})
	f.Observe(lease.Word{Holds: true, Epoch: 9, TTL: 15 * time.Second, Beat: beat + 1000})
	check("unknown heartbeat", []lease.Event{
		{Time: at(), Kind: lease.EventFenceActive, Epoch: 9, Remaining: 14 * time.Second},
		{Time: at(), Kind: lease.EventFenceInactive, Epoch: 9, Why: lease.WhyBeatUnknown},
	})

	f.Observe(lease.Word{Holds: true, Epoch: 3, TTL: 15 * time.Second, Beat: beat})
	check("older epoch ignored", nil)
}

// With no Events, the fence's check on every request allocates nothing, and neither does
// it with a Sink when nothing changes.
func TestFenceEventsAllocateNothing(t *testing.T) {
	f, _ := newFence()
	f.Observe(lease.Word{Holds: true, Epoch: 2, Beat: f.Heartbeat()})
	if n := testing.AllocsPerRun(100, func() { f.Active() }); n != 0 {
		t.Errorf("Active without Events: %v allocations", n)
	}
	f.Events = lease.SinkFunc(func(lease.Event) {})
	f.Active()
	if n := testing.AllocsPerRun(100, func() { f.Active() }); n != 0 {
		t.Errorf("Active with Events, no change: %v allocations", n)
	}
}

// brokenStore fails Get or CompareAndSwap with the errors set.
type brokenStore struct {
	lease.Store
	getErr, casErr error
}

func (s *brokenStore) Get(ctx context.Context, site string) (lease.Record, lease.Version, error) {
	if s.getErr != nil {
		return lease.Record{}, 0, s.getErr
	}
	return s.Store.Get(ctx, site)
}

func (s *brokenStore) CompareAndSwap(ctx context.Context, site string, old lease.Version, r lease.Record) (lease.Version, error) {
	if s.casErr != nil {
		return 0, s.casErr
	}
	return s.Store.CompareAndSwap(ctx, site, old, r)
}

func TestControllerEvents(t *testing.T) {
	clock := newFakeClock()
	fl := newFleet("s1")
	store := &brokenStore{Store: &lease.MemoryStore{}}
	var rec record
	c := &lease.Controller{Store: store, Fleet: fl, Clock: clock, Events: &rec}
	ctx := context.Background()
	tick := func() { _, _ = c.TickSite(ctx, "s1") }
	type ev struct {
		Kind         lease.EventKind
		Change       lease.Change
		Epoch        uint64
		Holder, Prev string
		Err          string
	}
	var got []ev
	take := func() {
		for _, e := range rec.take() {
			if !e.Time.Equal(clock.Now()) || e.Site != "s1" {
				t.Errorf("event %+v: want time %v, site s1", e, clock.Now())
			}
			x := ev{Kind: e.Kind, Change: e.Change, Epoch: e.Epoch, Holder: e.Holder, Prev: e.Prev}
			if e.Err != nil {
				var op *lease.OpError
				if !errors.As(e.Err, &op) {
					t.Errorf("event error %v is no *OpError", e.Err)
				}
				x.Err = op.Op
			}
			got = append(got, x)
		}
	}
	fl.connect("b", "s1", 1)
	tick() // b acquires at epoch 1
	take()
	clock.Advance(5 * time.Second)
	tick() // renewed: not reported
	take()
	fl.disconnect("b")
	fl.connect("a", "s1", 1)
	clock.Advance(10 * time.Second)
	tick() // kept, lease live
	take()
	clock.Advance(5 * time.Second)
	c2 := &lease.Controller{Store: store, Fleet: fl, Clock: clock, Events: &rec}
	_, _ = c2.TickSite(ctx, "s1") // lapsed, but c2 has not watched it a TTL: deferred
	take()
	tick() // c has watched it since 5 s: a promoted at epoch 2
	take()
	store.casErr = lease.ErrConflict
	clock.Advance(20 * time.Second)
	fl.disconnect("a")
	tick() // the release loses to another writer
	take()
	store.casErr, store.getErr = nil, errors.New("store down")
	tick()
	take()
	want := []ev{
		{Kind: lease.EventChanged, Change: lease.Acquired, Epoch: 1, Holder: "b"},
		{Kind: lease.EventDeferred, Change: lease.Kept, Epoch: 1, Holder: "b", Prev: "b"},
		{Kind: lease.EventChanged, Change: lease.Promoted, Epoch: 2, Holder: "a", Prev: "b"},
		{Kind: lease.EventConflict, Err: "cas"},
		{Kind: lease.EventError, Err: "get"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if s := c.Stats(); s.Conflicts != 1 || s.Errors != 1 {
		t.Errorf("Stats = %+v; want 1 conflict, 1 error", s)
	}
}

func TestEventKindString(t *testing.T) {
	names := map[lease.EventKind]string{}
	for k := lease.EventFenceActive; k <= lease.EventError; k++ {
		n := k.String()
		if prev, dup := names[k]; dup || n == "" {
			t.Errorf("kind %d named %q (%q before)", k, n, prev)
		}
		names[k] = n
	}
	if got := lease.EventKind(0).String(); got != "event-0" {
		t.Errorf("EventKind(0) = %q", got)
	}
}
