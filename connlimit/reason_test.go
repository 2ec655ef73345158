package connlimit_test

import (
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/connlimit"
)

func TestReasonOf(t *testing.T) {
	bad := connlimit.Limits{PerSource: -1}.Validate()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{bad, "limits"},
		{connlimit.ErrNoRoom, "no-room"},
	} {
		if got := connlimit.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
