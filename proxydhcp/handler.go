package proxydhcp

import (
	"context"
	"strconv"
)

// Handler decides whether a request is answered. The host implements it: answer only a MAC
// with a live boot entry while this agent is the active boot server. Check the fence first:
// a fenced agent returns ReasonFenced for every MAC, so only an active agent reports unknown
// machines (ReasonUnknown) to the Discoverer.
//
// ServeDHCP is called from the server's workers, concurrently; it should return quickly
// (its context ends at Close, or after Server.HandlerTimeout when set). A panic is recovered
// and counted as ReasonError.
type Handler interface {
	ServeDHCP(ctx context.Context, req *Request) Decision
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, req *Request) Decision

// ServeDHCP calls f(ctx, req).
func (f HandlerFunc) ServeDHCP(ctx context.Context, req *Request) Decision { return f(ctx, req) }

// Discoverer is told about boot requests the host's Handler answered with ReasonUnknown: a
// PXE or HTTP boot client whose MAC has no live entry while this agent is active (P6). The
// Request's fields are typed and well-formed (MAC, UUID, Arch, Relay); it must not be kept
// past the call. Discovered is called from the server's workers and should return quickly.
type Discoverer interface {
	Discovered(ctx context.Context, req *Request)
}

// DiscovererFunc adapts a function to a Discoverer.
type DiscovererFunc func(ctx context.Context, req *Request)

// Discovered calls f(ctx, req).
func (f DiscovererFunc) Discovered(ctx context.Context, req *Request) { f(ctx, req) }

// Decision is a Handler's answer. The zero Decision is silence for ReasonDeclined.
type Decision struct {
	// Answer is true to answer the request with a boot file.
	Answer bool

	// Reason says why the request gets silence when Answer is false: ReasonUnknown (no live
	// boot entry: the request also goes to the Discoverer), ReasonFenced (not the active
	// boot server) or ReasonDeclined (anything else). Zero, or any other reason, counts as
	// ReasonDeclined.
	Reason Reason

	// BootFile, when set, is put in the reply as it is instead of what BootFiles gives for
	// this client: a TFTP file name (a signed shim for Secure Boot, say) or a full URL for an
	// HTTP boot client or iPXE. The host can build URLs from Request.Server.
	BootFile string

	// NoUUID, with Answer, says the host answered without the SMBIOS UUID check its entry
	// asks for, because the request carried no option 97 (some Intel cards send none): the
	// machine was answered on its MAC (and arch) alone. The answer's event then carries
	// Detail NoteNoUUID and Stats counts it (PortStats.AnsweredNoUUID). A host sets it when
	// its entry names a UUID and Request.HasUUID is false.
	NoUUID bool
}

// NoteNoUUID ("no-uuid") is the Detail of the event of an answer given with Decision.NoUUID:
// stable, fit for a metric label.
const NoteNoUUID = "no-uuid"

// Answer returns a Decision to answer with the boot file of the table.
func Answer() Decision { return Decision{Answer: true} }

// AnswerFile returns a Decision to answer with file instead of the table's boot file.
func AnswerFile(file string) Decision { return Decision{Answer: true, BootFile: file} }

// Silence returns a Decision to stay silent for reason r.
func Silence(r Reason) Decision { return Decision{Reason: r} }

// Reason says why a request got no answer.
type Reason uint8

// Reasons for silence. The first three come from a Handler; the others from the server.
const (
	ReasonNone            Reason = iota // answered
	ReasonUnknown                       // "unknown": the MAC has no live boot entry
	ReasonFenced                        // "fenced": this agent is not the active boot server
	ReasonDeclined                      // "declined": the host said no for another reason
	ReasonNotPXE                        // "not-pxe": option 60 names neither PXEClient nor HTTPClient
	ReasonMalformed                     // "malformed": not a well-formed DHCP request
	ReasonIgnored                       // "ignored": a message not for a proxy (a REQUEST to the site's DHCP server, say)
	ReasonNoBootFile                    // "no-boot-file": the table has no file for the architecture
	ReasonNoServerAddress               // "no-server-address": no address to name as the server (IPv4; for DHCPv6 one other than link-local)
	ReasonOverload                      // "overload": dropped unread, every worker busy and the socket buffer full
	ReasonError                         // "error": the handler panicked or gave an unusable boot file
	ReasonRelayNotAllowed               // "relay-not-allowed": relayed by an address not in Server.Relays
	ReasonNoMAC                         // "no-mac": a DHCPv6 boot client whose MAC cannot be known (ErrNoMAC)
	ReasonOffSegment                    // "off-segment": the answer would go to an address on no provisioning segment (Server.Segments)
	numReasons
)

var reasonNames = [numReasons]string{
	"answered", "unknown", "fenced", "declined", "not-pxe", "malformed", "ignored",
	"no-boot-file", "no-server-address", "overload", "error", "relay-not-allowed", "no-mac",
	"off-segment",
}

// String returns the reason's name, as listed with the constants.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason-" + strconv.Itoa(int(r))
}

// Reasons lists every reason for silence, in order, for hosts exporting counters.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := ReasonUnknown; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// Fence says whether this agent is the site's active boot server, and under which lease
// epoch: the one method every siteboot package that acts only while active takes.
type Fence interface {
	Active() (epoch uint64, active bool)
}

// FenceFunc adapts a function to a Fence.
type FenceFunc func() (uint64, bool)

// Active calls f.
func (f FenceFunc) Active() (uint64, bool) { return f() }
