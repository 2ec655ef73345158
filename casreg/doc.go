// Package casreg defines a compare-and-swap register: bytes stored under a key, each
// stored value with a version, and a write that succeeds only if the version it read is
// still the stored one. It is what the lease and the BMC claims keep their records in.
//
// # Wiring
//
// A Register is one interface of two methods. Memory is the in-process implementation,
// for a control plane of one process and for tests; the etcd implementation lives in its
// own module (github.com/bettercompute/siteboot/lease/etcdstore), so that a program that
// imports this package never pulls etcd into its build. The typed stores wrap a Register
// with their own codec: lease.RegisterStore keeps lease records and bmc.RegisterClaimStore
// keeps claim records; both may share one Register, each under its own key prefix.
//
// # Versions
//
// A key with no value has version 0 and Get answers (nil, 0, nil) for it. Every write
// gives the key a version greater than any it had before (on etcd, the key's mod
// revision; in Memory, a counter shared by all keys), so a compare-and-swap from a version
// read earlier fails once anyone else wrote in between: that failure matches ErrConflict
// and writes nothing.
//
// # Limits
//
// A register keeps whatever bytes it is given; the typed stores bound and check what they
// read back. Values are never deleted: a lease record or a claim record lives as long as
// the site or the command id it describes.
package casreg
