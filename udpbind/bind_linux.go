package udpbind

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bindSupported: Linux binds a socket to an interface.
const bindSupported = true

// bind allows broadcast on the socket and, when iface is set, binds it to that interface
// (SO_BINDTODEVICE).
func bind(fd uintptr, iface string) error {
	if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
		return fmt.Errorf("SO_BROADCAST: %w", err)
	}
	if iface == "" {
		return nil
	}
	if err := unix.BindToDevice(int(fd), iface); err != nil {
		return fmt.Errorf("SO_BINDTODEVICE: %w", err)
	}
	return nil
}
