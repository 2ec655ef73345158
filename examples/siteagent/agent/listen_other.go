//go:build !linux

package agent

import (
	"errors"
	"fmt"
)

// bindUDP refuses an interface: binding a socket to one (SO_BINDTODEVICE) is Linux's.
// Broadcast needs nothing here: Go's net allows it on every UDP socket it makes.
func bindUDP(_ uintptr, iface string) error {
	if iface != "" {
		return fmt.Errorf("binding to interface %s: %w", iface, errors.ErrUnsupported)
	}
	return nil
}
