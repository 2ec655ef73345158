package errname_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/internal/errname"
)

func TestOf(t *testing.T) {
	errA := errors.New("a")
	errB := fmt.Errorf("b, a kind of a: %w", errA)
	tab := errname.Table{{errB, "b"}, {errA, "a"}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("other"), ""},
		{errA, "a"},
		{fmt.Errorf("wrapped: %w", errA), "a"},
		{errB, "b"}, // the first in the table wins
		{fmt.Errorf("wrapped: %w", errB), "b"},
		{errors.Join(errors.New("x"), errA), "a"},
	} {
		if got := tab.Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
