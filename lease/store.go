package lease

import (
	"context"
	"fmt"
	"sync"
)

// Version identifies one stored state of a site's record; 0 means no record is stored.
// A store gives every write a version it never gave before for that site.
type Version int64

// Store keeps the lease records, one per site, with compare-and-swap.
type Store interface {
	// Get returns the site's record and its version. A site with no record yields
	// Record{Site: site}, version 0 and no error.
	Get(ctx context.Context, site string) (Record, Version, error)
	// CompareAndSwap writes rec as the site's record if the stored version is still old
	// (0: no record stored) and returns the new version. Otherwise it writes nothing and
	// returns an error matching ErrConflict.
	CompareAndSwap(ctx context.Context, site string, old Version, rec Record) (Version, error)
}

// MemoryStore is a Store in memory, the embedded default for a control plane of one
// process. The zero value is ready to use; it is safe for concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	rev  Version
	recs map[string]memEntry
}

type memEntry struct {
	rec Record
	ver Version
}

var _ Store = (*MemoryStore)(nil)

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, site string) (Record, Version, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, 0, &OpError{Op: "get", Site: site, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.recs[site]
	if !ok {
		return Record{Site: site}, 0, nil
	}
	return e.rec, e.ver, nil
}

// CompareAndSwap implements Store.
func (s *MemoryStore) CompareAndSwap(ctx context.Context, site string, old Version, rec Record) (Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, &OpError{Op: "cas", Site: site, Err: err}
	}
	if rec.Site != site {
		return 0, &OpError{Op: "cas", Site: site, Err: fmt.Errorf("%w: record of site %q", ErrBadRecord, rec.Site)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs[site].ver != old {
		return 0, &OpError{Op: "cas", Site: site, Err: ErrConflict}
	}
	if s.recs == nil {
		s.recs = make(map[string]memEntry)
	}
	s.rev++
	rec.Expires = rec.Expires.Round(0)
	s.recs[site] = memEntry{rec: rec, ver: s.rev}
	return s.rev, nil
}
