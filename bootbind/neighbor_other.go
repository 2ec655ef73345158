//go:build !linux

package bootbind

import (
	"net/netip"

	"github.com/bettercompute/siteboot/hwid"
)

// NeighborMAC resolves an address to the link-layer address the kernel's neighbour cache
// holds for it; elsewhere than Linux it knows none.
func NeighborMAC(a netip.Addr) (hwid.MAC, bool) { return hwid.MAC{}, false }
