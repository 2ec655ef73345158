package sitelink

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/atomicfile"
)

// ErrBadCommand is wrapped by EntryStore.Apply for a command that is not a boot entry
// command (KindPrepareRamdisk or KindCleanUp).
var ErrBadCommand = errors.New("sitelink: not a boot entry command")

// EntryError is an entry refused by an EntryStore: the Index-th (from 0) of those given to
// Put. Err wraps ErrBadEntry.
type EntryError struct {
	Index int
	Err   error
}

var _ error = &EntryError{}

func (e *EntryError) Error() string {
	return fmt.Sprintf("sitelink: entry %d: %s", e.Index, strings.TrimPrefix(e.Err.Error(), "sitelink: "))
}

// Unwrap returns Err.
func (e *EntryError) Unwrap() error { return e.Err }

// EntrySetAsideInfix is put between the entries file's name and a time to name a damaged
// file set aside: "boot-entries.json.damaged-20260102T030405.000000006Z", with "-1", "-2"
// and so on added when that name is taken. Set-aside files are never removed.
const EntrySetAsideInfix = ".damaged-"

// EntryDamage says how an entries file was damaged when it was opened.
type EntryDamage struct {
	// SetAside is the name, in the file's directory, the damaged file was renamed to.
	SetAside string
	// Reason says what did not parse or validate: the file, or the first such entry
	// ("entry 3: ...").
	Reason string
	// Kept is the number of entries kept; Dropped the number dropped, -1 when the file did
	// not parse as a list at all.
	Kept, Dropped int
}

// EntryStore is an agent's copy of the boot entries its control plane wants, by MAC, kept
// in a file that survives a crash: a change is acknowledged (the call returns nil) only
// once it is on disk, and a failed write changes nothing the store answers. An entry
// lapses at its NotAfter, by the store's clock: it is no longer answered from that instant,
// and Prune drops it from the file. One EntryStore owns its file; it is safe for
// concurrent use.
type EntryStore struct {
	path string
	now  func() time.Time

	mu sync.RWMutex
	m  map[hwid.MAC]ParsedEntry

	damage *EntryDamage  // set by OpenEntryStore, never changed
	writes atomic.Uint64 // writes of the file tried
}

// OpenEntryStore loads the entries in path, if the file exists, and drops those that
// lapsed by clk (nil means [clock.Real]). It first removes the temporary files of writes a
// crash interrupted, so the file is the last complete write.
//
// A file that does not parse, or holds entries that do not, is not an error: the valid
// entries are kept, the file is renamed aside (EntrySetAsideInfix; never deleted), the
// valid entries are written anew so that the next start finds a sound file, and Damage
// says what happened. An error means the file could not be read, set aside or rewritten.
func OpenEntryStore(path string, clk clock.Clock) (*EntryStore, error) {
	s := &EntryStore{path: path, now: clock.Or(clk).Now, m: map[hwid.MAC]ParsedEntry{}}
	// A leftover only takes space, and the next open tries again: not worth failing for.
	_, _ = atomicfile.Sweep(path)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("sitelink: boot entries: %w", err)
	}
	var raw []json.RawMessage
	var reason string
	dropped := 0
	if err := json.Unmarshal(b, &raw); err != nil {
		reason, dropped = err.Error(), -1
	}
	for i, r := range raw {
		var e ProxyDhcpEntry
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
		s.m[e.MAC] = parsed(e)
	}
	if dropped != 0 {
		aside, err := setAside(path, s.now())
		if err != nil {
			return nil, err
		}
		s.damage = &EntryDamage{SetAside: filepath.Base(aside), Reason: reason, Kept: len(s.m), Dropped: dropped}
		if err := s.update(func(map[hwid.MAC]ParsedEntry) {}); err != nil {
			return nil, err
		}
	}
	// Lookups never answer a lapsed entry, and the next Prune tries the write again.
	_ = s.Prune()
	return s, nil
}

// setAside renames a damaged file to a name no other file has.
func setAside(path string, now time.Time) (string, error) {
	base := path + EntrySetAsideInfix + now.UTC().Format("20060102T150405.000000000Z")
	aside := base
	for n := 1; ; n++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = base + "-" + strconv.Itoa(n)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("sitelink: set damaged boot entries aside: %w", err)
	}
	return aside, nil
}

// Damage returns how the file was damaged when it was opened, if it was.
func (s *EntryStore) Damage() (EntryDamage, bool) {
	if s.damage == nil {
		return EntryDamage{}, false
	}
	return *s.damage, true
}

// Writes is how many times the file was written since OpenEntryStore, counting the
// rewrite of a damaged file at open and writes that failed.
func (s *EntryStore) Writes() uint64 { return s.writes.Load() }

// Lookup returns the live entry for mac.
func (s *EntryStore) Lookup(mac hwid.MAC) (ProxyDhcpEntry, bool) {
	p, ok := s.LookupParsed(mac)
	return p.ProxyDhcpEntry, ok
}

// LookupParsed returns the live entry for mac, parsed, for ParsedEntry.Match.
func (s *EntryStore) LookupParsed(mac hwid.MAC) (ParsedEntry, bool) {
	s.mu.RLock()
	p, ok := s.m[mac]
	s.mu.RUnlock()
	if !ok || !s.now().Before(p.NotAfter) {
		return ParsedEntry{}, false
	}
	return p, true
}

