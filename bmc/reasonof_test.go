package bmc_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/bmc"
)

// ReasonOf names a kind as KindName does, through wrapping and OpError alike.
func TestReasonOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{bmc.ErrAuth, "auth"},
		{fmt.Errorf("power: %w", bmc.ErrDiffers), "differs"},
		{&bmc.OpError{Op: "boot", Kind: bmc.ErrUnsupported, Message: "no UefiHttp"}, "unsupported"},
		{&bmc.OpError{Op: "power", Kind: bmc.ErrScheme}, "scheme"},
		{bmc.ErrJournalDamaged, "journal-damaged"},
	} {
		if got := bmc.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
