package bootbind

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/bettercompute/siteboot/hwid"
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

// MaxSavedBytes bounds what Load reads: DefaultMaxNonces nonces with room to spare.
const MaxSavedBytes = 4 << 20

// Save returns the live nonces as a document Load reads, and whether anything changed since
// the last Save: a host keeps the binding across a restart by writing it to a file (crash
// safe: a temporary file, fsynced and renamed) when it changed, and at the end.
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
// keeping the store's bounds. It returns how many it kept.
func (s *Nonces) Load(data []byte) (int, error) {
	if len(data) > MaxSavedBytes {
		return 0, fmt.Errorf("bootbind: saved nonces: %d bytes, more than %d", len(data), MaxSavedBytes)
	}
	var f savedFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("bootbind: saved nonces: %w", err)
	}
	if f.Version != 1 {
		return 0, fmt.Errorf("bootbind: saved nonces: version %d", f.Version)
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := 0
	for _, n := range f.Nonces {
		if _, err := ParseToken(n.Nonce); err != nil || n.Kind >= numKinds || n.MAC.IsZero() {
			continue
		}
		if _, ok := s.t.m[n.Nonce]; ok {
			continue
		}
		tok := &token[nonceState]{issued: n.Issued}
		if s.t.lapsed(tok, now) {
			continue
		}
		for len(s.t.byMAC[n.MAC]) >= MaxNoncesPerMAC {
			s.t.drop(s.victim(n.MAC, n.Owner))
		}
		s.t.add(n.Nonce, n.MAC, n.Issued, now, nonceState{kind: n.Kind, owner: n.Owner.Unmap().WithZone(""), presented: n.Presented})
		kept++
	}
	return kept, nil
}
