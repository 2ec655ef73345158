// Package casregtest checks that a casreg.Register keeps the register's contract; the
// memory register's tests and the etcd register's run it.
package casregtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/bettercompute/siteboot/casreg"
)

// TestRegister checks r's contract under keys beginning with prefix, which must hold no
// value yet: a missing key, versions that only grow, compare-and-swap from a stale or a
// made-up version, values kept apart by key and as given (empty, binary), and writers that
// race on one version, of whom exactly one wins each round.
func TestRegister(t *testing.T, r casreg.Register, prefix string) {
	t.Helper()
	ctx := context.Background()
	k := prefix + "a"
	t.Run("missing key", func(t *testing.T) {
		b, v, err := r.Get(ctx, prefix+"missing")
		if err != nil || v != 0 || b != nil {
			t.Fatalf("Get of a missing key = %q, %d, %v; want nil, 0, nil", b, v, err)
		}
		if _, err := r.CompareAndSwap(ctx, prefix+"missing", 7, []byte("x")); !errors.Is(err, casreg.ErrConflict) {
			t.Errorf("CompareAndSwap of a missing key from version 7: %v, want ErrConflict", err)
		}
		if b, v, _ := r.Get(ctx, prefix+"missing"); v != 0 || b != nil {
			t.Errorf("a refused write was stored: %q, %d", b, v)
		}
	})
	t.Run("versions grow", func(t *testing.T) {
		var last casreg.Version
		for i, val := range [][]byte{[]byte("one"), {}, {0, 0xff, '\n', 0}, bytes.Repeat([]byte("x"), 4000)} {
			v, err := r.CompareAndSwap(ctx, k, last, val)
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			if v <= last {
				t.Fatalf("write %d: version %d after %d", i, v, last)
			}
			got, gv, err := r.Get(ctx, k)
			if err != nil || gv != v || !bytes.Equal(got, val) || got == nil {
				t.Fatalf("write %d: Get = %q, %d, %v; want %q, %d", i, got, gv, err, val, v)
			}
			// A stale version, or the current one plus one, writes nothing.
			for _, bad := range []casreg.Version{0, last, v + 1} {
				if bad == v {
					continue
				}
				if _, err := r.CompareAndSwap(ctx, k, bad, []byte("stale")); !errors.Is(err, casreg.ErrConflict) {
					t.Errorf("write %d: CompareAndSwap from %d (stored %d): %v, want ErrConflict", i, bad, v, err)
				}
			}
			if got, gv, _ := r.Get(ctx, k); gv != v || !bytes.Equal(got, val) {
				t.Fatalf("write %d: a refused write changed the value: %q, %d", i, got, gv)
			}
			last = v
		}
		// Another key's writes also give versions beyond this key's.
		other, err := r.CompareAndSwap(ctx, prefix+"b", 0, []byte("b"))
		if err != nil || other <= last {
			t.Errorf("another key's first version %d after %d: %v", other, last, err)
		}
		if got, gv, _ := r.Get(ctx, k); gv != last || bytes.Equal(got, []byte("b")) {
			t.Errorf("a write of another key changed this one: %q, %d", got, gv)
		}
	})
	t.Run("the caller's bytes are its own", func(t *testing.T) {
		key := prefix + "own"
		val := []byte("abc")
		v, err := r.CompareAndSwap(ctx, key, 0, val)
		if err != nil {
			t.Fatal(err)
		}
		val[0] = 'X'
		got, _, _ := r.Get(ctx, key)
		if string(got) != "abc" {
			t.Fatalf("stored %q after the caller changed its slice", got)
		}
		got[1] = 'Y'
		if again, gv, _ := r.Get(ctx, key); string(again) != "abc" || gv != v {
			t.Errorf("stored %q, %d after the caller changed what Get returned", again, gv)
		}
	})
	t.Run("conflicting writers", func(t *testing.T) {
		key := prefix + "race"
		const writers, rounds = 8, 20
		var ver casreg.Version
		for round := range rounds {
			var wg sync.WaitGroup
			wins := make(chan casreg.Version, writers)
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					v, err := r.CompareAndSwap(ctx, key, ver, fmt.Appendf(nil, "%d/%d", round, w))
					switch {
					case err == nil:
						wins <- v
					case !errors.Is(err, casreg.ErrConflict):
						errs <- err
					}
				})
			}
			wg.Wait()
			close(wins)
			close(errs)
			for err := range errs {
				t.Fatalf("round %d: %v", round, err)
			}
			if len(wins) != 1 {
				t.Fatalf("round %d: %d writers won from version %d; want exactly 1", round, len(wins), ver)
			}
			won := <-wins
			if won <= ver {
				t.Fatalf("round %d: version %d after %d", round, won, ver)
			}
			ver = won
		}
		b, v, err := r.Get(ctx, key)
		if err != nil || v != ver || !bytes.HasPrefix(b, fmt.Appendf(nil, "%d/", rounds-1)) {
			t.Errorf("after the race: %q, %d, %v; want round %d's value at %d", b, v, err, rounds-1, ver)
		}
	})
}
