#!/usr/bin/env bash
# Cost of iPXE's AES-GCM per byte, as the pinned iPXE source has it and with siteboot's patches
# (firmware/ipxe/patches) applied, from iPXE's own self-tests (tests.linux, which also check
# every GCM test vector) built side by side in one run on this machine, and the ratio.
# Needs: make gcc binutils perl patch xz-utils.
#
#   bench/ipxe/gcm.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../../firmware/ipxe" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
jobs=${JOBS:-$(nproc)}

cost() { # DIR: the AES-128-GCM decryption cost iPXE's gcm test prints
	(cd "$1/ipxe/src" && make -s -j"$jobs" NO_WERROR=1 bin-x86_64-linux/tests.linux DEBUG=gcm_test,aes_test >/dev/null 2>&1 &&
		./bin-x86_64-linux/tests.linux 2>&1 | tr -d '\r') >"$1/tests.out"
	grep -q 'OK: "gcm"' "$1/tests.out" || { echo "$1: iPXE's GCM tests did not pass" >&2; exit 1; }
	sed -n 's/^AES-128-GCM decryption required \([0-9]*\) cycles per byte$/\1/p' "$1/tests.out"
}
. "$here/source.sh"
mkdir "$work/pinned" "$work/patched"
unpack_source "$work/pinned" pinned
unpack_source "$work/patched"
pinned=$(cost "$work/pinned")
patched=$(cost "$work/patched")
aes=$(sed -n 's/^AES-128-ECB decryption required \([0-9]*\) cycles per byte$/\1/p' "$work/patched/tests.out")
echo "AES-128-GCM decryption, cycles per byte: patched $patched, pinned $pinned, ratio $(awk -v a="$patched" -v b="$pinned" 'BEGIN{printf "%.2f", a/b}') (AES-128 alone: $aes)"
