package bootbind_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
)

// The binding wired into proxy DHCP: the server asks the store for a nonce for each unicast
// answer to iPXE, and the script handler claims it with the request's MAC and address.
func Example() {
	nonces := bootbind.NewNonces(bootbind.Config{})
	srv := &proxydhcp.Server{
		Handler: proxydhcp.HandlerFunc(func(context.Context, *proxydhcp.Request) proxydhcp.Decision { return proxydhcp.Answer() }),
		Binder:  nonces,
	}
	_ = srv

	// What proxy DHCP does for iPXE's 4011 REQUEST from 192.0.2.150:
	mac := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}
	machine := netip.MustParseAddr("192.0.2.150")
	n, err := nonces.Bind(context.Background(), mac, machine)
	if err != nil {
		panic(err)
	}
	// The script requests that follow:
	fmt.Println("machine:", nonces.Claim(n, mac, machine))
	fmt.Println("bystander:", nonces.Claim(n, mac, netip.MustParseAddr("192.0.2.66")))
	fmt.Println("MAC only:", nonces.Claim("", mac, machine))
	fmt.Println("another MAC:", nonces.Claim(n, hwid.MAC{0x52, 0x54, 0, 0, 0, 2}, machine))
	// Output:
	// machine: bound
	// bystander: nonce-other-address
	// MAC only: no-nonce
	// another MAC: nonce-other-mac
}
