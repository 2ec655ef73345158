package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bettercompute/siteboot/lease"
)

// DefaultPrefix is the key prefix used when Store.Prefix is empty.
const DefaultPrefix = "/siteboot/lease/"

// Store is a lease.Store on etcd. Set its fields before first use; it is safe for
// concurrent use.
type Store struct {
	// Client talks to the etcd cluster. Required.
	Client *clientv3.Client
	// Prefix of the keys; empty: DefaultPrefix.
	Prefix string
}

var _ lease.Store = (*Store)(nil)

// Key returns the etcd key of site's record.
func (s *Store) Key(site string) string {
	p := s.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + lease.Name(site)
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, site string) (lease.Record, lease.Version, error) {
	resp, err := s.Client.Get(ctx, s.Key(site))
	if err != nil {
		return lease.Record{}, 0, &lease.OpError{Op: "get", Site: site, Err: err}
	}
	if len(resp.Kvs) == 0 {
		return lease.Record{Site: site}, 0, nil
	}
	kv := resp.Kvs[0]
	rec, err := lease.ParseRecord(kv.Value)
	if err != nil {
		return lease.Record{}, 0, &lease.OpError{Op: "get", Site: site, Err: err}
	}
	if rec.Site != site {
		return lease.Record{}, 0, &lease.OpError{Op: "get", Site: site,
			Err: fmt.Errorf("%w: key holds the record of site %q", lease.ErrBadRecord, rec.Site)}
	}
	return rec, lease.Version(kv.ModRevision), nil
}

// CompareAndSwap implements lease.Store. The new version is the revision of the write.
func (s *Store) CompareAndSwap(ctx context.Context, site string, old lease.Version, rec lease.Record) (lease.Version, error) {
	if rec.Site != site {
		return 0, &lease.OpError{Op: "cas", Site: site,
			Err: fmt.Errorf("%w: record of site %q", lease.ErrBadRecord, rec.Site)}
	}
	b, err := lease.EncodeRecord(rec)
	if err != nil {
		return 0, &lease.OpError{Op: "cas", Site: site, Err: err}
	}
	key := s.Key(site)
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(old))).
		Then(clientv3.OpPut(key, string(b))).
		Commit()
	if err != nil {
		return 0, &lease.OpError{Op: "cas", Site: site, Err: err}
	}
	if !resp.Succeeded {
		return 0, &lease.OpError{Op: "cas", Site: site, Err: lease.ErrConflict}
	}
	return lease.Version(resp.Header.Revision), nil
}
