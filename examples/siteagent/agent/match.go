package agent

import (
	"fmt"
	"sync/atomic"

	"github.com/bettercompute/siteboot/hwid"
)

// mismatch says why a machine is not the one its boot entry names (S3). The agent answers
// such a machine with silence (proxy DHCP) or the exit script (/boot/ipxe), never a script
// with a secret, and counts and logs each by reason.
type mismatch uint8

// Reasons a machine does not match its entry.
const (
	matches      mismatch = iota // the machine matches (or sent nothing to compare)
	mismatchArch                 // "arch-mismatch": option 93 (or iPXE's platform) names another firmware
	mismatchUUID                 // "uuid-mismatch": option 97 (or ${uuid}) is no spelling of the entry's UUID
	numMismatches
)

func (m mismatch) String() string {
	switch m {
	case matches:
		return "match"
	case mismatchArch:
		return "arch-mismatch"
	case mismatchUUID:
		return "uuid-mismatch"
	}
	return fmt.Sprintf("mismatch(%d)", uint8(m))
}

// match is the one decision on whether the machine asking is the one r names: its arch and
// UUID are compared when both the request and the entry have one, the UUID in any spelling
// against any other ([hwid.DifferentMachines]). A firmware placeholder UUID identifies
// nothing, so it is never compared.
func (r record) match(arch hwid.Arch, hasArch bool, uuid hwid.UUID) mismatch {
	if hasArch && !hwid.SameArch(arch, r.arch) {
		return mismatchArch
	}
	if hwid.DifferentMachines(r.uuid, uuid) {
		return mismatchUUID
	}
	return matches
}

// mismatches counts refusals by where they were made and why.
type mismatches struct {
	dhcp, http [numMismatches]atomic.Uint64
}
