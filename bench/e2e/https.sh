#!/usr/bin/env bash
# Times power-on to kernel start of machines booting the agent's own iPXE builds, over https
# and over plain HTTP, on two identical namespace segments in the same run, one machine at a
# time, rounds interleaved, and prints the ratio. Needs root and the e2e peers.
#
#   bench/e2e/https.sh [ROUNDS] [FIRMWARE]   # default 3 rounds of uefi-pxe
#
# FIRMWARE: uefi-pxe (OVMF PXE + snponly.efi), arm64-pxe (AAVMF PXE + the arm64 snponly.efi),
# bios (SeaBIOS's iPXE ROM chaining undionly.kpxe), uefi-http (OVMF's UEFI HTTP boot of
# snponly.efi, over https with the CA enrolled on the https side), arm64-http (the same on AAVMF).
# SITEBOOT_E2E_BENCH_HTTPS_TRACE=1 also prints each serial line with the time it appeared.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
fw=${2:-uefi-pxe}
SITEBOOT_E2E_BENCH_HTTPS=$rounds SITEBOOT_E2E_BENCH_HTTPS_FW=$fw SITEBOOT_REQUIRE_PEERS=1 \
	go test -count=1 -timeout 60m -run '^TestE2E_BenchHTTPS$' -v ./e2e/ |
	grep -v -E '^(=== |--- PASS|PASS$)'
