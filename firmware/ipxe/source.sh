# Sourced by build.sh, selftest.sh and bench/ipxe/gcm.sh, so that each works on the same tree.
#
#   unpack_source DIR           the pinned iPXE source into DIR/ipxe, patches/*.patch applied
#                               in name order
#   unpack_source DIR pinned    the pinned source as it is
ipxe_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

unpack_source() {
	tar -C "$1" -xJf "$ipxe_dir/src/ipxe-v2.0.0.tar.xz"
	[ "${2:-}" = pinned ] && return 0
	local p
	for p in "$ipxe_dir"/patches/*.patch; do
		patch -s -d "$1/ipxe" -p1 --no-backup-if-mismatch <"$p"
	done
}
