#!/usr/bin/env bash
# The cost of the boot events and the per-machine timeline in the boot storm: the agent with
# them on against the same agent with them off ([boot] timeline = true / false), side by
# side, at each machine count of SIZES, ROUNDS rounds each (the two runs of a round back to
# back, their order alternating between rounds), each run in a network namespace of its own
# as ab.sh runs them. It prints one line per run and, per size, the medians and the ratios
# on/off of the agent's CPU per machine booted and of its peak RSS; then the machines booted
# and the ratios of the rounds in which both runs booted every machine (a run that lost
# machines to a loaded host holds fewer in memory).
#
#   sudo bench/storm/timeline.sh
#   sudo SIZES="1000 4000" ROUNDS=5 DEPLOY_MIB=4 bench/storm/timeline.sh
#
# The machine counts power on at the same rate (RATE machines a second). ON_BIN and OFF_BIN
# name two agent binaries to compare instead, each run without the key (for an agent that
# does not have it yet: OFF_BIN is then a build whose components get no Events).
set -euo pipefail

SIZES=${SIZES:-"1000 4000"}
ROUNDS=${ROUNDS:-5}
RATE=${RATE:-100}
DEPLOY_MIB=${DEPLOY_MIB:-4}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/sbstormtl.XXXXXX)
NS=sbstormtl$$

[ "$(id -u)" = 0 ] || { echo "timeline.sh: needs root (network namespace, port 67)" >&2; exit 1; }
cleanup() {
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$REPO" && go build -o "$WORK/storm" ./bench/storm)
if [ -n "${ON_BIN:-}${OFF_BIN:-}" ]; then
	[ -n "${ON_BIN:-}" ] && [ -n "${OFF_BIN:-}" ] || { echo "timeline.sh: give both ON_BIN and OFF_BIN" >&2; exit 2; }
	bin_on=$(realpath "$ON_BIN") bin_off=$(realpath "$OFF_BIN") key_on= key_off=
else
	(cd "$REPO" && go build -o "$WORK/siteagent" ./examples/siteagent)
	bin_on=$WORK/siteagent bin_off=$WORK/siteagent key_on=on key_off=off
fi
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, $(go env GOVERSION); SIZES=$SIZES ROUNDS=$ROUNDS RATE=$RATE/s DEPLOY_MIB=$DEPLOY_MIB"
echo "# on:  $bin_on${key_on:+ with [boot] timeline = true}"
echo "# off: $bin_off${key_off:+ with [boot] timeline = false}"

# run SIDE N SPREAD: one storm; prints "cpu_ms_per_machine peak_rss_mib booted".
run() {
	local side=$1 n=$2 spread=$3 bin key out
	if [ "$side" = on ]; then bin=$bin_on key=$key_on; else bin=$bin_off key=$key_off; fi
	out="$WORK/out-$side-$n.txt"
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip netns exec "$NS" "$WORK/storm" -target agent -agent-bin "$bin" ${key:+-timeline "$key"} -n "$n" -spread "$spread" \
		-deploy-mib "$DEPLOY_MIB" -timeout 5m -work "$WORK/w" >"$out" 2>&1 || true
	ip netns del "$NS"
	rm -rf "$WORK/w"
	local failed cpu rss
	failed=$(awk '$1 == "failures" {print $2}' "$out")
	cpu=$(sed -n 's/^server *CPU \([0-9.]*\) s during.*/\1/p' "$out")
	rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB (VmHWM.*/\1/p' "$out")
	if [ -z "$failed" ] || [ -z "$cpu" ] || [ -z "$rss" ]; then
		echo "timeline.sh: the $side storm of $n machines gave no figures:" >&2
		tail -20 "$out" >&2
		echo "- - 0"
		return
	fi
	awk -v n="$n" -v f="$failed" -v c="$cpu" -v r="$rss" 'BEGIN { b = n - f; printf "%.3f %.1f %d\n", (b > 0 ? 1000 * c / b : 0), r, b }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

rc=0
for n in $SIZES; do
	spread=$(awk -v n="$n" -v r="$RATE" 'BEGIN { printf "%ds", (n + r - 1) / r }')
	: >"$WORK/on-$n" && : >"$WORK/off-$n" && : >"$WORK/booted-on-$n" && : >"$WORK/booted-off-$n" && : >"$WORK/full-$n"
	for round in $(seq "$ROUNDS"); do
		order="on off"
		[ $((round % 2)) = 0 ] && order="off on"
		for side in $order; do
			read -r cpu rss booted < <(run "$side" "$n" "$spread")
			echo "$n machines, round $round, $side (load $(cut -d' ' -f1 /proc/loadavg)): booted $booted, CPU ${cpu} ms per machine booted, peak RSS ${rss} MiB"
			[ "$booted" = "$n" ] || rc=1
			[ "$cpu" != - ] && echo "$cpu $rss" >>"$WORK/$side-$n"
			echo "$booted" >>"$WORK/booted-$side-$n"
		done
		# a round both of whose runs booted every machine: its ratio compares like with like
		if [ "$(tail -1 "$WORK/booted-on-$n")" = "$n" ] && [ "$(tail -1 "$WORK/booted-off-$n")" = "$n" ]; then
			paste -d' ' <(tail -1 "$WORK/on-$n") <(tail -1 "$WORK/off-$n") | awk '{ print $1 / $3, $2 / $4 }' >>"$WORK/full-$n"
		fi
	done
	con=$(cut -d' ' -f1 "$WORK/on-$n" | median) coff=$(cut -d' ' -f1 "$WORK/off-$n" | median)
	ron=$(cut -d' ' -f2 "$WORK/on-$n" | median) roff=$(cut -d' ' -f2 "$WORK/off-$n" | median)
	# The ratio of the rounds' medians, and the median of each round's own ratio (the two
	# runs of a round share the machine's load).
	paste -d' ' "$WORK/on-$n" "$WORK/off-$n" | awk '$3 > 0 && $4 > 0 { print $1 / $3, $2 / $4 }' >"$WORK/ratios-$n"
	rc_cpu=$(cut -d' ' -f1 "$WORK/ratios-$n" | median) rc_rss=$(cut -d' ' -f2 "$WORK/ratios-$n" | median)
	awk -v n="$n" -v con="$con" -v coff="$coff" -v ron="$ron" -v roff="$roff" -v pc="$rc_cpu" -v pr="$rc_rss" 'BEGIN {
		printf "%d machines: CPU per machine booted, median on %s ms / off %s ms = %.3f (median of the rounds'"'"' ratios %.3f)\n", n, con, coff, con / coff, pc
		printf "%d machines: peak RSS, median on %s MiB / off %s MiB = %.3f (median of the rounds'"'"' ratios %.3f)\n", n, ron, roff, ron / roff, pr
	}'
	bon=$(median <"$WORK/booted-on-$n") boff=$(median <"$WORK/booted-off-$n")
	full=$(wc -l <"$WORK/full-$n" 2>/dev/null || echo 0)
	echo "$n machines: booted, median on $bon / off $boff; rounds where both runs booted every machine: $full of $ROUNDS"
	if [ "$full" -gt 0 ]; then
		echo "$n machines: those rounds' ratios on/off, median: CPU $(cut -d' ' -f1 "$WORK/full-$n" | median), peak RSS $(cut -d' ' -f2 "$WORK/full-$n" | median)"
	fi
done
exit $rc
