#!/usr/bin/env bash
# BMC driver figures. bmc/ipmi against OpenIPMI's ipmi_sim on loopback (cipher suite 3): one
# request on an open session (PowerState, SetBootDevice), a session opened and closed
# (DialClose), and ipmitool's whole run for "chassis power status" (which opens a session each
# time). bmc/redfish against bmctest (loopback, plain HTTP): the driver's own cost per
# operation. BenchmarkPeers of each runs the same operations against the emulators there are.
# Needs ipmi_sim (openipmi) and ipmitool. The ipmi_sim chassis-control script is a shell
# script, so requests that touch power or boot state include a fork of /bin/sh.
#
#   bench/bmc/run.sh                         (both drivers, every benchmark: over 3 minutes)
#   PKGS=ipmi BENCH='^Benchmark(PowerState|DialClose)$' bench/bmc/run.sh
#
# PKGS names the drivers (ipmi, redfish), BENCH the benchmarks (go test -bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
for pkg in ${PKGS:-ipmi redfish}; do
	case $pkg in
	ipmi | redfish) ;;
	*) echo "bench/bmc/run.sh: no driver $pkg (ipmi, redfish)" >&2; exit 2 ;;
	esac
	go test -run '^$' -bench "${BENCH:-.}" -benchtime "${BENCHTIME:-2s}" -count "${COUNT:-3}" "./bmc/$pkg/"
done
