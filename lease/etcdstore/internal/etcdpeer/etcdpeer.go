// Package etcdpeer starts a real etcd for the package's own tests: etcdstoretest's.
package etcdpeer

import (
	"testing"

	"github.com/bettercompute/siteboot/lease/etcdstore/etcdstoretest"
)

// Peer is a running etcd.
type Peer = etcdstoretest.Peer

// Start starts an etcd and returns it with a client connected, closed at cleanup.
func Start(t testing.TB) *Peer { return etcdstoretest.Start(t) }
