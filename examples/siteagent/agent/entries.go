package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/atomicfile"
)

// Entry is one machine the agent may boot: the control plane's ProxyDhcpEntry, as it
// travels and as DATA/boot-entries.json keeps it. [Entries] parses UUID and Arch once, when
// the entry arrives, and keeps them typed beside it.
type Entry struct {
	MAC      hwid.MAC  `json:"mac"`
	UUID     string    `json:"product_uuid,omitempty"` // canonical SMBIOS UUID when known
	Arch     string    `json:"arch"`                   // BIOS, X86_64_EFI or ARM64_EFI
	Workflow string    `json:"workflow"`
	NotAfter time.Time `json:"not_after"`
	// TokenRef names the machine's discovery token in the control plane's secret store; the
	// agent fetches the bearer the first time the machine asks for its script.
	TokenRef string `json:"token_ref,omitempty"`
	// SanbootSHA256, when set, boots this cached ISO instead of the ramdisk.
	SanbootSHA256 string `json:"sanboot_sha256,omitempty"`
	// SecureBoot says whether the machine boots with UEFI Secure Boot enforced, through shim
	// and the signed GRUB (true), or through iPXE (false); nil means the site's default
	// (BootConfig.SecureBoot) for an X86_64_EFI entry, iPXE for the others.
	SecureBoot *bool `json:"secure_boot,omitempty"`
}

// Architectures an entry may name.
const (
	ArchBIOS     = "BIOS"
	ArchX86UEFI  = "X86_64_EFI"
	ArchARM64EFI = "ARM64_EFI"
)

// entryArchs maps an entry's arch to the option 93 number its firmware sends over PXE; the
// same firmware's HTTP-boot number matches too ([hwid.SameArch]).
var entryArchs = map[string]hwid.Arch{
	ArchBIOS:     hwid.ArchBIOS,
	ArchX86UEFI:  hwid.ArchX86_64EFI,
	ArchARM64EFI: hwid.ArchARM64EFI,
}

var workflowRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ErrBadEntry is the cause of an entry refused by Validate.
var ErrBadEntry = errors.New("agent: bad boot entry")

// Validate checks an entry as it arrives from the control plane.
func (e Entry) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrBadEntry, e.MAC, fmt.Sprintf(format, args...))
	}
	if e.MAC.IsZero() {
		return bad("zero MAC")
	}
	if e.UUID != "" {
		u, err := hwid.ParseUUID(e.UUID)
		if err != nil || u.String() != e.UUID {
			return bad("product_uuid %q is not canonical", e.UUID)
		}
	}
	if _, ok := entryArchs[e.Arch]; !ok {
		return bad("arch %q", e.Arch)
	}
	if !workflowRE.MatchString(e.Workflow) {
		return bad("workflow %q", e.Workflow)
	}
	if e.NotAfter.IsZero() {
		return bad("no not_after")
	}
	if e.TokenRef != "" && !workflowRE.MatchString(e.TokenRef) {
		return bad("token_ref %q", e.TokenRef)
	}
	if e.SanbootSHA256 != "" && !isSHA256Hex(e.SanbootSHA256) {
		return bad("sanboot_sha256 %q", e.SanbootSHA256)
	}
	if e.SecureBoot != nil && *e.SecureBoot {
		if e.Arch != ArchX86UEFI {
			return bad("secure_boot: the signed chain is served to %s machines only, not %s", ArchX86UEFI, e.Arch)
		}
		if e.SanbootSHA256 != "" {
			return bad("secure_boot with sanboot_sha256: an ISO is booted by iPXE, which is not signed")
		}
	}
	return nil
}

// record is a validated entry with its UUID and arch parsed once.
type record struct {
	Entry
	uuid hwid.UUID // zero when the entry names none
	arch hwid.Arch
}

func newRecord(e Entry) record {
	r := record{Entry: e, arch: entryArchs[e.Arch]}
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
}

// OpenEntries loads the entries in path, if the file exists, and drops those that lapsed.
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
	var list []Entry
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("agent: boot entries %s: %w", path, err)
	}
	for _, e := range list {
		if e.Validate() == nil {
			s.m[e.MAC] = newRecord(e)
		}
	}
	s.Prune()
	return s, nil
}

// Lookup returns the live entry for mac.
func (s *Entries) Lookup(mac hwid.MAC) (Entry, bool) {
	r, ok := s.lookup(mac)
	return r.Entry, ok
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
func (s *Entries) All() []Entry {
	now := s.now()
	s.mu.RLock()
	list := make([]Entry, 0, len(s.m))
	for _, r := range s.m {
		if now.Before(r.NotAfter) {
			list = append(list, r.Entry)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(list, func(a, b Entry) int { return slices.Compare(a.MAC[:], b.MAC[:]) })
	return list
}

// Put adds or replaces entries and persists them.
func (s *Entries) Put(list ...Entry) error {
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
	list := make([]Entry, 0, len(next))
	for _, r := range next {
		list = append(list, r.Entry)
	}
	slices.SortFunc(list, func(a, b Entry) int { return slices.Compare(a.MAC[:], b.MAC[:]) })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("agent: persist boot entries: %w", err)
	}
	s.m = next
	return nil
}
