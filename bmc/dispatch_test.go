package bmc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/bettercompute/siteboot/bmc"
)

// result is a host's report of one command.
type result struct {
	ID string
	T  bmc.Tally
}

func (r result) CommandID() string { return r.ID }
func (r result) Tally() bmc.Tally  { return r.T }

func ok(id string) result {
	return result{ID: id, T: bmc.Tally{Kind: bmc.KindPower, Status: bmc.StatusOK}}
}

// gate is a command that runs until released (or its context ends), counting its runs.
type gate struct {
	runs    atomic.Int32
	release chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) run(id string) func(context.Context) result {
	return func(ctx context.Context) result {
		g.runs.Add(1)
		select {
		case <-g.release:
			return ok(id)
		case <-ctx.Done():
			return result{ID: id, T: bmc.Tally{Kind: bmc.KindPower, Status: bmc.StatusNotSent}}
		}
	}
}

func ids(rs []result) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// TestDispatcherRunsAnIDOnce: a command sent again while it runs, or while its result waits
// to be delivered, is not run again; once delivered, the id may run again.
func TestDispatcherRunsAnIDOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var done atomic.Int32
		d := &bmc.Dispatcher[result]{OnDone: func(string) { done.Add(1) }}
		defer d.Close()
		g := newGate()
		if !d.Start(ctx, "a", g.run("a")) {
			t.Fatal("first start refused")
		}
		if d.Start(ctx, "a", g.run("a")) {
			t.Error("started again while running")
		}
		synctest.Wait()
		if n := d.Running(); n != 1 {
			t.Errorf("running %d, want 1", n)
		}
		close(g.release)
		synctest.Wait()
		if done.Load() != 1 {
			t.Errorf("OnDone called %d times", done.Load())
		}
		if d.Start(ctx, "a", g.run("a")) {
			t.Error("started again while its result is held")
		}
		if g.runs.Load() != 1 {
			t.Errorf("run %d times while held, want 1", g.runs.Load())
		}
		d.Delivered(d.Pending())
		if !d.Start(ctx, "a", g.run("a")) {
			t.Error("not started after its result was delivered")
		}
		synctest.Wait()
		if g.runs.Load() != 2 {
			t.Errorf("run %d times, want 2", g.runs.Load())
		}
	})
}

// TestDispatcherKeepsResultsUntilDelivered: results stay in every report until one that
// carried them was answered, and delivering removes only the results that report carried.
func TestDispatcherKeepsResultsUntilDelivered(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &bmc.Dispatcher[result]{}
		defer d.Close()
		a, b := newGate(), newGate()
		d.Start(ctx, "a", a.run("a"))
		d.Start(ctx, "b", b.run("b"))
		close(a.release)
		synctest.Wait()
		first := d.Pending()
		if diff := cmp.Diff([]string{"a"}, ids(first)); diff != "" {
			t.Errorf("pending (-want +got):\n%s", diff)
		}
		// A report that failed: nothing delivered, the next carries the same.
		d.Delivered(nil)
		if diff := cmp.Diff([]string{"a"}, ids(d.Pending())); diff != "" {
			t.Errorf("pending after a failed report (-want +got):\n%s", diff)
		}
		// b ends while the report carrying a is in flight: it stays for the next report.
		close(b.release)
		synctest.Wait()
		d.Delivered(first)
		if diff := cmp.Diff([]string{"b"}, ids(d.Pending())); diff != "" {
			t.Errorf("pending after delivery (-want +got):\n%s", diff)
		}
		if st := d.Stats(); st.Held != 1 || st.Running != 0 || st.Power.OK != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestDispatcherBound: no more than MaxHeld commands are held, running or finished; a
// command over the bound is deferred and starts once results are delivered.
func TestDispatcherBound(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &bmc.Dispatcher[result]{MaxHeld: 2}
		defer d.Close()
		g := newGate()
		if !d.Start(ctx, "a", g.run("a")) || !d.Start(ctx, "b", g.run("b")) {
			t.Fatal("not started under the bound")
		}
		if d.Start(ctx, "c", g.run("c")) {
			t.Error("started over the bound while two run")
		}
		close(g.release)
		synctest.Wait()
		if d.Start(ctx, "c", g.run("c")) {
			t.Error("started over the bound while two results are held")
		}
		if st := d.Stats(); st.Deferred != 2 || st.Held != 2 {
			t.Errorf("stats %+v, want 2 deferred, 2 held", st)
		}
		d.Delivered(d.Pending()[:1])
		if !d.Start(ctx, "c", g.run("c")) {
			t.Error("not started once a result was delivered")
		}
		if d.Start(ctx, "d", g.run("d")) {
			t.Error("started over the bound")
		}
		synctest.Wait()
		if g.runs.Load() != 3 {
			t.Errorf("%d runs, want 3", g.runs.Load())
		}
	})
}

