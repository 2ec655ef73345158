#!/usr/bin/env bash
# Puts what the arm64 e2e tests (arm64_test.go) boot into a cache folder: Debian's arm64
# kernel (vmlinuz, from linux-image-*-arm64) and Debian's static arm64 busybox (busybox, from
# busybox-static:arm64), which the tests pack into the ramdisk's initramfs as they do the
# x86 one. The packages are downloaded with apt-get download and unpacked with dpkg-deb -x:
# nothing of arm64 is installed on this machine (dpkg only learns the foreign architecture,
# so that apt can name its packages).
#
# Usage: arm64-ramdisk.sh [DIR]. DIR defaults to $SITEBOOT_ARM64_CACHE, else
# /var/cache/siteboot-e2e/arm64, which is where the tests look by default. Run as root. It does
# nothing when DIR holds both files from the packages apt offers today (DIR/versions names
# them); it prints the folder's contents when done.
set -euo pipefail
dir=${1:-${SITEBOOT_ARM64_CACHE:-/var/cache/siteboot-e2e/arm64}}
export DEBIAN_FRONTEND=noninteractive

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	dpkg --add-architecture arm64
	apt-get update -qq
fi
# The kernel package the metapackage names today, e.g. linux-image-6.1.0-41-arm64.
kernel_pkg() {
	apt-cache depends linux-image-arm64:arm64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*-arm64\).*/\1/p' | head -n 1
}
kpkg=$(kernel_pkg)
if [ -z "$kpkg" ]; then
	apt-get update -qq
	kpkg=$(kernel_pkg)
fi
if [ -z "$kpkg" ]; then
	echo "arm64-ramdisk.sh: apt names no package for linux-image-arm64:arm64" >&2
	exit 1
fi
kver=$(apt-cache policy "$kpkg:arm64" | sed -n 's/^ *Candidate: //p')
bver=$(apt-cache policy busybox-static:arm64 | sed -n 's/^ *Candidate: //p')
want="$kpkg:arm64 $kver
busybox-static:arm64 $bver"
if [ -s "$dir/vmlinuz" ] && [ -s "$dir/busybox" ] && [ "$(cat "$dir/versions" 2>/dev/null)" = "$want" ]; then
	echo "arm64-ramdisk.sh: $dir holds $kpkg $kver and busybox-static $bver"
	exit 0
fi

mkdir -p "$dir"
work=$(mktemp -d "$dir/.download.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work" # apt-get download writes as _apt where it can
(cd "$work" && apt-get download -qq "$kpkg:arm64=$kver" "busybox-static:arm64=$bver")
dpkg-deb -x "$work"/linux-image-*_arm64.deb "$work/kernel"
dpkg-deb -x "$work"/busybox-static_*_arm64.deb "$work/busybox"
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-* | head -n 1)
install -m 0644 "$vmlinuz" "$dir/vmlinuz.new"
install -m 0755 "$work/busybox/bin/busybox" "$dir/busybox.new"
mv "$dir/vmlinuz.new" "$dir/vmlinuz"
mv "$dir/busybox.new" "$dir/busybox"
printf '%s\n' "$want" >"$dir/versions"
echo "arm64-ramdisk.sh: $dir now holds:"
ls -l "$dir"
cat "$dir/versions"
