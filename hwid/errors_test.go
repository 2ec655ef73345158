package hwid_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
)

func TestReasonOf(t *testing.T) {
	_, errMAC := hwid.ParseMAC("zz")
	_, errUUID := hwid.ParseUUID("nope")
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""}, {errors.New("other"), ""},
		{errMAC, "bad-mac"}, {errUUID, "bad-uuid"},
		{fmt.Errorf("config: %w", hwid.ErrBadArch), "bad-arch"},
	} {
		if got := hwid.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
