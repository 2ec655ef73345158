#!/bin/sh
# Scripts rendered per second by package ipxe: the boot script alone, GET /boot/ipxe in the
# handler with one Ed25519 signature per script, and the same over loopback HTTP/1.1.
# Usage: bench/ipxe/run.sh [benchtime]   (default 2s; run from the repository root)
set -eu
cd "$(dirname "$0")/../.."
exec go test -run '^$' -bench . -benchtime "${1:-2s}" -count 3 ./ipxe/
