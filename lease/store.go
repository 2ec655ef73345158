package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/casreg"
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

// DefaultPrefix is the key prefix of RegisterStore when its Prefix is empty.
const DefaultPrefix = "/siteboot/lease/"

// RegisterStore is a Store over a compare-and-swap register (casreg.Register: in memory,
// or on etcd with github.com/bettercompute/siteboot/lease/etcdstore). Each site's record
// is the value of one key, Prefix + Name(site) (by default /siteboot/lease/site:SITE:boot),
// holding EncodeRecord's JSON; the record's version is the register's version of the key.
//
// A value that does not parse, or that names another site, is an error matching
// ErrBadRecord and is never overwritten by this store: an operator removes it. Set the
// fields before first use; it is safe for concurrent use.
type RegisterStore struct {
	// Register keeps the values. Required.
	Register casreg.Register
	// Prefix of the keys; empty: DefaultPrefix.
	Prefix string
}

var _ Store = (*RegisterStore)(nil)

// Key returns the register key of site's record.
func (s *RegisterStore) Key(site string) string {
	p := s.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + Name(site)
}

// Get implements Store.
func (s *RegisterStore) Get(ctx context.Context, site string) (Record, Version, error) {
	b, ver, err := s.Register.Get(ctx, s.Key(site))
	if err != nil {
		return Record{}, 0, &OpError{Op: "get", Site: site, Err: err}
	}
	if ver == 0 {
		return Record{Site: site}, 0, nil
	}
	rec, err := ParseRecord(b)
	if err != nil {
		return Record{}, 0, &OpError{Op: "get", Site: site, Err: err}
	}
	if rec.Site != site {
		return Record{}, 0, &OpError{Op: "get", Site: site,
			Err: fmt.Errorf("%w: key holds the record of site %q", ErrBadRecord, rec.Site)}
	}
	return rec, Version(ver), nil
}

// CompareAndSwap implements Store. The new version is the register's.
func (s *RegisterStore) CompareAndSwap(ctx context.Context, site string, old Version, rec Record) (Version, error) {
	if rec.Site != site {
		return 0, &OpError{Op: "cas", Site: site, Err: fmt.Errorf("%w: record of site %q", ErrBadRecord, rec.Site)}
	}
	b, err := EncodeRecord(rec)
	if err != nil {
		return 0, &OpError{Op: "cas", Site: site, Err: err}
	}
	ver, err := s.Register.CompareAndSwap(ctx, s.Key(site), casreg.Version(old), b)
	if errors.Is(err, casreg.ErrConflict) {
		return 0, &OpError{Op: "cas", Site: site, Err: ErrConflict}
	}
	if err != nil {
		return 0, &OpError{Op: "cas", Site: site, Err: err}
	}
	return Version(ver), nil
}

// MemoryStore is a Store in memory (a RegisterStore over a casreg.Memory), the embedded
// default for a control plane of one process. The zero value is ready to use; it is safe
// for concurrent use.
type MemoryStore struct {
	mem casreg.Memory
}

var _ Store = (*MemoryStore)(nil)

func (s *MemoryStore) store() *RegisterStore { return &RegisterStore{Register: &s.mem} }

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, site string) (Record, Version, error) {
	return s.store().Get(ctx, site)
}

// CompareAndSwap implements Store.
func (s *MemoryStore) CompareAndSwap(ctx context.Context, site string, old Version, rec Record) (Version, error) {
	return s.store().CompareAndSwap(ctx, site, old, rec)
}
