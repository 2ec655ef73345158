#!/usr/bin/env bash
# Side-by-side flood of PXE DISCOVERs at siteboot's proxydhcp and at dnsmasq in proxy mode.
#
# One isolated segment (network namespaces, 192.0.2.0/24): a bridge, our server at
# 192.0.2.10, dnsmasq (dhcp-range=192.0.2.0,proxy) at 192.0.2.11, the flooder at 192.0.2.12.
# The flooder keeps WINDOW DISCOVERs in flight to one server at a time and counts the offers
# it gets back (broadcast to port 68); rounds alternate which server goes first. Prints each
# measurement, the medians and the ratio. Needs root, iproute2 and dnsmasq.
#
#   sudo bench/proxydhcp/run.sh            # ROUNDS=5 DUR=5 WINDOW=128 MACS=1000
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DUR=${DUR:-5}
WINDOW=${WINDOW:-128}
MACS=${MACS:-1000}
cd "$(dirname "$0")/../.."

command -v dnsmasq >/dev/null || { echo "dnsmasq not found: apt-get install dnsmasq" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }

tmp=$(mktemp -d)
p="pdb$$"
br=$p-br ours=$p-ours dq=$p-dq fl=$p-fl
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	for ns in $ours $dq $fl $br; do ip netns delete "$ns" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/bench" ./bench/proxydhcp

ip netns add $br
ip -n $br link set lo up
ip -n $br link add br0 type bridge
ip -n $br addr add 192.0.2.1/24 dev br0
ip -n $br link set br0 up
i=0
for ns in $ours $dq $fl; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip -n $br link add "v$i" type veth peer name eth0 netns "$ns"
	ip -n $br link set "v$i" master br0 up
	ip -n "$ns" addr add "192.0.2.$((10 + i))/24" dev eth0
	ip -n "$ns" link set eth0 up
	i=$((i + 1))
done

ip netns exec $ours "$tmp/bench" serve -macs "$MACS" 2>"$tmp/ours.log" &
pids+=($!)
ip netns exec $dq dnsmasq --keep-in-foreground --conf-file=/dev/null --port=0 \
	--interface=eth0 --bind-interfaces --dhcp-range=192.0.2.0,proxy \
	--pxe-service=x86-64_EFI,siteboot,ipxe.efi --pxe-service=x86PC,siteboot,undionly.kpxe \
	--quiet-dhcp --log-facility="$tmp/dnsmasq.log" --pid-file="$tmp/dnsmasq.pid" \
	--dhcp-leasefile="$tmp/dnsmasq.leases" --user=root 2>"$tmp/dnsmasq.err" &
pids+=($!)
sleep 1

flood() { ip netns exec $fl "$tmp/bench" flood -target "$1:67" -dur "${DUR}s" -window "$WINDOW" -macs "$MACS"; }

echo "flood: window $WINDOW, $DUR s per measurement, $ROUNDS rounds, $MACS MACs; $(nproc) CPUs"
: >"$tmp/ours" ; : >"$tmp/dq"
for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order="ours dq"; else order="dq ours"; fi
	for who in $order; do
		if [ "$who" = ours ]; then ip=192.0.2.10; name=proxydhcp; else ip=192.0.2.11; name=dnsmasq; fi
		line=$(flood $ip)
		rate=$(echo "$line" | sed -n 's/.*"answers_per_sec":\([0-9.]*\).*/\1/p')
		echo "$rate" >>"$tmp/$who"
		printf 'round %d %-9s %s\n' "$r" "$name" "$line"
	done
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mo=$(median "$tmp/ours"); md=$(median "$tmp/dq")
printf 'median answers/s: proxydhcp %.0f  dnsmasq %.0f  ratio %.2f\n' "$mo" "$md" "$(echo "$mo $md" | awk '{print ($2 > 0 ? $1/$2 : 0)}')"
echo "dnsmasq $(dnsmasq --version | head -1)"
