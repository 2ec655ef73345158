//go:build !linux

package udpbind_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bettercompute/siteboot/udpbind"
)

// TestNamedInterfaceUnsupported: off Linux a named interface is refused, never ignored.
func TestNamedInterfaceUnsupported(t *testing.T) {
	c, err := udpbind.ListenPacket(context.Background(), "udp4", "127.0.0.1:0", "lo0")
	if !errors.Is(err, errors.ErrUnsupported) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("ListenPacket on lo0: %v, want errors.ErrUnsupported", err)
	}
}
