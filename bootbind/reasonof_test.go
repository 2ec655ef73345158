package bootbind_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/bootbind"
)

func TestReasonOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""}, {errors.New("other"), ""},
		{bootbind.NoNonce.Err(), "no-nonce"},
		{fmt.Errorf("ipxe: unbound: %w", bootbind.OtherAddress.Err()), "nonce-other-address"},
		{bootbind.ErrUnbound, "unbound"},
		{bootbind.ErrKeyInFlight, "key-in-flight"},
		{&bootbind.DamagedError{Path: "n.json", Err: errors.New("bad json")}, "damaged"},
		{fmt.Errorf("save: %w", bootbind.ErrTooLarge), "too-large"},
	} {
		if got := bootbind.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
