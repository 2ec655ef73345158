#!/bin/sh
# Ticks per second of the boot-lease controller over 1,000 sites, on the in-memory store
# and on a real etcd (Debian's etcd-server on loopback, started by the benchmark).
# Usage: bench/lease/run.sh [benchtime]   (default 3s; the machine is shared, keep it short)
set -eu
cd "$(dirname "$0")/../.."
bt="${1:-3s}"
go test -run '^$' -bench 'TickAll1000Memory|Tick$|FenceActive' -benchtime "$bt" ./lease/
go test -run '^$' -bench 'TickAll1000Etcd' -benchtime 5x ./lease/etcdstore/
