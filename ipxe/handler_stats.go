package ipxe

import "sync/atomic"

// Stats are the handler's running totals.
type Stats struct {
	Requests        uint64 // every request
	Chains          uint64 // chain.ipxe answered
	Scripts         uint64 // ramdisk boot scripts answered (200)
	Sanboots        uint64 // sanboot scripts answered (200)
	LocalBoots      uint64 // local boot scripts answered (200)
	Unknown         uint64 // 404: no live entry
	Mismatched      uint64 // 404: the machine does not match its entry (arch or UUID), said the host
	Unbound         uint64 // 404: the host said the requester is not bound to the machine's DHCP answer
	UUIDRefused     uint64 // 404: the query's UUID is no spelling of the entry's
	IPRefused       uint64 // 404: the query's IP is not the connection's address
	Discovered      uint64 // unknown machines reported to OnDiscovered
	Fenced          uint64 // 503: this agent is not the active boot server
	TokenWaits      uint64 // 503: the discovery token is not available yet
	SanbootWaits    uint64 // 503: the ISO is not pinned and cached yet
	TokenFetches    uint64 // times the host's Tokens was asked
	BadRequests     uint64 // 400: query refused
	HeadersTooLarge uint64 // 431
	MethodsRefused  uint64 // 405
	NotFound        uint64 // 404 for a path or file
	Files           uint64 // files answered
	Errors          uint64 // 500: a host interface failed or a value was refused
}

// Add returns the field-by-field sum of s and t: the totals of two handlers that serve one
// site, such as bootserver's IPv4 and IPv6 boot handlers.
func (s Stats) Add(t Stats) Stats {
	s.Requests += t.Requests
	s.Chains += t.Chains
	s.Scripts += t.Scripts
	s.Sanboots += t.Sanboots
	s.LocalBoots += t.LocalBoots
	s.Unknown += t.Unknown
	s.Mismatched += t.Mismatched
	s.Unbound += t.Unbound
	s.UUIDRefused += t.UUIDRefused
	s.IPRefused += t.IPRefused
	s.Discovered += t.Discovered
	s.Fenced += t.Fenced
	s.TokenWaits += t.TokenWaits
	s.SanbootWaits += t.SanbootWaits
	s.TokenFetches += t.TokenFetches
	s.BadRequests += t.BadRequests
	s.HeadersTooLarge += t.HeadersTooLarge
	s.MethodsRefused += t.MethodsRefused
	s.NotFound += t.NotFound
	s.Files += t.Files
	s.Errors += t.Errors
	return s
}

type counters struct {
	requests, chains, scripts, sanboots, localBoots, unknown, discovered, fenced, tokenWaits,
	sanbootWaits, tokenFetches, mismatched, unbound, uuidRefused, ipRefused, badRequests, headersTooLarge, methodsRefused, notFound,
	files, errors atomic.Uint64
}

// Stats returns a snapshot of the running totals.
func (h *Handler) Stats() Stats {
	c := &h.n
	return Stats{
		Requests: c.requests.Load(), Chains: c.chains.Load(), Scripts: c.scripts.Load(),
		Sanboots: c.sanboots.Load(), LocalBoots: c.localBoots.Load(), Unknown: c.unknown.Load(), Mismatched: c.mismatched.Load(),
		Unbound: c.unbound.Load(), UUIDRefused: c.uuidRefused.Load(), IPRefused: c.ipRefused.Load(), Discovered: c.discovered.Load(),
		Fenced: c.fenced.Load(), TokenWaits: c.tokenWaits.Load(), SanbootWaits: c.sanbootWaits.Load(),
		TokenFetches: c.tokenFetches.Load(), BadRequests: c.badRequests.Load(),
		HeadersTooLarge: c.headersTooLarge.Load(), MethodsRefused: c.methodsRefused.Load(),
		NotFound: c.notFound.Load(), Files: c.files.Load(), Errors: c.errors.Load(),
	}
}