// TestDispatcherCloseWaits: Close ends the running commands' contexts and returns only once
// they have ended; a command cut short before it was sent is not held (it runs when sent
// again), one that got further is. Nothing starts after Close.
func TestDispatcherCloseWaits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &bmc.Dispatcher[result]{}
		var ended atomic.Int32
		d.Start(ctx, "cut", func(ctx context.Context) result {
			<-ctx.Done()
			ended.Add(1)
			return result{ID: "cut", T: bmc.Tally{Kind: bmc.KindBoot, Status: bmc.StatusNotSent}}
		})
		d.Start(ctx, "sent", func(ctx context.Context) result {
			<-ctx.Done()
			ended.Add(1)
			return result{ID: "sent", T: bmc.Tally{Kind: bmc.KindBoot, Status: bmc.StatusUnknown}}
		})
		synctest.Wait()
		d.Close()
		if ended.Load() != 2 {
			t.Errorf("Close returned with %d of 2 commands ended", 2-ended.Load())
		}
		if diff := cmp.Diff([]string{"sent"}, ids(d.Pending())); diff != "" {
			t.Errorf("held after Close (-want +got):\n%s", diff)
		}
		if d.Start(ctx, "late", newGate().run("late")) {
			t.Error("started after Close")
		}
		if st := d.Stats(); st.Boot.NotSent != 1 || st.Boot.Unknown != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestDispatcherShutdown: Shutdown waits for running commands to end on their own; if its
// context ends first it ends theirs, waits, and says so.
func TestDispatcherShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &bmc.Dispatcher[result]{}
		g := newGate()
		d.Start(ctx, "a", g.run("a"))
		errc := make(chan error, 1)
		go func() { errc <- d.Shutdown(ctx) }()
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("Shutdown returned %v while a command runs", err)
		default:
		}
		close(g.release)
		if err := <-errc; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if diff := cmp.Diff([]string{"a"}, ids(d.Pending())); diff != "" {
			t.Errorf("held (-want +got):\n%s", diff)
		}

		d2 := &bmc.Dispatcher[result]{}
		d2.Start(ctx, "b", newGate().run("b"))
		sctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := d2.Shutdown(sctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown past its context: %v", err)
		}
		if n := d2.Running(); n != 0 {
			t.Errorf("%d running after Shutdown", n)
		}
	})
}

// TestDispatcherHostContext: a command is not started under a context already done, and a
// command whose host context ends before it is sent is dropped, as at Close.
func TestDispatcherHostContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		d := &bmc.Dispatcher[result]{}
		defer d.Close()
		done, cancel := context.WithCancel(context.Background())
		cancel()
		g := newGate()
		if d.Start(done, "a", g.run("a")) {
			t.Error("started under a context that is done")
		}
		ctx, cancel := context.WithCancel(context.Background())
		d.Start(ctx, "b", g.run("b"))
		synctest.Wait()
		cancel()
		synctest.Wait()
		if len(d.Pending()) != 0 || d.Running() != 0 || g.runs.Load() != 1 {
			t.Errorf("pending %v, running %d, runs %d", d.Pending(), d.Running(), g.runs.Load())
		}
	})
}

// TestDispatcherStats: results are counted by kind and status, replays by kind, claims by
// answer; the counters are plain fields a host reads without a lock.
func TestDispatcherStats(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		d := &bmc.Dispatcher[result]{}
		defer d.Close()
		tallies := []bmc.Tally{
			{Kind: bmc.KindQuery, Status: bmc.StatusOK},
			{Kind: bmc.KindQuery, Status: bmc.StatusFailed},
			{Kind: bmc.KindPower, Status: bmc.StatusOK, Replayed: true},
			{Kind: bmc.KindPower, Status: bmc.StatusOK},
			{Kind: bmc.KindFirmware, Status: bmc.StatusUnknown, Replayed: true},
			{Kind: bmc.KindBoot, Status: bmc.StatusDiffers},
			{Kind: bmc.KindMediaEject, Status: bmc.StatusNotSent},
			{Kind: bmc.KindStorage, Status: "strange"},
			{Kind: "bmc.other", Status: bmc.StatusOK},
		}
		for i, tl := range tallies {
			id := string(rune('a' + i))
			d.Start(ctx, id, func(context.Context) result { return result{ID: id, T: tl} })
		}
		for _, a := range []bmc.ClaimAnswer{bmc.ClaimAnswerGranted, bmc.ClaimAnswerGranted, bmc.ClaimAnswerRefused, bmc.ClaimAnswerReused, bmc.ClaimAnswerUnanswered, "odd"} {
			d.OnClaim(bmc.ClaimRequest{}, a)
		}
		synctest.Wait()
		want := bmc.DispatchStats{
			Query:            bmc.KindStats{OK: 1, Failed: 1},
			Power:            bmc.KindStats{OK: 2, Replayed: 1},
			Firmware:         bmc.KindStats{Unknown: 1, Replayed: 1},
			Boot:             bmc.KindStats{Differs: 1},
			MediaEject:       bmc.KindStats{NotSent: 1},
			Storage:          bmc.KindStats{Other: 1},
			OtherKind:        bmc.KindStats{OK: 1},
			ClaimsGranted:    2,
			ClaimsRefused:    1,
			ClaimsReused:     1,
			ClaimsUnanswered: 1,
			Held:             uint64(len(tallies)),
		}
		st := d.Stats()
		if diff := cmp.Diff(want, st); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		if st.ForKind(bmc.KindPower).Status(bmc.StatusOK) != 2 || st.ForKind(bmc.KindBoot).Status(bmc.StatusDiffers) != 1 ||
			st.ForKind("bmc.other").Status(bmc.StatusOK) != 1 || st.Claims(bmc.ClaimAnswerGranted) != 2 {
			t.Errorf("accessors disagree with the fields: %+v", st)
		}
		var sum uint64
		for _, k := range bmc.Kinds {
			for _, s := range bmc.Statuses {
				sum += st.ForKind(k).Status(s)
			}
		}
		if sum != 7 {
			t.Errorf("walking Kinds and Statuses counts %d, want 7", sum)
		}
	})
}
