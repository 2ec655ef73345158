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

ip netns exec $ours "$tmp/bench" serve -macs "$MACS" -workers "${WORKERS:-0}" ${PROFILE:+-cpuprofile "$PROFILE"} 2>"$tmp/ours.log" &
pids+=($!)
ours_pid=$!
ip netns exec $dq dnsmasq --keep-in-foreground --conf-file=/dev/null --port=0 \
	--interface=eth0 --bind-interfaces --dhcp-range=192.0.2.0,proxy \
	--pxe-service=x86-64_EFI,siteboot,ipxe.efi --pxe-service=x86PC,siteboot,undionly.kpxe \
	--quiet-dhcp --log-facility="$tmp/dnsmasq.log" --pid-file="$tmp/dnsmasq.pid" \
	--dhcp-leasefile="$tmp/dnsmasq.leases" --user=root 2>"$tmp/dnsmasq.err" &
pids+=($!)
dq_pid=$!
sleep 1

flood() { ip netns exec $fl "$tmp/bench" flood -target "$1:67" -dur "${DUR}s" -window "$WINDOW" -macs "$MACS"; }
# CPU time (user+system, clock ticks) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

echo "flood: window $WINDOW, $DUR s per measurement, $ROUNDS rounds, $MACS MACs; $(nproc) CPUs"
: >"$tmp/ours" ; : >"$tmp/dq" ; : >"$tmp/ours.eff" ; : >"$tmp/dq.eff" ; : >"$tmp/ratio"
for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order="ours dq"; else order="dq ours"; fi
	for who in $order; do
		if [ "$who" = ours ]; then ip=192.0.2.10; name=proxydhcp; pid=$ours_pid; else ip=192.0.2.11; name=dnsmasq; pid=$dq_pid; fi
		t0=$(ticks "$pid")
		line=$(flood $ip)
		t1=$(ticks "$pid")
		rate=$(echo "$line" | sed -n 's/.*"answers_per_sec":\([0-9.]*\).*/\1/p')
		answers=$(echo "$line" | sed -n 's/.*"answers":\([0-9]*\).*/\1/p')
		# Answers per CPU-second of the server process (the warm-up's answers are not
		# counted, so this slightly understates both servers alike).
		eff=$(awk -v a="$answers" -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN {print (t > 0 ? a * hz / t : 0)}')
		echo "$rate" >>"$tmp/$who"
		echo "$eff" >>"$tmp/$who.eff"
		eval "rate_$who=$rate"
		printf 'round %d %-9s %8.0f answers/s %8.0f answers/CPU-s  %s\n' "$r" "$name" "$rate" "$eff" "$line"
	done
	awk -v o="$rate_ours" -v d="$rate_dq" 'BEGIN {print (d > 0 ? o/d : 0)}' >>"$tmp/ratio"
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mo=$(median "$tmp/ours"); md=$(median "$tmp/dq")
eo=$(median "$tmp/ours.eff"); ed=$(median "$tmp/dq.eff")
printf 'median answers/s:       proxydhcp %.0f  dnsmasq %.0f  ratio of medians %.2f  median of per-round ratios %.2f\n' \
	"$mo" "$md" "$(echo "$mo $md" | awk '{print ($2 > 0 ? $1/$2 : 0)}')" "$(median "$tmp/ratio")"
printf 'median answers/CPU-s:   proxydhcp %.0f  dnsmasq %.0f  ratio %.2f\n' "$eo" "$ed" "$(echo "$eo $ed" | awk '{print ($2 > 0 ? $1/$2 : 0)}')"
echo "dnsmasq $(dnsmasq --version | head -1)"
