#!/usr/bin/env bash
# Side-by-side TFTP throughput of siteboot's tftpd against tftpd-hpa, dnsmasq and atftpd.
#
#   sudo bench/tftpd/run.sh            (from the repository root; needs root for namespaces)
#
# Part 1, loopback: all four servers run in one network namespace (dnsmasq serves TFTP on
# port 69 only); curl fetches one SINGLE_MB file, and CONC copies of a CONC_MB file at once,
# at blksize 1468 and 65464. Runs are interleaved (every server once per round, ROUNDS rounds)
# and the medians are printed, with each server's ratio to tftpd-hpa.
#
# Part 2, windowsize: a second namespace joined by a link that holds every frame from the
# server for 1 ms (so a round trip is about 1 ms), atftp fetching a WIN_MB file at blksize
# 1468: ours and atftpd at windowsize 1, 4 and 16 (RFC 7440), the others at 1 (they do not
# negotiate it). The link is `tc qdisc add dev X root netem delay 1ms` where the kernel has netem
# (NETEM=1 forces it), else delaylink/ (two taps, frames forwarded in user space).
#
# Wall-clock throughput swings widely on a shared machine, so each server also runs in its own
# cpuacct cgroup (v1, where writable) and the CPU time it spent per GiB served is reported:
# that figure depends far less on what else runs.
#
# BLKSIZES (default "1468 65464") and CONC_RUN=0 (skip the concurrent case) narrow part 1;
# PART1=0 skips it.
#
# Our server runs with -per-source 64: in part 1 every client comes from 127.0.0.1, and the
# default of 4 per source would drop 28 of the 32 concurrent requests (as designed).
set -euo pipefail

ROUNDS=${ROUNDS:-5}
SINGLE_MB=${SINGLE_MB:-64}
CONC=${CONC:-32}
CONC_MB=${CONC_MB:-8}
WIN_MB=${WIN_MB:-4}
WIN_ROUNDS=${WIN_ROUNDS:-3}
BLKSIZES=${BLKSIZES:-1468 65464}
CONC_RUN=${CONC_RUN:-1}
PART1=${PART1:-1}

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespaces, netem)" >&2; exit 1; }
for p in curl atftp in.tftpd dnsmasq tc ip go apt-get dpkg busybox; do
	command -v "$p" >/dev/null || { echo "run.sh: $p not found" >&2; exit 1; }
done
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/sbtftp-bench.XXXXXX)
NS=sbtftps$$
NC=sbtftpc$$
PIDS=()
CG=/sys/fs/cgroup/cpuacct
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	for d in "$CG"/sbtftp$$-*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
	ip netns del "$NS" 2>/dev/null || true
	ip netns del "$NC" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, go $(go env GOVERSION)"
echo "# curl $(curl --version | head -1 | cut -d' ' -f2), $(in.tftpd -V 2>&1 | head -1), $(dnsmasq --version | head -1)"

# Our server, and atftpd unpacked from its .deb (it conflicts with tftpd-hpa as a package).
(cd "$REPO" && go build -o "$WORK/serve" ./bench/tftpd/serve && go build -o "$WORK/delaylink" ./bench/tftpd/delaylink)
(cd "$WORK" && apt-get download atftpd >/dev/null 2>&1 && dpkg -x atftpd_*.deb atftpd)
ATFTPD="$WORK/atftpd/usr/sbin/atftpd"
echo "# $($ATFTPD --version 2>&1 | head -1)"

ROOT="$WORK/root"
mkdir -p "$ROOT"
head -c $((SINGLE_MB << 20)) /dev/urandom >"$ROOT/single.bin"
head -c $((CONC_MB << 20)) /dev/urandom >"$ROOT/conc.bin"
head -c $((WIN_MB << 20)) /dev/urandom >"$ROOT/win.bin"
chmod -R a+rX "$ROOT"

# Namespaces: servers in $NS (lo, and vs0 198.51.100.1), the part-2 client in $NC (vc0 198.51.100.2).
ip netns add "$NS"
ip netns add "$NC"
ip -n "$NS" link set lo up
ip -n "$NC" link set lo up
NETEM=${NETEM:-$(ip netns exec "$NS" tc qdisc add dev lo root netem delay 0ms 2>/dev/null && echo 1 || echo 0)}
ip netns exec "$NS" tc qdisc del dev lo root 2>/dev/null || true
if [ "$NETEM" = 1 ]; then
	LINK="veth, netem delay 1ms on the server's egress"
	ip link add vs0 netns "$NS" type veth peer name vc0 netns "$NC"
	ip netns exec "$NS" tc qdisc add dev vs0 root netem delay 1ms
