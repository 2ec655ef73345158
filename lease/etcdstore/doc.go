// Package etcdstore implements lease.Store on etcd (go.etcd.io/etcd/client/v3), for control
// planes that run on etcd.
//
// # Layout
//
// Each site's record is one key, Prefix + lease.Name(site) (by default
// /siteboot/lease/site:SITE:boot), holding lease.EncodeRecord's JSON. The record's version
// is the key's mod revision; a compare-and-swap is one transaction that puts the new
// record only if the key's mod revision is still the one read (0: the key does not exist).
// The fencing epoch is the record's own, not an etcd lease id: the key carries no etcd
// lease and never expires on its own, so a released lease keeps its epoch.
//
// # Limits
//
// A record that does not parse, or that names another site, is an error (matching
// lease.ErrBadRecord) and is never overwritten by this store: an operator removes it. Reads
// are linearizable (etcd's default), so a controller never decides on a record older than
// the last write it could know of.
package etcdstore
