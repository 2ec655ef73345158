package lease_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/lease"
)

func newFence() (*lease.Fence, *fakeClock) {
	c := newFakeClock()
	return &lease.Fence{Clock: c, Rand: zeroReader{}}, c
}

func TestFenceZeroValue(t *testing.T) {
	var f lease.Fence
	if e, ok := f.Active(); ok {
		t.Fatalf("zero Fence active at epoch %d", e)
	}
	b1, b2 := f.Heartbeat(), f.Heartbeat()
	if b1 == 0 || b2 != b1+1 {
		t.Fatalf("heartbeats %d, %d: want non-zero and consecutive", b1, b2)
	}
	f.Observe(lease.Word{Holds: true, Epoch: 2, TTL: 15 * time.Second, Beat: b2})
	if e, ok := f.Active(); !ok || e != 2 {
		t.Fatalf("Active = %d, %v; want 2, true", e, ok)
	}
}

func TestFenceHeartbeatsDifferAcrossRuns(t *testing.T) {
	var a, b lease.Fence
	if x, y := a.Heartbeat(), b.Heartbeat(); x == y {
		t.Fatalf("two fences numbered their first heartbeat alike: %d", x)
	}
}

// TestFenceWindow: the window is measured from when the heartbeat the renewal answers was
// sent, not from when the word arrived, and ends Margin before the TTL.
func TestFenceWindow(t *testing.T) {
	f, c := newFence()
	beat := f.Heartbeat()
	c.Advance(4 * time.Second) // the word arrives 4 s after the heartbeat left
	f.Observe(lease.Word{Holds: true, Epoch: 7, TTL: 15 * time.Second, Beat: beat})
	type point struct {
		At     time.Duration // since the heartbeat
		Epoch  uint64
		Active bool
	}
	var got []point
	for _, at := range []time.Duration{4 * time.Second, 13*time.Second + 999*time.Millisecond, 14 * time.Second, 18 * time.Second} {
		c.Advance(at - c.Monotonic())
		e, ok := f.Active()
		got = append(got, point{at, e, ok})
	}
	want := []point{{4 * time.Second, 7, true}, {13*time.Second + 999*time.Millisecond, 7, true},
		{14 * time.Second, 0, false}, {18 * time.Second, 0, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFenceObserve(t *testing.T) {
	const ttl = 15 * time.Second
	type step struct {
		advance time.Duration
		beat    int // heartbeat index to send (-1 none)
		word    *lease.Word
		wordFor int // heartbeat index the word's Beat names (-1 raw Beat)
	}
	type result struct {
		Epoch     uint64
		Active    bool
		Remaining time.Duration
	}
	hold := func(epoch uint64) *lease.Word { return &lease.Word{Holds: true, Epoch: epoch, TTL: ttl} }
	tests := []struct {
		name  string
		steps []step
		want  result
	}{{
		name:  "holds at a non-zero epoch: active",
		steps: []step{{beat: 0, wordFor: -1}, {advance: time.Second, beat: -1, word: hold(3), wordFor: 0}},
		want:  result{3, true, 13 * time.Second},
	}, {
		name:  "epoch zero: never active",
		steps: []step{{beat: 0, wordFor: -1}, {beat: -1, word: hold(0), wordFor: 0}},
		want:  result{0, false, 0},
	}, {
		name:  "not the holder: inactive",
		steps: []step{{beat: 0, wordFor: -1}, {beat: -1, word: &lease.Word{Epoch: 3, TTL: ttl}, wordFor: 0}},
		want:  result{0, false, 0},
	}, {
		name:  "a heartbeat this fence never sent: inactive",
		steps: []step{{beat: 0, wordFor: -1}, {beat: -1, word: &lease.Word{Holds: true, Epoch: 3, TTL: ttl, Beat: 12345}, wordFor: -1}},
		want:  result{0, false, 0},
	}, {
		name: "a later word answering an earlier heartbeat does not extend the window",
		steps: []step{{beat: 0, wordFor: -1}, {advance: 2 * time.Second, beat: 1, wordFor: -1},
			{advance: time.Second, beat: -1, word: hold(3), wordFor: 1},
			{advance: time.Second, beat: -1, word: hold(3), wordFor: 0}},
		want: result{3, true, 12 * time.Second}, // sent at 2 s, + 14 s, now 4 s
	}, {
		name: "a word of an older epoch is ignored",
		steps: []step{{beat: 0, wordFor: -1}, {beat: -1, word: hold(5), wordFor: 0},
			{advance: time.Second, beat: 1, wordFor: -1}, {beat: -1, word: hold(4), wordFor: 1}},
		want: result{5, true, 13 * time.Second},
	}, {
		name: "not the holder any more at a newer epoch: inactive at once",
		steps: []step{{beat: 0, wordFor: -1}, {beat: -1, word: hold(5), wordFor: 0},
			{advance: time.Second, beat: -1, word: &lease.Word{Epoch: 6, TTL: ttl}, wordFor: -1}},
		want: result{0, false, 0},
	}, {
		name: "a word without TTL uses the fence's default",
		steps: []step{{beat: 0, wordFor: -1},
			{beat: -1, word: &lease.Word{Holds: true, Epoch: 1}, wordFor: 0}},
		want: result{1, true, lease.DefaultTTL - lease.DefaultMargin},
	}, {
		name: "a TTL no longer than the margin: never active",
		steps: []step{{beat: 0, wordFor: -1},
			{beat: -1, word: &lease.Word{Holds: true, Epoch: 1, TTL: time.Second}, wordFor: 0}},
		want: result{0, false, 0},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := newFence()
			var beats []uint64
			for _, s := range tt.steps {
				c.Advance(s.advance)
				if s.beat >= 0 {
					beats = append(beats, f.Heartbeat())
				}
				if s.word != nil {
					w := *s.word
					if s.wordFor >= 0 {
						w.Beat = beats[s.wordFor]
					}
					f.Observe(w)
				}
			}
			e, ok := f.Active()
			st := f.State()
			got := result{e, ok, st.Remaining}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if st.Active != ok {
				t.Errorf("State().Active = %v, Active() = %v", st.Active, ok)
			}
		})
	}
}

func TestFenceForgetsOldHeartbeats(t *testing.T) {
	f, c := newFence()
	first := f.Heartbeat()
	for range lease.FenceHistory {
		c.Advance(10 * time.Millisecond)
		f.Heartbeat()
	}
	f.Observe(lease.Word{Holds: true, Epoch: 1, TTL: time.Minute, Beat: first})
	if _, ok := f.Active(); ok {
		t.Fatalf("active on a heartbeat %d heartbeats old", lease.FenceHistory+1)
	}
}

// TestFenceRestart: a new fence (an agent restarted) never trusts a word that answers a
// heartbeat of the old one, even one carrying the same number.
func TestFenceRestart(t *testing.T) {
	old, c := newFence()
	beat := old.Heartbeat()
	restarted := &lease.Fence{Clock: c} // crypto/rand numbering
	restarted.Heartbeat()
	restarted.Observe(lease.Word{Holds: true, Epoch: 1, TTL: 15 * time.Second, Beat: beat})
	if _, ok := restarted.Active(); ok {
		t.Fatal("a restarted fence trusted a word answering its previous run's heartbeat")
	}
}

func TestFenceState(t *testing.T) {
	f, c := newFence()
	if s := f.State(); s.Heard >= 0 || s.Words != 0 {
		t.Errorf("fresh State = %+v, want Heard < 0 and no words", s)
	}
	b := f.Heartbeat()
	f.Observe(lease.Word{Holds: true, Epoch: 9, TTL: 15 * time.Second, Beat: b})
	c.Advance(20 * time.Second)
	want := lease.FenceState{Active: false, Holding: true, Epoch: 9, Heard: 20 * time.Second, Words: 1}
	if diff := cmp.Diff(want, f.State()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFenceConcurrent(t *testing.T) {
	f, c := newFence()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				switch (i + j) % 3 {
				case 0:
					f.Observe(lease.Word{Holds: true, Epoch: uint64(j/10 + 1), TTL: 15 * time.Second, Beat: f.Heartbeat()})
				case 1:
					f.Active()
				default:
					c.Advance(time.Millisecond)
					f.State()
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := f.Active(); !ok || e != 20 {
		t.Errorf("after the concurrent run Active = %d, %v; want 20, true", e, ok)
	}
}

// FuzzFence drives a fence with arbitrary heartbeats, words (the control plane's input) and
// time steps, and checks it against a model: whenever it answers (e, true), some word said
// this agent holds the lease at epoch e != 0, answering a heartbeat this fence sent at s with
// TTL ttl, and now < s + ttl - Margin; and no word of a higher epoch came after it.
func FuzzFence(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 3, 0, 40, 1, 0, 2, 3, 0})
	f.Add([]byte{0, 0, 0, 2, 0, 1, 1, 50, 2, 1, 1, 0, 1, 200})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := newFakeClock()
		fence := &lease.Fence{Clock: c, Rand: zeroReader{}, Margin: 500 * time.Millisecond}
		type sent struct {
			id uint64
			at time.Duration
		}
		var beats []sent
		type word struct {
			w  lease.Word
			at time.Duration // when its heartbeat was sent; -1 unknown
		}
		var words []word
		for i := 0; i+2 < len(ops) && i < 600; i += 3 {
			op, a, b := ops[i]%4, ops[i+1], ops[i+2]
			switch op {
			case 0:
				beats = append(beats, sent{fence.Heartbeat(), c.Monotonic()})
			case 1:
				c.Advance(time.Duration(a)*100*time.Millisecond + time.Duration(b)*time.Millisecond)
			case 2, 3:
				w := lease.Word{Holds: op == 2, Epoch: uint64(a % 8), TTL: time.Duration(b%32) * time.Second}
				if len(beats) > 0 && a&0x80 == 0 {
					w.Beat = beats[len(beats)-1-int(b)%len(beats)].id
				} else {
					w.Beat = uint64(b) + 1 // may or may not be one the fence sent
				}
				at := time.Duration(-1) // unknown to the fence: never sent, or forgotten
				for k := max(0, len(beats)-lease.FenceHistory); k < len(beats); k++ {
					if beats[k].id == w.Beat {
						at = beats[k].at
					}
				}
				fence.Observe(w)
				words = append(words, word{w, at})
			}
			e, ok := fence.Active()
			if !ok {
				continue
			}
			now := c.Monotonic()
			justified := false
			maxEpoch := uint64(0)
			for _, wd := range words {
				maxEpoch = max(maxEpoch, wd.w.Epoch)
				ttl := wd.w.TTL
				if ttl == 0 {
					ttl = lease.DefaultTTL
				}
				if wd.w.Holds && wd.w.Epoch == e && wd.at >= 0 && now < wd.at+ttl-500*time.Millisecond {
					justified = true
				}
			}
			if e == 0 || !justified || e < maxEpoch {
				t.Fatalf("active at epoch %d at %v, not justified by the words %+v", e, now, words)
			}
		}
	})
}

// TestFenceHolder: the state names the holder the last word at the highest epoch named;
// a stale word's holder is ignored, and a word naming none clears it.
func TestFenceHolder(t *testing.T) {
	f, _ := newFence()
	rec := lease.Record{Site: "s", Holder: "agent-b", Epoch: 3, TTL: 15 * time.Second, Beat: 1}
	w := rec.WordFor("agent-a")
	if w.Holds || w.Holder != "agent-b" {
		t.Fatalf("WordFor another node: %+v, want not holding, Holder agent-b", w)
	}
	f.Observe(w)
	if s := f.State(); s.Holder != "agent-b" || s.Epoch != 3 || s.Active {
		t.Errorf("State = %+v, want agent-b at epoch 3, inactive", s)
	}
	f.Observe(lease.Word{Epoch: 2, Holder: "agent-old"}) // stale
	if s := f.State(); s.Holder != "agent-b" {
		t.Errorf("a stale word changed the holder to %q", s.Holder)
	}
	f.Observe(lease.Word{Epoch: 4}) // released
	if s := f.State(); s.Holder != "" || s.Epoch != 4 {
		t.Errorf("after a release: %+v, want no holder at epoch 4", s)
	}
}
