package discovery

import (
	"bytes"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// AgentList is the latest list one agent reported.
type AgentList struct {
	AgentID string
	Entries []Entry
}

// Merged is one machine as a site's agents saw it.
type Merged struct {
	MAC         hwid.MAC
	ProductUUID string // from the agent that saw the machine last with one; "" when none
	Arch        string // likewise
	FirstSeen   time.Time
	LastSeen    time.Time
	Count       uint64       // summed over the agents
	Relays      []netip.Addr // every relay an agent names, in address order
	AgentIDs    []string     // every agent that lists the machine, in id order
}

// UUID returns the machine's product UUID, and false when it has none.
func (m Merged) UUID() (hwid.UUID, bool) {
	if m.ProductUUID == "" {
		return hwid.UUID{}, false
	}
	u, err := hwid.ParseUUID(m.ProductUUID)
	return u, err == nil
}

// Merge combines the lists of a site's agents as of now: the machines seen in the last
// DefaultForgetAfter (LastSeen after now minus 24 hours), newest first (ties in MAC order), at
// most DefaultMax of them. Each agent counts with one list: when an agent id appears more
// than once, its last list replaces the earlier ones whole. Fields that an agent should never
// have sent (a UUID not in canonical form, an arch outside [a-z0-9_-]{1,32}, a relay with a
// zone or unspecified) are dropped as the list would have dropped them.
func Merge(now time.Time, lists ...AgentList) []Merged {
	latest := make(map[string]int, len(lists))
	for i, al := range lists {
		latest[al.AgentID] = i
	}
	type acc struct {
		m       Merged
		uuidAt  time.Time
		archAt  time.Time
		hasUUID bool
		hasArch bool
	}
	byMAC := make(map[hwid.MAC]*acc)
	for i, al := range lists {
		if latest[al.AgentID] != i {
			continue
		}
		for _, e := range al.Entries {
			if now.Sub(e.LastSeen) >= DefaultForgetAfter {
				continue
			}
			a := byMAC[e.MAC]
			if a == nil {
				a = &acc{m: Merged{MAC: e.MAC, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen}}
				byMAC[e.MAC] = a
			}
			m := &a.m
			if e.FirstSeen.Before(m.FirstSeen) {
				m.FirstSeen = e.FirstSeen
			}
			if e.LastSeen.After(m.LastSeen) {
				m.LastSeen = e.LastSeen
			}
			m.Count = addSat(m.Count, e.Count)
			if u, st := uuidField(e.ProductUUID); st == fieldOK && (!a.hasUUID || e.LastSeen.After(a.uuidAt)) {
				m.ProductUUID, a.uuidAt, a.hasUUID = u.String(), e.LastSeen, true
			}
			if arch, st := archField(e.Arch); st == fieldOK && (!a.hasArch || e.LastSeen.After(a.archAt)) {
				m.Arch, a.archAt, a.hasArch = arch, e.LastSeen, true
			}
			if r, st := relayAddr(e.Relay); st == fieldOK && !slices.Contains(m.Relays, r) {
				m.Relays = append(m.Relays, r)
			}
			if !slices.Contains(m.AgentIDs, al.AgentID) {
				m.AgentIDs = append(m.AgentIDs, al.AgentID)
			}
		}
	}
	out := make([]Merged, 0, len(byMAC))
	for _, a := range byMAC {
		slices.SortFunc(a.m.Relays, netip.Addr.Compare)
		slices.Sort(a.m.AgentIDs)
		out = append(out, a.m)
	}
	sortNewestFirst(out, func(m *Merged) (time.Time, hwid.MAC) { return m.LastSeen, m.MAC })
	if len(out) > DefaultMax {
		clear(out[DefaultMax:])
		out = out[:DefaultMax]
	}
	return out
}

func addSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

// sortNewestFirst orders by last-seen time, newest first, then by MAC.
func sortNewestFirst[E any](s []E, key func(*E) (time.Time, hwid.MAC)) {
	order := func(i, j int) int {
		ti, mi := key(&s[i])
		tj, mj := key(&s[j])
		if c := tj.Compare(ti); c != 0 {
			return c
		}
		return bytes.Compare(mi[:], mj[:])
	}
	sort.Slice(s, func(i, j int) bool { return order(i, j) < 0 })
}
