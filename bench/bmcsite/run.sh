#!/usr/bin/env bash
# 1,000 simulated Redfish BMCs (bmctest on loopback: 20-200 ms a request, 2% answered
# busy, 4 sessions at most, 1 in 100 reverting the change) power-cycled through
# bmc.TransitionRunner with a ramp of 50 power-ons a second, then through a plain loop
# over the driver with no limits (the peer); prints both, the checks and the ratio.
# Exits 1 when a check of the transition fails.
#
#   bench/bmcsite/run.sh                 (about 3 minutes, most of it starting servers)
#   bench/bmcsite/run.sh -n 200 -loop=false
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n "$(ulimit -Hn)"
go build -o "${TMPDIR:-/tmp}/bmcsite" ./bench/bmcsite
exec "${TMPDIR:-/tmp}/bmcsite" "$@"
