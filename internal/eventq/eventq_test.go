package eventq_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/internal/eventq"
)

// Events come out by time, and those due at the same time in the order they were pushed:
// a simulation's seed replays exactly only if ties are broken the same way every run.
func TestOrder(t *testing.T) {
	var q eventq.Queue
	var got []string
	push := func(at time.Duration, name string) { q.Push(at, func() { got = append(got, name) }) }
	push(3*time.Second, "c1")
	push(1*time.Second, "a")
	push(3*time.Second, "c2")
	push(2*time.Second, "b")
	push(3*time.Second, "c3")
	var times []time.Duration
	for {
		at, fn, ok := q.Pop()
		if !ok {
			break
		}
		times = append(times, at)
		fn()
	}
	if diff := cmp.Diff([]string{"a", "b", "c1", "c2", "c3"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}, times); diff != "" {
		t.Errorf("times (-want +got):\n%s", diff)
	}
	if q.Len() != 0 {
		t.Errorf("Len after draining = %d", q.Len())
	}
}

// Events pushed while the queue runs (as a simulation's handlers do) take their place.
func TestPushWhileRunning(t *testing.T) {
	var q eventq.Queue
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	var last time.Duration
	q.Push(0, func() {})
	for steps := 0; steps < 1000; steps++ {
		at, fn, ok := q.Pop()
		if !ok {
			break
		}
		if at < last {
			t.Fatalf("step %d: event at %v after one at %v", steps, at, last)
		}
		last = at
		fn()
		for range rng.IntN(3) {
			n++
			q.Push(at+time.Duration(rng.IntN(5))*time.Millisecond, func() {})
		}
	}
	if n == 0 {
		t.Fatal("the run pushed nothing")
	}
}
