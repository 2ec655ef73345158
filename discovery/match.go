package discovery

import (
	"fmt"
	"slices"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// The candidate window around a power command: a candidate was first seen no earlier than
// MatchSlack before it and no later than MatchWindow after it (both ends included).
const (
	MatchSlack  = 30 * time.Second
	MatchWindow = 10 * time.Minute
)

// Machine is an enrolled machine of a site, as the matcher needs it.
type Machine struct {
	ID   string
	UUID hwid.UUID  // its product UUID; the zero UUID (a placeholder) when it has none
	MACs []hwid.MAC // its known MACs
}

// Query asks for the candidate MAC of a machine enrolled with a product UUID and no MACs,
// which the control plane just power-cycled into PXE.
type Query struct {
	MachineID string    // the machine; its own row in Site is skipped
	UUID      hwid.UUID // its enrolled product UUID, in any spelling
	PoweredAt time.Time // when the power command was sent
	Now       time.Time // the end of the 24-hour window
	Seen      []Merged  // what the site's agents saw: Merge's result, or any list of sightings
	Site      []Machine // the site's enrolled machines
}

// Match returns the sighting whose MAC is the machine's candidate, or a [*MatchError] saying
// why there is none. The rules apply in this order, so the reason names the first that
// fails, permanent conditions first:
//
//  1. no other machine of the site has the UUID in any spelling, else ReasonSharedUUID;
//  2. some MAC was seen from the UUID, in any spelling, with LastSeen within
//     DefaultForgetAfter before Now, else ReasonNotSeen;
//  3. exactly one MAC was, else ReasonAmbiguous;
//  4. that MAC was first seen in [PoweredAt-MatchSlack, PoweredAt+MatchWindow], else
//     ReasonNotSeen;
//  5. no other machine of the site has that MAC, else ReasonMACEnrolled.
//
// A placeholder UUID matches nothing: for the machine's own it returns ErrUnusableUUID, and
// sightings or machines with one are passed over.
func Match(q Query) (Merged, error) {
	if q.Now.IsZero() || q.PoweredAt.IsZero() {
		return Merged{}, fmt.Errorf("%w: Now and PoweredAt must be set", ErrQuery)
	}
	if q.UUID.IsPlaceholder() {
		return Merged{}, fmt.Errorf("%w: %s is a firmware placeholder", ErrUnusableUUID, q.UUID)
	}
	var sharers []string
	for _, m := range q.Site {
		if m.ID != q.MachineID && hwid.SameMachine(q.UUID, m.UUID) {
			sharers = append(sharers, m.ID)
		}
	}
	if len(sharers) > 0 {
		return Merged{}, &MatchError{Reason: ReasonSharedUUID, UUID: q.UUID, MachineIDs: sharers,
			Detail: fmt.Sprintf("UUID %s is also machine %s's", q.UUID, sharers[0])}
	}

	var seen []Merged // one per MAC, FirstSeen the earliest of its sightings
	for _, s := range q.Seen {
		u, ok := s.UUID()
		if !ok || !hwid.SameMachine(q.UUID, u) || q.Now.Sub(s.LastSeen) >= DefaultForgetAfter {
			continue
		}
		if i := slices.IndexFunc(seen, func(m Merged) bool { return m.MAC == s.MAC }); i >= 0 {
			if s.FirstSeen.Before(seen[i].FirstSeen) {
				seen[i].FirstSeen = s.FirstSeen
			}
			continue
		}
		seen = append(seen, s)
	}
	switch {
	case len(seen) == 0:
		return Merged{}, &MatchError{Reason: ReasonNotSeen, UUID: q.UUID,
			Detail: fmt.Sprintf("no MAC seen from UUID %s in the last 24 hours", q.UUID)}
	case len(seen) > 1:
		macs := make([]hwid.MAC, len(seen))
		for i, s := range seen {
			macs[i] = s.MAC
		}
		return Merged{}, &MatchError{Reason: ReasonAmbiguous, UUID: q.UUID, MACs: macs,
			Detail: fmt.Sprintf("%d MACs seen from UUID %s in the last 24 hours", len(macs), q.UUID)}
	}
	c := seen[0]
	from, to := q.PoweredAt.Add(-MatchSlack), q.PoweredAt.Add(MatchWindow)
	if c.FirstSeen.Before(from) || c.FirstSeen.After(to) {
		return Merged{}, &MatchError{Reason: ReasonNotSeen, UUID: q.UUID, MACs: []hwid.MAC{c.MAC},
			Detail: fmt.Sprintf("%s was first seen at %s, outside %s..%s", c.MAC,
				c.FirstSeen.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))}
	}
	for _, m := range q.Site {
		if m.ID != q.MachineID && slices.Contains(m.MACs, c.MAC) {
			return Merged{}, &MatchError{Reason: ReasonMACEnrolled, UUID: q.UUID, MACs: []hwid.MAC{c.MAC},
				MachineIDs: []string{m.ID}, Detail: fmt.Sprintf("%s is machine %s's", c.MAC, m.ID)}
		}
	}
	return c, nil
}

// MACSource is where an enrolled machine's MAC came from.
type MACSource string

// The sources of a MAC. Only MACFromOperator and MACFromInspection are trusted; any other
// value, the empty one included, is checked as strictly as MACDiscovered.
const (
	MACFromOperator   MACSource = "operator"   // enrollment or an operator's confirmation
	MACFromInspection MACSource = "inspection" // the BMC named it
	MACDiscovered     MACSource = "discovered" // bound from a discovery candidate unconfirmed
)

// Identity is what the booted machine reported about itself (its ramdisk's system and NIC
// sections), next to what the machine was enrolled with.
type Identity struct {
	EnrolledUUID hwid.UUID  // the enrolled product UUID; zero when enrolled without one
	MAC          hwid.MAC   // the MAC the machine was booted by
	MACSource    MACSource  // where that MAC came from
	ReportedUUID hwid.UUID  // the product UUID the machine reported; zero when none
	ReportedNICs []hwid.MAC // the MACs of the NICs the machine reported
}

// Verify is the identity backstop. For a MAC from discovery (any source but MACFromOperator
// and MACFromInspection), the reported UUID must be the same machine as the enrolled one
// ([hwid.SameMachine]: any spelling of it against any other) and the reported NICs must
// include the MAC. For a trusted MAC, a UUID present on both sides (not a placeholder on
// either) must still be the same machine ([hwid.DifferentMachines] is false). Otherwise it
// returns a [*MatchError] with ReasonIdentityMismatch.
func (id Identity) Verify() error {
	mismatch := func(format string, args ...any) error {
		return &MatchError{Reason: ReasonIdentityMismatch, UUID: id.EnrolledUUID, MACs: []hwid.MAC{id.MAC},
			Detail: fmt.Sprintf(format, args...)}
	}
	switch id.MACSource {
	case MACFromOperator, MACFromInspection:
		if hwid.DifferentMachines(id.EnrolledUUID, id.ReportedUUID) {
			return mismatch("reported UUID %s is not a spelling of enrolled %s", id.ReportedUUID, id.EnrolledUUID)
		}
		return nil
	}
	if !hwid.SameMachine(id.EnrolledUUID, id.ReportedUUID) {
		return mismatch("reported UUID %s is not a spelling of enrolled %s", id.ReportedUUID, id.EnrolledUUID)
	}
	if !slices.Contains(id.ReportedNICs, id.MAC) {
		return mismatch("reported NICs do not include %s", id.MAC)
	}
	return nil
}
