// Package etcdstore implements casreg.Register on etcd (go.etcd.io/etcd/client/v3), for
// control planes that keep their boot leases and BMC claims on etcd: wrap a Register in a
// lease.RegisterStore and a bmc.RegisterClaimStore. It imports neither lease nor bmc; it
// is a module of its own so that the library's root module never pulls etcd or gRPC.
//
// # Layout
//
// Each register key is one etcd key, Prefix + key (lease records under
// /siteboot/lease/site:SITE:boot, claim records under /siteboot/bmc-claims/ID, as the
// typed stores name them). A value's version is the key's mod revision; a compare-and-swap
// is one transaction that puts the new value only if the key's mod revision is still the
// one read (0: the key does not exist). Keys carry no etcd lease and never expire on their
// own: a lease's fencing epoch is the record's own, not an etcd lease id, so a released
// lease keeps its epoch, and a claim is granted once, ever.
//
// # Limits
//
// Reads are linearizable (etcd's default), so a controller never decides on a value older
// than the last write it could know of. Values are kept as given; the typed stores refuse
// what does not parse (and never overwrite it: an operator removes it).
package etcdstore
