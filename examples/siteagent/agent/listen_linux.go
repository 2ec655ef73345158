package agent

import "golang.org/x/sys/unix"

// bindUDP allows broadcast on the socket and, when iface is set, binds it to that interface
// (SO_BINDTODEVICE).
func bindUDP(fd uintptr, iface string) error {
	err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
	if err == nil && iface != "" {
		err = unix.BindToDevice(int(fd), iface)
	}
	return err
}
