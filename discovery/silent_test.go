package discovery_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/clock/clocktest"
	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

// TestSilent: a machine answered that asks for nothing within the window is counted silent
// at the first Sweep after it, and named once; one that asks is not; a new answer starts
// the window over.
func TestSilent(t *testing.T) {
	m1, m2 := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, hwid.MAC{0x52, 0x54, 0, 0, 0, 2}
	type step struct {
		answer, ask hwid.MAC
		advance     time.Duration
		sweep       bool
		want        []hwid.MAC // named by the sweep
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
		want  discovery.SilentStats
	}{
		{
			name:  "silent at the window",
			steps: []step{{answer: m1}, {advance: time.Minute - 1}, {sweep: true}, {advance: 1}, {sweep: true, want: []hwid.MAC{m1}}},
			want:  discovery.SilentStats{Answered: 1, Silent: 1},
		},
		{
			name:  "asked within the window",
			steps: []step{{answer: m1}, {advance: 30 * time.Second}, {ask: m1}, {advance: time.Hour}, {sweep: true}},
			want:  discovery.SilentStats{Answered: 1, Returned: 1},
		},
		{
			name:  "asked after the window, before the sweep, still counts as asked",
			steps: []step{{answer: m1}, {advance: 2 * time.Minute}, {ask: m1}, {sweep: true}},
			want:  discovery.SilentStats{Answered: 1, Returned: 1},
		},
		{
			name:  "named once, counted each time",
			steps: []step{{answer: m1}, {advance: time.Minute}, {sweep: true, want: []hwid.MAC{m1}}, {answer: m1}, {advance: time.Minute}, {sweep: true}},
			want:  discovery.SilentStats{Answered: 2, Silent: 2},
		},
		{
			name:  "a new answer starts the window over",
			steps: []step{{answer: m1}, {advance: 50 * time.Second}, {answer: m1}, {advance: 50 * time.Second}, {sweep: true}},
			want:  discovery.SilentStats{Answered: 2, Watching: 1},
		},
		{
			name:  "several, in MAC order",
			steps: []step{{answer: m2}, {answer: m1}, {advance: time.Minute}, {sweep: true, want: []hwid.MAC{m1, m2}}},
			want:  discovery.SilentStats{Answered: 2, Silent: 2},
		},
		{
			name:  "asking unanswered changes nothing",
			steps: []step{{ask: m1}, {answer: hwid.MAC{}}, {advance: time.Minute}, {sweep: true}},
			want:  discovery.SilentStats{},
		},
		{
			name:  "beyond Max not watched",
			max:   1,
			steps: []step{{answer: m1}, {answer: m2}, {answer: m1}, {advance: time.Minute}, {sweep: true, want: []hwid.MAC{m1}}},
			want:  discovery.SilentStats{Answered: 2, Unwatched: 1, Silent: 1},
		},
		{
			name: "the record of MACs named starts over when full",
			max:  1,
			steps: []step{
				{answer: m1}, {advance: time.Minute}, {sweep: true, want: []hwid.MAC{m1}},
				{answer: m2}, {advance: time.Minute}, {sweep: true, want: []hwid.MAC{m2}},
				{answer: m1}, {advance: time.Minute}, {sweep: true, want: []hwid.MAC{m1}},
			},
			want: discovery.SilentStats{Answered: 3, Silent: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(epoch)
			s, err := discovery.NewSilent(discovery.SilentConfig{Window: time.Minute, Max: tc.max, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				switch {
				case st.advance > 0:
					clk.Advance(st.advance)
				case st.sweep:
					if diff := cmp.Diff(st.want, s.Sweep()); diff != "" {
						t.Errorf("step %d: Sweep (-want +got):\n%s", i, diff)
					}
				case st.ask != hwid.MAC{}:
					s.Asked(st.ask)
				default:
					s.Answered(st.answer)
				}
			}
			if diff := cmp.Diff(tc.want, s.Stats()); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSilentWallClockStep: the window runs on the monotonic clock: a wall clock stepped
// forward does not make a machine silent early.
func TestSilentWallClockStep(t *testing.T) {
	clk := clocktest.New(epoch)
	s, _ := discovery.NewSilent(discovery.SilentConfig{Window: time.Minute, Clock: clk})
	s.Answered(hwid.MAC{0x52, 0x54, 0, 0, 0, 1})
	clk.Set(epoch.Add(time.Hour))
	if got := s.Sweep(); len(got) != 0 {
		t.Fatalf("silent after a wall clock step: %v", got)
	}
}

func TestSilentConfig(t *testing.T) {
	for _, c := range []discovery.SilentConfig{{Max: -1}, {Max: 1<<16 + 1}, {Window: -time.Second}} {
		if _, err := discovery.NewSilent(c); !errors.Is(err, discovery.ErrConfig) {
			t.Errorf("NewSilent(%+v): %v, want ErrConfig", c, err)
		}
	}
	if _, err := discovery.NewSilent(discovery.SilentConfig{}); err != nil {
		t.Errorf("the zero SilentConfig: %v", err)
	}
}

// TestSilentConcurrent: answers, requests and sweeps from several goroutines (run with
// -race) keep the counts whole: every watched answer ends asked, silent or still watched.
func TestSilentConcurrent(t *testing.T) {
	clk := clocktest.New(epoch)
	s, _ := discovery.NewSilent(discovery.SilentConfig{Window: time.Second, Max: 64, Clock: clk})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				mac := hwid.MAC{0x52, 0x54, 0, byte(g), 0, byte(i % 50)}
				s.Answered(mac)
				if i%3 == 0 {
					s.Asked(mac)
				}
				if i%10 == 0 {
					clk.Advance(time.Second)
					s.Sweep()
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Watching > 64 || st.Answered+st.Unwatched != 800 {
		t.Fatalf("stats %+v: watching beyond Max, or answers lost", st)
	}
}
