// Package etcdstoretest starts a real etcd for the tests of code that keeps its state there
// (a control plane holding its boot leases and BMC claims through package etcdstore):
// Debian's etcd-server (the etcd binary) on free loopback ports with a temporary data dir,
// stopped by its PID at cleanup. It skips (fails with SITEBOOT_REQUIRE_PEERS=1) when etcd
// is not installed.
package etcdstoretest
