#!/usr/bin/env bash
# Runs iPXE's own self-tests (tests.linux: every AES, GCM, TLS-related and other test vector
# iPXE carries) on the pinned source with patches/*.patch applied, natively on x86-64 and, for
# the arm64 build's code, under qemu-aarch64 (user mode), where the ARMv8 AES instructions are
# in use. A patch that breaks a vector fails here before a rebuild reaches a machine.
#
#   firmware/ipxe/selftest.sh            # x86-64 and arm64
#   firmware/ipxe/selftest.sh x86_64     # one of them
#
# Needs: make gcc binutils perl patch xz-utils, and for arm64 gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross and qemu-user. Builds take several minutes each.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-$(nproc)}
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(x86_64 arm64)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/source.sh"
unpack_source "$work"
cd "$work/ipxe/src"
for arch in "${arches[@]}"; do
	case $arch in
	x86_64) cross=() run=() ;;
	arm64) cross=(CROSS=aarch64-linux-gnu- DEBUG=arm64_aes) run=(qemu-aarch64 -cpu cortex-a57 -L /usr/aarch64-linux-gnu) ;;
	*) echo "selftest: unknown architecture $arch (want x86_64 or arm64)" >&2; exit 2 ;;
	esac
	make -s -j"$jobs" NO_WERROR=1 "${cross[@]}" "bin-$arch-linux/tests.linux" >/dev/null 2>"$work/$arch.build" ||
		{ cat "$work/$arch.build" >&2; echo "selftest: $arch: build failed" >&2; exit 1; }
	"${run[@]}" "./bin-$arch-linux/tests.linux" 2>&1 | tr -d '\r' >"$work/$arch.out" || true
	if ! result=$(grep -E '^OK: all [0-9]+ tests passed$' "$work/$arch.out"); then
		grep -E 'FAIL|failed' "$work/$arch.out" >&2 || tail -20 "$work/$arch.out" >&2
		echo "selftest: $arch: iPXE's self-tests did not all pass" >&2
		exit 1
	fi
	if [ "$arch" = arm64 ] && ! grep -q 'AES encryption uses the ARMv8 Cryptography Extension' "$work/$arch.out"; then
		echo "selftest: arm64: the tests ran without the ARMv8 AES instructions" >&2
		exit 1
	fi
	echo "selftest: $arch: $result"
done
