#!/usr/bin/env bash
# Times power-on to kernel start of QEMU machines, for each firmware (SeaBIOS with QEMU's
# iPXE ROM, OVMF PXE, OVMF HTTP boot), through siteboot's reference agent and through
# dnsmasq in proxy mode plus nginx, on two identical namespace segments in the same run,
# one machine at a time, rounds interleaved. Needs root and the e2e tests' peers.
#
#   bench/e2e/run.sh [ROUNDS]     # default 3
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
SITEBOOT_E2E_BENCH=$rounds SITEBOOT_REQUIRE_PEERS=1 \
	go test -count=1 -timeout 60m -run '^TestE2E_BenchFirmwareBoot$' -v ./e2e/ |
	grep -v -E '^(=== |--- PASS|PASS$)'
