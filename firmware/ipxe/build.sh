#!/usr/bin/env bash
# Builds siteboot's iPXE binaries from the pinned source archive in src/, with the patches in
# patches/ applied in name order, the configuration in config/local and the embedded script
# embed.ipxe, and writes them with their SHA256SUMS to the output directory (default:
# ../../ipxebin/bin). The build is
# reproducible: the same inputs give the same bytes (SOURCE_DATE_EPOCH is the pinned
# commit's time, the tree is unpacked at a fixed relative layout, nothing reads the clock).
#
# Needs: gcc, binutils, make, perl, patch, liblzma-dev, mtools, xz, and for arm64
# gcc-aarch64-linux-gnu and binutils-aarch64-linux-gnu.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../ipxebin/bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-$(nproc)}

# Time of the pinned commit (ipxe v2.0.0), so that the build timestamp is fixed.
export SOURCE_DATE_EPOCH=1772812135
export TZ=UTC LC_ALL=C

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/source.sh"
unpack_source "$work"
cp "$here"/config/local/*.h "$work/ipxe/src/config/local/"
cp "$here/embed.ipxe" "$work/ipxe/src/embed.ipxe"

cd "$work/ipxe/src"
# The only trusted root is a placeholder whose key was never kept: ipxebin replaces its
# SHA-256 fingerprint with the site CA's when it serves a binary.
cp "$here/config/trust-placeholder.crt" trust-placeholder.crt
# Objects carry the build path in their debug info, and the build id is a checksum of the
# objects: map the temporary directory to a fixed name.
common=(EMBED=embed.ipxe TRUST=trust-placeholder.crt NO_WERROR=1 V=0 "EXTRA_CFLAGS=-ffile-prefix-map=$work=/ipxe")
start=$SECONDS
make -j"$jobs" "${common[@]}" bin/undionly.kpxe bin-x86_64-efi/snponly.efi bin-x86_64-efi/ipxe.efi >&2
make -j"$jobs" "${common[@]}" CROSS=aarch64-linux-gnu- bin-arm64-efi/snponly.efi >&2
echo "build: $((SECONDS - start))s" >&2

install -m 0644 bin/undionly.kpxe "$out/undionly.kpxe"
install -m 0644 bin-x86_64-efi/snponly.efi "$out/snponly-x86_64.efi"
install -m 0644 bin-x86_64-efi/ipxe.efi "$out/ipxe-x86_64.efi"
install -m 0644 bin-arm64-efi/snponly.efi "$out/snponly-arm64.efi"
(cd "$out" && sha256sum undionly.kpxe snponly-x86_64.efi ipxe-x86_64.efi snponly-arm64.efi >SHA256SUMS)
cat "$out/SHA256SUMS" >&2
