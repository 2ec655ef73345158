#!/usr/bin/env bash
# Times power-on to kernel start of OVMF PXE machines booting the agent's own snponly build,
# over https and over plain HTTP, on two identical namespace segments in the same run, one
# machine at a time, rounds interleaved, and prints the ratio. Needs root and the e2e peers.
#
#   bench/e2e/https.sh [ROUNDS]     # default 3
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
SITEBOOT_E2E_BENCH_HTTPS=$rounds SITEBOOT_REQUIRE_PEERS=1 \
	go test -count=1 -timeout 60m -run '^TestE2E_BenchHTTPS$' -v ./e2e/ |
	grep -v -E '^(=== |--- PASS|PASS$)'