// All returns the live entries, ordered by MAC.
func (s *EntryStore) All() []ProxyDhcpEntry {
	now := s.now()
	s.mu.RLock()
	list := make([]ProxyDhcpEntry, 0, len(s.m))
	for _, p := range s.m {
		if now.Before(p.NotAfter) {
			list = append(list, p.ProxyDhcpEntry)
		}
	}
	s.mu.RUnlock()
	sortByMAC(list)
	return list
}

// Sanboot returns the live entries that boot a cached ISO (SanbootSHA256 set), ordered by
// MAC: what [SiteSection] needs on every report, without copying every entry.
func (s *EntryStore) Sanboot() []ProxyDhcpEntry {
	now := s.now()
	s.mu.RLock()
	var list []ProxyDhcpEntry
	for _, p := range s.m {
		if p.SanbootSHA256 != "" && now.Before(p.NotAfter) {
			list = append(list, p.ProxyDhcpEntry)
		}
	}
	s.mu.RUnlock()
	sortByMAC(list)
	return list
}

// Put adds or replaces entries and persists them. An invalid entry refuses the whole call
// with an *EntryError, and nothing is written.
func (s *EntryStore) Put(list ...ProxyDhcpEntry) error {
	for i, e := range list {
		if err := e.Validate(); err != nil {
			return &EntryError{Index: i, Err: err}
		}
	}
	return s.update(func(m map[hwid.MAC]ParsedEntry) {
		for _, e := range list {
			m[e.MAC] = parsed(e)
		}
	})
}

// RemoveWorkflow drops every entry of a workflow (what KindCleanUp does with Workflow).
func (s *EntryStore) RemoveWorkflow(workflow string) error {
	return s.update(func(m map[hwid.MAC]ParsedEntry) {
		for mac, p := range m {
			if p.Workflow == workflow {
				delete(m, mac)
			}
		}
	})
}

// RemoveMACs drops the entries of the given MACs.
func (s *EntryStore) RemoveMACs(macs ...hwid.MAC) error {
	return s.update(func(m map[hwid.MAC]ParsedEntry) {
		for _, mac := range macs {
			delete(m, mac)
		}
	})
}

// Apply carries out boot entry commands in order, in one write of the file, so that a
// heartbeat's answer costs one write however many commands it holds: KindPrepareRamdisk
// puts its Entries; KindCleanUp drops the entries of its Workflow (when not empty) and of
// its MACs. Any other kind, or an invalid entry, refuses the whole batch (ErrBadCommand,
// ErrBadEntry) and nothing is written. It returns, once the result is on disk, the entries
// the clean-ups dropped. No commands, no write.
func (s *EntryStore) Apply(cmds ...Command) (dropped []ProxyDhcpEntry, err error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	for _, c := range cmds {
		if err := CheckEntryCommand(c); err != nil {
			return nil, err
		}
	}
	err = s.update(func(m map[hwid.MAC]ParsedEntry) {
		for _, c := range cmds {
			switch c.Kind {
			case KindPrepareRamdisk:
				for _, e := range c.Entries {
					m[e.MAC] = parsed(e)
				}
			case KindCleanUp:
				for mac, p := range m {
					if (c.Workflow != "" && p.Workflow == c.Workflow) || slices.Contains(c.MACs, mac) {
						dropped = append(dropped, p.ProxyDhcpEntry)
						delete(m, mac)
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return dropped, nil
}

// CheckEntryCommand says whether Apply would take c: a KindPrepareRamdisk whose entries
// are all valid (an error wrapping ErrBadEntry otherwise), or a KindCleanUp; any other
// kind wraps ErrBadCommand. A host that refuses one bad command of a heartbeat's answer,
// and applies the rest in one Apply, checks each with it first.
func CheckEntryCommand(c Command) error {
	switch c.Kind {
	case KindPrepareRamdisk:
		for _, e := range c.Entries {
			if err := e.Validate(); err != nil {
				return fmt.Errorf("sitelink: command %q: %w", c.ID, err)
			}
		}
		return nil
	case KindCleanUp:
		return nil
	}
	return fmt.Errorf("%w: command %q is %q", ErrBadCommand, c.ID, c.Kind)
}

// Prune drops lapsed entries and persists the rest when anything was dropped.
func (s *EntryStore) Prune() error {
	now := s.now()
	s.mu.RLock()
	lapsed := false
	for _, p := range s.m {
		if !now.Before(p.NotAfter) {
			lapsed = true
			break
		}
	}
	s.mu.RUnlock()
	if !lapsed {
		return nil
	}
	return s.update(func(m map[hwid.MAC]ParsedEntry) {
		for mac, p := range m {
			if !now.Before(p.NotAfter) {
				delete(m, mac)
			}
		}
	})
}

// update applies f to a copy, writes the copy to disk, and only then makes it current, so
// a failed write changes nothing the store answers.
func (s *EntryStore) update(f func(map[hwid.MAC]ParsedEntry)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.m)
	f(next)
	list := make([]ProxyDhcpEntry, 0, len(next))
	for _, p := range next {
		list = append(list, p.ProxyDhcpEntry)
	}
	sortByMAC(list)
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return fmt.Errorf("sitelink: boot entries: %w", err)
	}
	s.writes.Add(1)
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("sitelink: persist boot entries: %w", err)
	}
	s.m = next
	return nil
}

func sortByMAC(list []ProxyDhcpEntry) {
	slices.SortFunc(list, func(a, b ProxyDhcpEntry) int { return slices.Compare(a.MAC[:], b.MAC[:]) })
}
