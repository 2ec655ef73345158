package secureboot

import (
	"sync/atomic"

	"github.com/bettercompute/siteboot/bootbind"
)

// Stats are a Chain's counters, for a host to export.
type Stats struct {
	AnswersPXE  uint64 // proxy DHCP answers naming shim over TFTP
	AnswersHTTP uint64 // proxy DHCP answers naming the RAM disk of UEFI HTTP boot
	// Proxy DHCP answers refused, by reason (RefusedArch, RefusedIPv6, RefusedError).
	RefusedArch, RefusedIPv6, RefusedError uint64
	// Unavailable is the host's own count of Secure Boot machines it stayed silent to for
	// want of a Chain ([RefusedUnavailable]); a Chain never counts it.
	Unavailable uint64

	NonceFetches uint64 // files fetched over TFTP under a machine's nonce by its owner
	OtherAddress uint64 // fetches under a machine's nonce from another address than its owner's
	Images       uint64 // RAM disks served, each with a key

	// Requests for a machine's configuration refused for not presenting its key from the
	// address it went to, by bootbind reason.
	Unbound UnboundCounts
	Busy    uint64 // requests refused because MaxRenders configurations were in the making

	// Decisions spelled for GRUB, by kind; ConfigWaits counts the wait configurations sent
	// because a decision took longer than RenderWait.
	Boots, Fenced, Waits, Exits, ConfigWaits uint64
	// BadQueries counts configuration requests whose query did not parse (not a Chain's),
	// answered with the exit configuration; they are not in Exits.
	BadQueries uint64
	Errors     uint64 // decisions that could not be spelled, files that could not be read

	Keys bootbind.KeyStats // the key store's counters
}

// UnboundCounts counts refused configuration requests, one field per [bootbind.Reason] a
// key can be refused for (the field's comment names it).
type UnboundCounts struct {
	NoKey        uint64 // bootbind.NoNonce: the request presented no key
	UnknownKey   uint64 // bootbind.UnknownNonce: a key never issued, forgotten or not active
	Lapsed       uint64 // bootbind.Lapsed
	OtherMAC     uint64 // bootbind.OtherMAC
	OtherAddress uint64 // bootbind.OtherAddress: from another address than the key went to
}

// Of returns the count of reason r, 0 for a reason a key is never refused for: a host that
// labels a metric with the reason's name ranges over bootbind.Refusals and asks Of.
func (c UnboundCounts) Of(r bootbind.Reason) uint64 {
	switch r {
	case bootbind.NoNonce:
		return c.NoKey
	case bootbind.UnknownNonce:
		return c.UnknownKey
	case bootbind.Lapsed:
		return c.Lapsed
	case bootbind.OtherMAC:
		return c.OtherMAC
	case bootbind.OtherAddress:
		return c.OtherAddress
	}
	return 0
}

type counters struct {
	answersPXE, answersHTTP                   atomic.Uint64
	refusedArch, refusedIPv6, refusedError    atomic.Uint64
	nonceFetches, otherAddress, images        atomic.Uint64
	noKey, unknownKey, lapsed, otherMAC, away atomic.Uint64
	busy                                      atomic.Uint64
	boots, fenced, waits, exits, configWaits  atomic.Uint64
	badQueries                                atomic.Uint64
	errors                                    atomic.Uint64
}

func (n *counters) refused(reason string) {
	switch reason {
	case RefusedArch:
		n.refusedArch.Add(1)
	case RefusedIPv6:
		n.refusedIPv6.Add(1)
	default:
		n.refusedError.Add(1)
	}
}

func (n *counters) unbound(r bootbind.Reason) {
	switch r {
	case bootbind.NoNonce:
		n.noKey.Add(1)
	case bootbind.UnknownNonce:
		n.unknownKey.Add(1)
	case bootbind.Lapsed:
		n.lapsed.Add(1)
	case bootbind.OtherMAC:
		n.otherMAC.Add(1)
	case bootbind.OtherAddress:
		n.away.Add(1)
	}
}

// Stats returns the chain's counters.
func (s *Chain) Stats() Stats {
	n := &s.n
	return Stats{
		AnswersPXE: n.answersPXE.Load(), AnswersHTTP: n.answersHTTP.Load(),
		RefusedArch: n.refusedArch.Load(), RefusedIPv6: n.refusedIPv6.Load(), RefusedError: n.refusedError.Load(),
		NonceFetches: n.nonceFetches.Load(), OtherAddress: n.otherAddress.Load(), Images: n.images.Load(),
		Unbound: UnboundCounts{
			NoKey: n.noKey.Load(), UnknownKey: n.unknownKey.Load(), Lapsed: n.lapsed.Load(),
			OtherMAC: n.otherMAC.Load(), OtherAddress: n.away.Load(),
		},
		Busy:  n.busy.Load(),
		Boots: n.boots.Load(), Fenced: n.fenced.Load(), Waits: n.waits.Load(), Exits: n.exits.Load(),
		ConfigWaits: n.configWaits.Load(), Errors: n.errors.Load(), BadQueries: n.badQueries.Load(),
		Keys: s.keys.Stats(),
	}
}
