package agent

import (
	"sync/atomic"

	"github.com/bettercompute/siteboot/sitelink"
)

// record is a live boot entry as the agent's answers use it: validated, with its UUID and
// arch parsed once ([sitelink.ParsedEntry.Match] is the one rule of whether the machine
// asking is the one it names, S3).
type record = sitelink.ParsedEntry

// mismatches counts refusals by where they were made (proxy DHCP, /boot/) and why. The
// agent answers a machine that does not match its entry with silence (proxy DHCP) or the
// exit script (/boot/ipxe), never a script with a secret.
type mismatches struct {
	dhcp, http [sitelink.NumMismatches]atomic.Uint64
}
