#!/usr/bin/env bash
# A/B of agent builds in the boot storm: the agent alone (no peer), builds alternating, so
# that what the shared machine does to one run it does to its neighbours too.
#
#   sudo ROUNDS=5 bench/storm/ab.sh /tmp/siteagent-a /tmp/siteagent-b ...
#
# Each argument is a siteagent binary (go build -o FILE ./examples/siteagent on the tree to
# try) or an executable wrapper that execs one (e.g. to set GOMAXPROCS). Each round runs
# every build once, in its own network namespace, N machines within SPREAD as run.sh does;
# one line per run gives the build, the round, the load average and the storm's figures.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
N=${N:-1000}
SPREAD=${SPREAD:-10s}
DEPLOY_MIB=${DEPLOY_MIB:-32}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/sbstormab.XXXXXX)
NS=sbstormab$$

[ "$(id -u)" = 0 ] || { echo "ab.sh: needs root (network namespace, port 67)" >&2; exit 1; }
[ $# -ge 1 ] || { echo "ab.sh: give one or more siteagent binaries" >&2; exit 2; }
cleanup() {
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$REPO" && go build -o "$WORK/storm" ./bench/storm)
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores; N=$N SPREAD=$SPREAD DEPLOY_MIB=$DEPLOY_MIB, $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
	i=0
	for bin in "$@"; do
		i=$((i + 1))
		ip netns add "$NS"
		ip -n "$NS" link set lo up
		out="$WORK/out-$i-$round.txt"
		ip netns exec "$NS" "$WORK/storm" -target agent -agent-bin "$(realpath "$bin")" -n "$N" -spread "$SPREAD" \
			-deploy-mib "$DEPLOY_MIB" -timeout 3m -work "$WORK/w" >"$out" 2>&1 || true
		ip netns del "$NS"
		rm -rf "$WORK/w"
		echo "$(basename "$bin") round $round load $(cut -d' ' -f1 /proc/loadavg): $(grep -E '^(failures|tftp|server) ' "$out" | tr -s ' ' | tr '\n' ' ' | sed 's/ (VmHWM.*//')"
	done
done
