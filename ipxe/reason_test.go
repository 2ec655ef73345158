package ipxe_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/ipxe"
)

func TestReasonOf(t *testing.T) {
	_, qerr := ipxe.ParseQuery("mac=not-a-mac")
	if qerr == nil {
		t.Fatal("ParseQuery accepted a bad MAC")
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{qerr, "bad-query"},
		{fmt.Errorf("token: %w", ipxe.ErrNotReady), "not-ready"},
		{fmt.Errorf("entry: %w", ipxe.ErrMismatch), "mismatch"},
		{fmt.Errorf("entry: %w", ipxe.ErrUnbound), "unbound"},
	} {
		if got := ipxe.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
