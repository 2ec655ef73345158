#!/usr/bin/env bash
# BMC driver figures. IPMI against OpenIPMI's ipmi_sim on loopback (cipher suite 3): one request on an
# open session (PowerState, SetBootDevice), a session opened and closed (DialClose), and
# ipmitool's whole run for "chassis power status" (which opens a session each time).
# Needs ipmi_sim (openipmi) and ipmitool. The ipmi_sim chassis-control script is a shell
# script, so requests that touch power or boot state include a fork of /bin/sh.
#
# Until go.sum lists go-ipmi's dependencies the driver is behind the siteboot_ipmi tag, and
# MODFILE may name a go.mod (with its go.sum beside it) that has them.
set -euo pipefail
cd "$(dirname "$0")/../.."
args=(-tags siteboot_ipmi -run '^$' -bench . -benchtime "${BENCHTIME:-2s}" -count "${COUNT:-3}")
if [ -n "${MODFILE:-}" ]; then
	args+=(-modfile "$MODFILE")
fi
go test "${args[@]}" ./bmc/ipmi/
# Redfish against bmctest (loopback, plain HTTP): the driver's own cost per operation.
go test -run '^$' -bench . -benchtime "${BENCHTIME:-2s}" -count "${COUNT:-3}" ./bmc/redfish/
