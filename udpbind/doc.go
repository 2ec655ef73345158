// Package udpbind opens a UDP socket bound to one network interface, so that a server on it
// (proxy DHCP) hears and answers only the segment it serves.
//
// # Wiring
//
// [ListenPacket] is [net.ListenConfig.ListenPacket] with the interface named:
//
//	conn, err := udpbind.ListenPacket(ctx, "udp4", "0.0.0.0:67", "eth1")
//	srv.Serve(conn)
//
// Broadcast is allowed on the socket (a DHCP server answers clients without an address by
// broadcast). An empty interface name binds no interface: the socket hears every interface,
// as net.ListenPacket's does.
//
// # Systems
//
// On Linux the socket is bound with SO_BINDTODEVICE, which needs CAP_NET_RAW on kernels
// before 5.7; a name that is no interface fails with ENODEV. Other systems (macOS, FreeBSD,
// Windows) have no such option that Go can use alike, so there ListenPacket refuses a named
// interface with an error wrapping [errors.ErrUnsupported] before any socket is opened,
// rather than listen on every interface unasked; with no interface named it works
// everywhere. A host there binds the interface's own address instead, which on most
// systems does not receive broadcasts.
package udpbind
