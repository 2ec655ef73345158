package udpbind_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/bettercompute/siteboot/udpbind"
)

func TestReasonOf(t *testing.T) {
	_, errNet := udpbind.ListenPacket(context.Background(), "tcp", "127.0.0.1:0", "")
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""}, {errNet, "network"},
		{fmt.Errorf("udpbind: x on interface eth9: %w", errors.ErrUnsupported), "unsupported"},
		{errors.ErrUnsupported, ""}, // another package's
		{syscall.ENODEV, ""},
	} {
		if got := udpbind.ReasonOf(c.err); got != c.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
