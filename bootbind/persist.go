package bootbind

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/internal/atomicfile"
)

// Saved is one nonce as [Nonces.Save] writes it and [Nonces.Load] reads it back.
type Saved struct {
	Nonce     string     `json:"nonce"`
	Kind      Kind       `json:"kind"`
	MAC       hwid.MAC   `json:"mac"`
	Issued    time.Time  `json:"issued"`
	Owner     netip.Addr `json:"owner,omitzero"`
	Presented bool       `json:"presented,omitempty"`
}

// savedFile is the document Save writes.
type savedFile struct {
	Version int     `json:"version"`
	Nonces  []Saved `json:"nonces"`
}

// savedFrame is savedFile as Load reads it: each nonce apart, so that one damaged entry
// loses only itself.
type savedFrame struct {
	Version int               `json:"version"`
	Nonces  []json.RawMessage `json:"nonces"`
}

// MaxSavedBytes bounds what Load and LoadFile read and what SaveFile writes:
// DefaultMaxNonces nonces with room to spare (a saved nonce takes at most about 200 bytes,
// so a store of Config.Max up to 20000 fits).
const MaxSavedBytes = 4 << 20

// SetAsideInfix is put between a damaged file's name and the time LoadFile found it, in
// the name the file is renamed to: "boot-nonces.json.damaged-20261201T100000.000000000Z".
// Set-aside files are never removed by this package.
const SetAsideInfix = ".damaged-"

// Errors of saving and loading.
var (
	// ErrTooLarge: a saved document is larger than MaxSavedBytes.
	ErrTooLarge = errors.New("bootbind: saved nonces larger than MaxSavedBytes")
	// ErrDamaged is wrapped by every [DamagedError].
	ErrDamaged = errors.New("bootbind: saved nonces damaged")
)

// DamagedError is [Nonces.LoadFile]'s report of a file that did not load whole: the
// document did not parse (too large, not JSON, another version), or some of its entries
// did not. What parsed is loaded all the same, the store's other nonces are untouched, and
// the file is set aside byte for byte (renamed beside itself, SetAsideInfix and the time)
// for an operator to read, so the next SaveFile starts a new file and loses nothing. It
// wraps ErrDamaged and the parse error.
type DamagedError struct {
	Path string // the file read
	// SetAside is the name, in Path's directory, the file was renamed to; "" when the
	// rename failed (LoadFile then returns that error too, joined to this one).
	SetAside string
	Kept     int   // nonces loaded from the file
	Lost     int   // entries not loaded for damage; -1 when the document did not parse
	Err      error // what did not parse: the document's error, or the first entry's
}

var _ error = &DamagedError{}

func (e *DamagedError) Error() string {
	s := ErrDamaged.Error() + ": " + e.Path
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Lost > 0 {
		s += " (" + strconv.Itoa(e.Lost) + " entries lost, " + strconv.Itoa(e.Kept) + " kept)"
	}
	if e.SetAside != "" {
		s += "; set aside as " + e.SetAside
	}
	return s
}

// Unwrap returns ErrDamaged and the parse error.
func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// Save returns the live nonces as a document Load reads, and whether anything changed since
// the last Save: a host keeps the binding across a restart by writing it to a file (crash
// safe: a temporary file, fsynced and renamed) when it changed, and at the end.
// [Nonces.SaveFile] does all of that.
func (s *Nonces) Save() ([]byte, bool, error) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	f := savedFile{Version: 1, Nonces: make([]Saved, 0, len(s.t.m))}
	for _, list := range s.t.byMAC {
		for _, k := range list {
			b := s.t.m[k]
			if s.t.lapsed(b, now) {
				continue
			}
			f.Nonces = append(f.Nonces, Saved{Nonce: k, Kind: b.state.kind, MAC: b.mac, Issued: b.issued, Owner: b.state.owner, Presented: b.state.presented})
		}
	}
	changed := s.dirty
	s.dirty = false
	s.mu.Unlock()
	data, err := json.Marshal(f)
	return data, changed, err
}

// Load adds the nonces of a document Save wrote, each as it was (its MAC, kind, address and
// age: the window runs from the original answer), skipping lapsed and malformed ones and
// keeping the store's bounds (of more than Config.Max live nonces, the newest are kept).
// It returns how many it kept, and an error only when the document itself does not parse.
func (s *Nonces) Load(data []byte) (int, error) {
	kept, _, _, err := s.load(data)
	return kept, err
}

