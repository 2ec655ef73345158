package lease_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/lease"
)

func TestReasonOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{&lease.OpError{Op: "cas", Site: "s", Err: lease.ErrConflict}, "conflict"},
		{&lease.CheckError{Site: "s", Err: lease.ErrStaleEpoch}, "stale-epoch"},
		{&lease.CheckError{Site: "s", Err: lease.ErrNotHolder}, "not-holder"},
		{fmt.Errorf("check: %w", &lease.CheckError{Err: lease.ErrLapsed}), "lapsed"},
		{&lease.NoAgentError{Site: "s"}, "no-agent"},
		{&lease.OpError{Op: "get", Err: fmt.Errorf("%w: short", lease.ErrBadRecord)}, "bad-record"},
	} {
		if got := lease.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
