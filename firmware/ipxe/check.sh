#!/usr/bin/env bash
# Checks siteboot's committed iPXE binaries (ipxebin/bin) against the pinned inputs.
#   check.sh           the binaries match SHA256SUMS; if an input changed since inputs.sha256
#                      was recorded (or FORCE=1), rebuild from scratch and require the same sums
#   check.sh --record  after build.sh: record the inputs' digest in inputs.sha256
#   check.sh --unchanged  exit status 0 when the inputs are as recorded (no rebuild needed),
#                      1 otherwise: CI installs the build's tools only when they are needed
# Cheap when nothing changed (a few sha256s); a rebuild takes minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../../ipxebin/bin

inputs() {
	(cd "$here" && sha256sum build.sh source.sh embed.ipxe config/local/*.h config/trust-placeholder.crt patches/*.patch \
		src/ipxe-v2.0.0.tar.xz)
}

if [ "${1:-}" = --record ]; then
	inputs >"$here/inputs.sha256"
	exit 0
fi
if [ "${1:-}" = --unchanged ]; then
	inputs | cmp -s - "$here/inputs.sha256"
	exit
fi

(cd "$bin" && sha256sum --quiet -c SHA256SUMS)
if [ "${FORCE:-0}" != 1 ] && inputs | cmp -s - "$here/inputs.sha256"; then
	echo "ipxe: inputs unchanged, committed binaries match SHA256SUMS"
	exit 0
fi
echo "ipxe: inputs changed (or FORCE=1): rebuilding"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/build.sh" "$tmp"
if ! diff -u "$bin/SHA256SUMS" "$tmp/SHA256SUMS"; then
	echo "ipxe: a rebuild does not reproduce the committed binaries; run build.sh and check.sh --record" >&2
	exit 1
fi
echo "ipxe: rebuild reproduces the committed binaries"
if ! inputs | cmp -s - "$here/inputs.sha256"; then
	echo "ipxe: inputs.sha256 is stale; run check.sh --record" >&2
	exit 1
fi