// load is Load, also saying how many entries were malformed and the first one's error.
func (s *Nonces) load(data []byte) (kept, lost int, firstErr, err error) {
	if len(data) > MaxSavedBytes {
		return 0, -1, nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, len(data), MaxSavedBytes)
	}
	var f savedFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, -1, nil, fmt.Errorf("bootbind: saved nonces: %w", err)
	}
	if f.Version != 1 {
		return 0, -1, nil, fmt.Errorf("bootbind: saved nonces: version %d", f.Version)
	}
	now := s.cfg.Clock.Now()
	live := make([]Saved, 0, min(len(f.Nonces), s.cfg.Max))
	for i, raw := range f.Nonces {
		var n Saved
		err := json.Unmarshal(raw, &n)
		if err == nil {
			err = n.check()
		}
		if err != nil {
			if lost++; firstErr == nil {
				firstErr = fmt.Errorf("bootbind: saved nonce %d: %w", i, err)
			}
			continue
		}
		if s.t.lapsed(&token[nonceState]{issued: n.Issued}, now) {
			continue
		}
		live = append(live, n)
	}
	if len(live) > s.cfg.Max {
		// Only the newest fit: the rest would push each other out one by one.
		slices.SortStableFunc(live, func(a, b Saved) int { return b.Issued.Compare(a.Issued) })
		live = live[:s.cfg.Max]
	}
	// Oldest first, so the store's own order (and what gives way first) is the answers'.
	slices.SortStableFunc(live, func(a, b Saved) int { return cmp.Compare(a.Issued.UnixNano(), b.Issued.UnixNano()) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range live {
		if _, ok := s.t.m[n.Nonce]; ok {
			continue
		}
		for len(s.t.byMAC[n.MAC]) >= MaxNoncesPerMAC {
			s.t.drop(s.victim(n.MAC, n.Owner))
		}
		s.t.add(n.Nonce, n.MAC, n.Issued, now, nonceState{kind: n.Kind, owner: n.Owner.Unmap().WithZone(""), presented: n.Presented})
		kept++
	}
	return kept, lost, firstErr, nil
}

// check reports a saved nonce this package could not have written.
func (n Saved) check() error {
	if _, err := ParseToken(n.Nonce); err != nil {
		return err
	}
	switch {
	case n.Kind >= numKinds:
		return fmt.Errorf("kind %d", n.Kind)
	case n.MAC.IsZero():
		return errors.New("no MAC")
	case n.Issued.IsZero():
		return errors.New("no issue time")
	}
	return nil
}

// SaveFile writes the live nonces to path, atomically and durably (a temporary file beside
// it, fsynced, renamed over it, the directory fsynced; mode 0600, as nonces are secrets),
// when they changed since the last SaveFile or Save, or path is not the file last saved or
// loaded: a host calls it after each nonce issued and every second or so, and once at the
// end. A write that fails leaves the file as it was and the store marked changed, so the
// next SaveFile tries again. A document larger than MaxSavedBytes is not written
// (ErrTooLarge): LoadFile would not read it. Safe for concurrent use; saves are serialised,
// so an older state never overwrites a newer one.
func (s *Nonces) SaveFile(path string) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	data, changed, err := s.Save()
	if !changed && err == nil && path == s.filePath {
		return nil
	}
	if err == nil && len(data) > MaxSavedBytes {
		err = fmt.Errorf("%w: %d bytes, more than %d: lower Config.Max", ErrTooLarge, len(data), MaxSavedBytes)
	}
	if err == nil {
		if err = atomicfile.Write(path, data, 0o600); err != nil {
			err = fmt.Errorf("bootbind: saving nonces: %w", err)
		}
	}
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return err
	}
	s.filePath = path
	return nil
}

// LoadFile adds the nonces SaveFile wrote to path (as Load does: lapsed ones dropped on the
// store's clock, the store's bounds kept) and returns how many it kept. Call it once at
// start, before any SaveFile of path: it first removes the temporary files an interrupted
// SaveFile left beside path. A missing file is no error (a first start): it returns 0,
// nil. A file larger than MaxSavedBytes, or one that does not parse whole, is damaged:
// what parsed is loaded, the file is set aside, and the error is a [*DamagedError]. Other
// errors (a file that cannot be read) leave the file and the store as they were.
func (s *Nonces) LoadFile(path string) (int, error) {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if _, err := atomicfile.Sweep(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("bootbind: loading nonces: %w", err)
	}
	data, err := readBounded(path, MaxSavedBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case errors.Is(err, ErrTooLarge):
		return 0, s.setAside(path, &DamagedError{Path: path, Lost: -1, Err: err})
	case err != nil:
		return 0, fmt.Errorf("bootbind: loading nonces: %w", err)
	}
	kept, lost, firstErr, err := s.load(data)
	switch {
	case err != nil:
		return 0, s.setAside(path, &DamagedError{Path: path, Lost: -1, Err: err})
	case lost > 0:
		return kept, s.setAside(path, &DamagedError{Path: path, Kept: kept, Lost: lost, Err: firstErr})
	}
	s.filePath = path
	return kept, nil
}

// setAside renames the damaged file beside itself under a name no other file has, and
// returns d naming it (joined to the rename's error when it failed).
func (s *Nonces) setAside(path string, d *DamagedError) error {
	stamp := path + SetAsideInfix + s.cfg.Clock.Now().UTC().Format("20060102T150405.000000000Z")
	name := stamp
	for i := 1; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = stamp + "-" + strconv.Itoa(i)
	}
	if err := os.Rename(path, name); err != nil {
		return errors.Join(d, fmt.Errorf("bootbind: setting the damaged file aside: %w", err))
	}
	d.SetAside = filepath.Base(name)
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return errors.Join(d, err)
	}
	return d
}

// readBounded reads path, refusing one longer than max bytes with ErrTooLarge.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return data, err
}