else
	LINK="delaylink taps (no netem in this kernel), 1 ms on frames from the server"
	"$WORK/delaylink" -ns1 "$NS" -if1 vs0 -ns2 "$NC" -if2 vc0 -delay12 1ms >"$WORK/delaylink.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 50); do grep -q ready "$WORK/delaylink.log" && break; sleep 0.1; done
	grep -q ready "$WORK/delaylink.log" || { cat "$WORK/delaylink.log" >&2; exit 1; }
fi
ip -n "$NS" addr add 198.51.100.1/24 dev vs0
ip -n "$NC" addr add 198.51.100.2/24 dev vc0
ip -n "$NS" link set vs0 up
ip -n "$NC" link set vc0 up

declare -A PORT=([ours]=6970 [tftpd-hpa]=6971 [dnsmasq]=69 [atftpd]=6972 [ours-p1]=6973)
SERVERS=(ours tftpd-hpa dnsmasq atftpd)
# ours-p1: the same server with GOMAXPROCS=1 (a host's choice), to see what Go's scheduler costs.
[ "${OURS_P1:-1}" = 1 ] && SERVERS+=(ours-p1)
start() { # name command...
	local name=$1
	shift
	ip netns exec "$NS" "$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	if [ -w "$CG" ]; then
		mkdir -p "$CG/sbtftp$$-$name"
		echo $! >"$CG/sbtftp$$-$name/cgroup.procs"
	fi
}
cpu_ns() { cat "$CG/sbtftp$$-$1/cpuacct.usage" 2>/dev/null || echo 0; }
# CPU seconds per GiB: cpu_per_gib BYTES NS_BEFORE NS_AFTER
cpu_per_gib() { awk -v b="$1" -v c0="$2" -v c1="$3" 'BEGIN { printf "%.2f", (c1 - c0) / 1e9 / (b / 2^30) }'; }
start ours "$WORK/serve" -dir "$ROOT" -addr 0.0.0.0:6970 -max 64 -per-source 64
start ours-p1 env GOMAXPROCS=1 "$WORK/serve" -dir "$ROOT" -addr 0.0.0.0:6973 -max 64 -per-source 64
start tftpd-hpa in.tftpd --foreground --listen --address 0.0.0.0:6971 --secure --user root "$ROOT"
start dnsmasq dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --port=0 \
	--enable-tftp --tftp-root="$ROOT" --edns-packet-max=65535 --tftp-max=200 --user=root --group=root \
	--pid-file= --log-facility=-
start atftpd "$ATFTPD" --daemon --no-fork --port 6972 --bind-address 0.0.0.0 --user root --group root \
	--maxthread 200 --logfile /dev/null "$ROOT"
sleep 1

now() { date +%s.%N; }
mbps() { awk -v b="$1" -v s="$2" -v e="$3" 'BEGIN { printf "%.1f", b / 1e6 / (e - s) }'; }

# Each server must return the files byte for byte before it is timed.
for s in "${SERVERS[@]}"; do
	for b in 1468 65464; do
		ip netns exec "$NS" curl -sS --max-time 60 -o "$WORK/check.bin" --tftp-blksize $b "tftp://127.0.0.1:${PORT[$s]}/conc.bin"
		cmp -s "$WORK/check.bin" "$ROOT/conc.bin" || { echo "run.sh: $s at blksize $b: wrong bytes" >&2; exit 1; }
	done
done

