//go:build !linux

package udpbind

// bindSupported: only Linux binds a socket to an interface here; ListenPacket refuses a
// named one before it opens a socket.
const bindSupported = false

// bind does nothing: Go's net allows broadcast on every UDP socket it makes, and an
// interface never reaches here.
func bind(uintptr, string) error { return nil }
