package udpbind_test

import (
	"context"
	"fmt"
	"net"

	"github.com/bettercompute/siteboot/udpbind"
)

// A proxy DHCP host binds its sockets to the provisioning interface ("eth1" say); with no
// interface named, as here, the socket hears every interface.
func ExampleListenPacket() {
	conn, err := udpbind.ListenPacket(context.Background(), "udp4", "127.0.0.1:0", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	peer, err := net.Dial("udp4", conn.LocalAddr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer peer.Close()
	peer.Write([]byte("DHCPDISCOVER"))
	buf := make([]byte, 64)
	n, _, err := conn.ReadFrom(buf)
	fmt.Println(string(buf[:n]), err)
	// Output: DHCPDISCOVER <nil>
}