RES="$WORK/results.tsv"
: >"$RES"
single() { # server blksize
	local s e c0 c1
	c0=$(cpu_ns "$1")
	s=$(now)
	ip netns exec "$NS" curl -sS --max-time 300 -o /dev/null --tftp-blksize "$2" "tftp://127.0.0.1:${PORT[$1]}/single.bin"
	e=$(now)
	sleep 0.2 # let a forking server reap its child, so the cgroup has counted it
	c1=$(cpu_ns "$1")
	echo -e "$1\t$2\tsingle\t$(mbps $((SINGLE_MB << 20)) "$s" "$e")\t$(cpu_per_gib $((SINGLE_MB << 20)) "$c0" "$c1")" >>"$RES"
}
concurrent() { # server blksize
	local s e c0 c1
	c0=$(cpu_ns "$1")
	s=$(now)
	ip netns exec "$NS" bash -c "for i in \$(seq $CONC); do curl -sS --max-time 300 -o /dev/null --tftp-blksize $2 tftp://127.0.0.1:${PORT[$1]}/conc.bin & done; wait"
	e=$(now)
	sleep 0.2
	c1=$(cpu_ns "$1")
	echo -e "$1\t$2\tconc$CONC\t$(mbps $((CONC * (CONC_MB << 20))) "$s" "$e")\t$(cpu_per_gib $((CONC * (CONC_MB << 20))) "$c0" "$c1")" >>"$RES"
}
if [ "$PART1" != 1 ]; then ROUNDS=0; fi
for r in $(seq "$ROUNDS"); do
	for b in $BLKSIZES; do
		# Rotate the order every round so no server always runs first.
		for i in "${!SERVERS[@]}"; do
			s=${SERVERS[$(((i + r) % ${#SERVERS[@]}))]}
			single "$s" "$b"
			if [ "$CONC_RUN" = 1 ]; then concurrent "$s" "$b"; fi
		done
	done
	echo "# round $r done" >&2
done

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo
echo "## Loopback, median of $ROUNDS interleaved rounds; ratios to tftpd-hpa"
echo "## single: one ${SINGLE_MB} MiB file; conc$CONC: $CONC clients at once, ${CONC_MB} MiB each (aggregate)"
echo "## MB/s: 10^6 B/s of wall clock; cpu: the server's CPU seconds per GiB served (lower is better)"
printf "%-10s %-7s %-7s %7s %6s %6s %6s  %s\n" server blksize case MB/s ratio cpu ratio "MB/s runs"
col() { awk -F'\t' -v s="$1" -v b="$2" -v c="$3" -v k="$4" '$1 == s && $2 == b && $3 == c { print $k }' "$RES"; }
ratio() { awk -v m="$1" -v r="$2" 'BEGIN { if (r > 0) printf "%.2f", m / r; else print "-" }'; }
CASES=(single)
if [ "$CONC_RUN" = 1 ]; then CASES+=("conc$CONC"); fi
if [ "$PART1" != 1 ]; then CASES=(); fi
for c in "${CASES[@]}"; do
	for b in $BLKSIZES; do
		ref=$(col tftpd-hpa $b $c 4 | median)
		refc=$(col tftpd-hpa $b $c 5 | median)
		for s in "${SERVERS[@]}"; do
			m=$(col "$s" $b $c 4 | median)
			mc=$(col "$s" $b $c 5 | median)
			printf "%-10s %-7s %-7s %7s %6s %6s %6s  %s\n" "$s" "$b" "$c" "$m" "$(ratio "$m" "$ref")" "$mc" "$(ratio "$mc" "$refc")" "$(echo $(col "$s" $b $c 4))"
		done
	done
done

# Part 2: windowsize with 1 ms of delay on frames from the server.
RTT=$(ip netns exec "$NC" busybox ping -q -i 0.05 -c 40 198.51.100.1 | tail -1)
WRES="$WORK/win.tsv"
: >"$WRES"
wrun() { # label server windowsize
	local s e opt=()
	[ "$3" -gt 1 ] && opt=(--option "windowsize $3")
	s=$(now)
	ip netns exec "$NC" atftp --get -r win.bin -l /dev/null --option "blksize 1468" "${opt[@]}" 198.51.100.1 "${PORT[$2]}" >/dev/null 2>&1
	e=$(now)
	echo -e "$1\t$(mbps $((WIN_MB << 20)) "$s" "$e")" >>"$WRES"
}
WLABELS=("ours w1" "ours w4" "ours w16" "tftpd-hpa w1" "dnsmasq w1" "atftpd w1" "atftpd w4" "atftpd w16")
for r in $(seq "$WIN_ROUNDS"); do
	# Ours and atftpd at the same window one after the other, the order rotated per round.
	for w in 1 4 16; do
		if [ $((r % 2)) = 0 ]; then
			wrun "ours w$w" ours "$w"
			wrun "atftpd w$w" atftpd "$w"
		else
			wrun "atftpd w$w" atftpd "$w"
			wrun "ours w$w" ours "$w"
		fi
	done
	wrun "tftpd-hpa w1" tftpd-hpa 1
	wrun "dnsmasq w1" dnsmasq 1
done
echo
echo "## 1 ms delay ($LINK), atftp client, blksize 1468, ${WIN_MB} MiB, MB/s, median of $WIN_ROUNDS"
echo "## ping $RTT"
for l in "${WLABELS[@]}"; do
	runs=$(awk -F'\t' -v l="$l" '$1 == l { print $2 }' "$WRES")
	printf "%-14s %8s  %s\n" "$l" "$(echo "$runs" | median)" "$(echo $runs)"
done
for w in 1 4 16; do
	o=$(awk -F'\t' -v l="ours w$w" '$1 == l { print $2 }' "$WRES" | median)
	a=$(awk -F'\t' -v l="atftpd w$w" '$1 == l { print $2 }' "$WRES" | median)
	echo "## windowsize $w: ours / atftpd $(ratio "$o" "$a")"
done
