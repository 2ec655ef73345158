package agent

import (
	"fmt"
	"time"

	"github.com/bettercompute/siteboot/bootserver"
)

// validateServing refuses a configuration that would start and then serve no machine (issue
// "configs that cannot serve"): each case names the field to set.
//
//   - No address for machines: without proxy DHCP and TFTP, Boot.ServerIP is not required,
//     but the kernel, the initrd and bc.cache (the cache grant's URL) must be absolute URLs
//     (every /boot/ipxe would answer 500 otherwise): Boot.HTTPBase, Boot.ServerIP or
//     Boot.CacheURL must be set (Boot.HTTPBase is named).
//   - Boot.ServerIP, when set, that no machine can reach: unspecified, multicast, the
//     broadcast address, or with a zone.
//   - Boot.HTTPBase, Boot.CacheURL whose host is an unspecified or multicast address
//     (checked with their shape: bootserver.CheckBaseURL, CheckCacheURL).
//   - Boot.NonceWindow out of 10s..1h (zero is DefaultNonceWindow): shorter than an
//     iPXE's fetch and token wait, or a nonce that outlives any boot.
//
// A listener that cannot be bound fails New loudly, so it is not repeated here; neither is
// proxy DHCP without TFTP, which serves machines when the site runs its own TFTP server.
func (c *Config) validateServing() error {
	b := &c.Boot
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if b.HTTPBase == "" && !b.ServerIP.IsValid() && b.CacheURL == "" {
		return bad("Boot.HTTPBase", "required when Boot.ServerIP and Boot.CacheURL are unset: the kernel, initrd and bc.cache URLs need the address machines reach this agent at")
	}
	if ip := b.ServerIP; ip.IsValid() && !bootserver.Reachable(ip) {
		return bad("Boot.ServerIP", "%v is not an address machines can reach", ip)
	}
	if w := b.NonceWindow; w != 0 && (w < 10*time.Second || w > time.Hour) {
		return bad("Boot.NonceWindow", "want 10s to 1h (0 for the default %v), got %v", DefaultNonceWindow, w)
	}
	return nil
}
