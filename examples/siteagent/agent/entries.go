package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/atomicfile"
	"github.com/bettercompute/siteboot/sitelink"
)

// entryArchs maps an entry's arch to the option 93 number its firmware sends over PXE; the
// same firmware's HTTP-boot number matches too ([hwid.SameArch]).
var entryArchs = map[string]hwid.Arch{
	sitelink.ArchBIOS:     hwid.ArchBIOS,
	sitelink.ArchX86UEFI:  hwid.ArchX86_64EFI,
	sitelink.ArchARM64EFI: hwid.ArchARM64EFI,
}

// record is a validated entry with its UUID and arch parsed once.
type record struct {
	sitelink.ProxyDhcpEntry
	uuid hwid.UUID // zero when the entry names none
	arch hwid.Arch
}

func newRecord(e sitelink.ProxyDhcpEntry) record {
	r := record{ProxyDhcpEntry: e, arch: entryArchs[e.Arch]}
	if e.UUID != "" {
		r.uuid, _ = hwid.ParseUUID(e.UUID) // Validate checked it
	}
	return r
}

// Entries holds the boot entries by MAC and keeps them in a file that survives a crash: a
// change is acknowledged (the call returns nil) only once it is on disk.
type Entries struct {
	path string
	now  func() time.Time

	mu sync.RWMutex
	m  map[hwid.MAC]record

	damage *EntriesDamage // set by OpenEntries, never changed
	writes atomic.Uint64  // writes of the file
}

// Writes is how many times the file was written since OpenEntries.
func (s *Entries) Writes() uint64 { return s.writes.Load() }

// EntriesSetAsideInfix is put between the entries file's name and a time to name a
// damaged file set aside: "boot-entries.json.damaged-20260102T030405.000000006Z". Set-aside
// files are never removed by the agent.
const EntriesSetAsideInfix = ".damaged-"

// EntriesDamage says how the entries file was damaged when it was opened.
type EntriesDamage struct {
	// SetAside is the name, in the file's directory, the damaged file was renamed to.
	SetAside string
	// Reason says what did not parse or validate (the first such entry).
	Reason string
	// Kept is the number of entries kept; Dropped the number dropped, -1 when the file did
	// not parse as a list at all.
	Kept, Dropped int
}

// OpenEntries loads the entries in path, if the file exists, and drops those that lapsed.
// A file that does not parse, or holds entries that do not, is not an error: the valid
// entries are served, the file is renamed aside (EntriesSetAsideInfix, never deleted),
// the valid entries are written anew, and Damage says what happened. An error means the
// file could not be read or set aside.
func OpenEntries(path string, now func() time.Time) (*Entries, error) {
	if now == nil {
		now = time.Now
	}
	s := &Entries{path: path, now: now, m: map[hwid.MAC]record{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("agent: boot entries: %w", err)
	}
	var raw []json.RawMessage
	var reason string
	dropped := 0
	if err := json.Unmarshal(b, &raw); err != nil {
		reason, dropped = err.Error(), -1
	}
	for i, r := range raw {
		var e sitelink.ProxyDhcpEntry
		err := json.Unmarshal(r, &e)
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			if dropped == 0 {
				reason = fmt.Sprintf("entry %d: %v", i, err)
			}
			dropped++
			continue
		}
		s.m[e.MAC] = newRecord(e)
	}
	if dropped != 0 {
		aside := path + EntriesSetAsideInfix + now().UTC().Format("20060102T150405.000000000Z")
		if err := os.Rename(path, aside); err != nil {
			return nil, fmt.Errorf("agent: set damaged boot entries aside: %w", err)
		}
		s.damage = &EntriesDamage{SetAside: filepath.Base(aside), Reason: reason, Kept: len(s.m), Dropped: dropped}
		// The valid entries are written anew, so that the next start finds a sound file.
		if err := s.update(func(m map[hwid.MAC]record) map[hwid.MAC]record { return m }); err != nil {
			return nil, err
		}
	}
	s.Prune()
	return s, nil
}

// Damage returns how the entries file was damaged when it was opened, if it was.
func (s *Entries) Damage() (EntriesDamage, bool) {
	if s.damage == nil {
		return EntriesDamage{}, false
	}
	return *s.damage, true
}

// Lookup returns the live entry for mac.
func (s *Entries) Lookup(mac hwid.MAC) (sitelink.ProxyDhcpEntry, bool) {
	r, ok := s.lookup(mac)
	return r.ProxyDhcpEntry, ok
}

func (s *Entries) lookup(mac hwid.MAC) (record, bool) {
	s.mu.RLock()
	r, ok := s.m[mac]
	s.mu.RUnlock()
	if !ok || !s.now().Before(r.NotAfter) {
		return record{}, false
	}
	return r, true
}

// All returns the live entries, ordered by MAC.
func (s *Entries) All() []sitelink.ProxyDhcpEntry {
	now := s.now()
	s.mu.RLock()
	list := make([]sitelink.ProxyDhcpEntry, 0, len(s.m))
	for _, r := range s.m {
		if now.Before(r.NotAfter) {
			list = append(list, r.ProxyDhcpEntry)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(list, func(a, b sitelink.ProxyDhcpEntry) int { return slices.Compare(a.MAC[:], b.MAC[:]) })
	return list
}

// Put adds or replaces entries and persists them.
func (s *Entries) Put(list ...sitelink.ProxyDhcpEntry) error {
	for _, e := range list {
		if err := e.Validate(); err != nil {
			return err
		}
	}
	return s.update(func(m map[hwid.MAC]record) map[hwid.MAC]record {
		for _, e := range list {
			m[e.MAC] = newRecord(e)
		}
		return m
	})
}

// RemoveWorkflow drops every entry of a workflow (the boot.cleanUp command).
func (s *Entries) RemoveWorkflow(workflow string) error {
	return s.update(func(m map[hwid.MAC]record) map[hwid.MAC]record {
		for mac, e := range m {
			if e.Workflow == workflow {
				delete(m, mac)
			}
		}
		return m
	})
}

// RemoveMACs drops the entries of the given MACs.
func (s *Entries) RemoveMACs(macs ...hwid.MAC) error {
	return s.update(func(m map[hwid.MAC]record) map[hwid.MAC]record {
		for _, mac := range macs {
			delete(m, mac)
		}
		return m
	})
}

// Prune drops lapsed entries and persists the rest when anything was dropped.
func (s *Entries) Prune() error {
	now := s.now()
	s.mu.RLock()
	lapsed := false
	for _, e := range s.m {
		if !now.Before(e.NotAfter) {
			lapsed = true
			break
		}
	}
	s.mu.RUnlock()
	if !lapsed {
		return nil
	}
	return s.update(func(m map[hwid.MAC]record) map[hwid.MAC]record {
		for mac, e := range m {
			if !now.Before(e.NotAfter) {
				delete(m, mac)
			}
		}
		return m
	})
}

// update applies f to a copy, writes the copy to disk, and only then makes it current, so a
// failed write changes nothing the agent answers from.
func (s *Entries) update(f func(map[hwid.MAC]record) map[hwid.MAC]record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := f(maps.Clone(s.m))
	list := make([]sitelink.ProxyDhcpEntry, 0, len(next))
	for _, r := range next {
		list = append(list, r.ProxyDhcpEntry)
	}
	slices.SortFunc(list, func(a, b sitelink.ProxyDhcpEntry) int { return slices.Compare(a.MAC[:], b.MAC[:]) })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	s.writes.Add(1)
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("agent: persist boot entries: %w", err)
	}
	s.m = next
	return nil
}
