package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bettercompute/siteboot/bmc"
)

// DefaultClaimPrefix is the key prefix used when ClaimStore.Prefix is empty.
const DefaultClaimPrefix = "/siteboot/bmc-claims/"

// ClaimStore is a bmc.ClaimStore on etcd, for a control plane whose bmc.ClaimRegistry
// must survive its restarts and be shared by several of its processes. Each command id's
// record is one key, Prefix + id, holding bmc.EncodeClaim's JSON; the record's version is
// the key's mod revision, and a compare-and-swap is one transaction that puts the record
// only if that revision is still the one read (0: no key), as Store does for leases.
// Records carry no etcd lease: a claim is granted once, ever, so its record never expires
// on its own.
//
// A record that does not parse, or that names another id, is an error matching
// bmc.ErrBadClaim and is never overwritten by this store. Set the fields before first use;
// it is safe for concurrent use.
type ClaimStore struct {
	// Client talks to the etcd cluster. Required.
	Client *clientv3.Client
	// Prefix of the keys; empty: DefaultClaimPrefix.
	Prefix string
}

var _ bmc.ClaimStore = (*ClaimStore)(nil)

// Key returns the etcd key of command id's record.
func (s *ClaimStore) Key(id string) string {
	p := s.Prefix
	if p == "" {
		p = DefaultClaimPrefix
	}
	return p + id
}

// Get implements bmc.ClaimStore.
func (s *ClaimStore) Get(ctx context.Context, id string) (bmc.ClaimRecord, bmc.ClaimVersion, error) {
	resp, err := s.Client.Get(ctx, s.Key(id))
	if err != nil {
		return bmc.ClaimRecord{}, 0, fmt.Errorf("etcdstore: claim %q: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return bmc.ClaimRecord{ID: id}, 0, nil
	}
	kv := resp.Kvs[0]
	rec, err := bmc.ParseClaim(kv.Value)
	if err != nil {
		return bmc.ClaimRecord{}, 0, fmt.Errorf("etcdstore: claim %q: %w", id, err)
	}
	if rec.ID != id {
		return bmc.ClaimRecord{}, 0, fmt.Errorf("etcdstore: claim %q: %w: key holds the record of %q", id, bmc.ErrBadClaim, rec.ID)
	}
	return rec, bmc.ClaimVersion(kv.ModRevision), nil
}

// CompareAndSwap implements bmc.ClaimStore. The new version is the revision of the write.
func (s *ClaimStore) CompareAndSwap(ctx context.Context, id string, old bmc.ClaimVersion, rec bmc.ClaimRecord) (bmc.ClaimVersion, error) {
	if rec.ID != id {
		return 0, fmt.Errorf("etcdstore: claim %q: %w: record of %q", id, bmc.ErrBadClaim, rec.ID)
	}
	b, err := bmc.EncodeClaim(rec)
	if err != nil {
		return 0, fmt.Errorf("etcdstore: claim %q: %w", id, err)
	}
	key := s.Key(id)
	resp, err := s.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(old))).
		Then(clientv3.OpPut(key, string(b))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcdstore: claim %q: %w", id, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcdstore: claim %q: %w", id, bmc.ErrClaimConflict)
	}
	return bmc.ClaimVersion(resp.Header.Revision), nil
}
