package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/bettercompute/siteboot/casreg"
)

// Register is a casreg.Register on etcd. Set its fields before first use; it is safe for
// concurrent use.
type Register struct {
	// Client talks to the etcd cluster. Required.
	Client *clientv3.Client
	// Prefix is put before every key; empty: none (the typed stores that wrap a register
	// put their own: /siteboot/lease/, /siteboot/bmc-claims/).
	Prefix string
}

var _ casreg.Register = (*Register)(nil)

// Key returns the etcd key of a register key.
func (r *Register) Key(key string) string { return r.Prefix + key }

// Get implements casreg.Register: a linearizable read of the key; its version is the
// key's mod revision.
func (r *Register) Get(ctx context.Context, key string) ([]byte, casreg.Version, error) {
	resp, err := r.Client.Get(ctx, r.Key(key))
	if err != nil {
		return nil, 0, fmt.Errorf("etcdstore: get %q: %w", r.Key(key), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	kv := resp.Kvs[0]
	v := kv.Value
	if v == nil {
		v = []byte{}
	}
	return v, casreg.Version(kv.ModRevision), nil
}

// CompareAndSwap implements casreg.Register with one transaction that puts the value only
// if the key's mod revision is still old (0: the key does not exist). The new version is
// the revision of the write.
func (r *Register) CompareAndSwap(ctx context.Context, key string, old casreg.Version, value []byte) (casreg.Version, error) {
	k := r.Key(key)
	resp, err := r.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", int64(old))).
		Then(clientv3.OpPut(k, string(value))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("etcdstore: compare-and-swap %q: %w", k, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcdstore: compare-and-swap %q: %w", k, casreg.ErrConflict)
	}
	return casreg.Version(resp.Header.Revision), nil
}
