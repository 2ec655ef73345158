#!/usr/bin/env bash
# The boot storm: N simulated machines powering on within SPREAD against one siteagent.
#
#   sudo bench/storm/run.sh                 (from anywhere; needs root: a network namespace, port 67/68)
#   N=1000 SPREAD=10s DEPLOY_MIB=32 PROFILE=1 sudo bench/storm/run.sh
#
# Everything runs in a network namespace of its own, on its loopback: the agent at 127.0.0.2
# (proxy DHCP on 67 and 4011, HTTP on 8080, TFTP on 127.0.0.1:6969, because every TFTP transfer
# socket on loopback answers from 127.0.0.1), the machines at 127.1.0.1 and up, one address
# each, their DHCP on port 68 as firmware's. The storm program (bench/storm) runs the control
# plane and the image origin in process over HTTP and the agent as a separate process (the
# examples/siteagent binary with a TOML config), and reads the agent's CPU time and peak RSS
# from /proc/PID/stat and /proc/PID/status.
#
# PROFILE=1 (the default) runs the storm a second time with the agent in process and writes
# a CPU profile; the top functions are printed twice: all of the process (the simulated
# machines included) and only the agent's packages.
#
# The same storm against dnsmasq (proxy DHCP + TFTP) and nginx is not run: see the
# note printed at the end, and bench/storm/main.go's -target peer (which works once the
# machines can take dnsmasq's broadcast proxy offer and go on to port 4011).
set -euo pipefail

N=${N:-1000}
SPREAD=${SPREAD:-10s}
TIMEOUT=${TIMEOUT:-3m}
PROFILE=${PROFILE:-1}
DEPLOY_MIB=${DEPLOY_MIB:-32}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/sbstorm.XXXXXX)
NS=sbstorm$$

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespace, port 67)" >&2; exit 1; }
cleanup() {
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$REPO" && go build -o "$WORK/storm" ./bench/storm && go build -o "$WORK/siteagent" ./examples/siteagent)
ip netns add "$NS"
ip -n "$NS" link set lo up

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, $(go env GOVERSION); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ip netns exec $NS storm -target agent -agent-bin siteagent -n $N -spread $SPREAD -deploy-mib $DEPLOY_MIB"
rc=0
ip netns exec "$NS" "$WORK/storm" -target agent -agent-bin "$WORK/siteagent" -n "$N" -spread "$SPREAD" \
	-deploy-mib "$DEPLOY_MIB" -timeout "$TIMEOUT" -work "$WORK/agent" 2> >(grep -v 'control plane unreachable' >&2) || rc=$?

if [ "$PROFILE" = 1 ]; then
	echo
	echo "# profile: the same storm with the agent in process (machines on port 10068), CPU profile of the whole process"
	ip netns exec "$NS" "$WORK/storm" -target agent -inproc -client-port 10068 -n "$N" -spread "$SPREAD" \
		-deploy-mib "$DEPLOY_MIB" -timeout "$TIMEOUT" -work "$WORK/inproc" -cpuprofile "$WORK/storm.pprof" 2>/dev/null || true
	mkdir -p "${OUT:-/tmp}"
	cp "$WORK/storm.pprof" "${OUT:-/tmp}/storm-agent.pprof"
	echo
	echo "# top functions, whole process (the machines' side included): go tool pprof -top"
	go tool pprof -top -nodecount 15 "$WORK/storm" "$WORK/storm.pprof" 2>/dev/null | sed -n '4,25p'
	echo
	echo "# the agent only: stacks through its packages (-focus), cumulative"
	go tool pprof -top -cum -nodecount 25 -focus 'siteboot/(tftpd|proxydhcp|ipxe|imagecache|assertion|lease|discovery|examples/siteagent)' \
		"$WORK/storm" "$WORK/storm.pprof" 2>/dev/null | sed -n '4,35p'
	echo "# profile kept at ${OUT:-/tmp}/storm-agent.pprof (binary: go build ./bench/storm)"
fi

echo
echo "# peer storm (dnsmasq proxy DHCP + TFTP, nginx): not run. dnsmasq 2.90 in proxy mode answers the"
echo "# simulated DISCOVER (option 93 = 7, option 55 asking for 43, 66, 67) with a broadcast offer that"
echo "# names no boot file and carries no option 43, and a REQUEST to port 4011 with an ACK carrying"
echo "# only option 43 (discovery control 8) and no boot file; internal/simmachine reads a unicast"
echo "# offer naming the boot file, as siteboot's proxydhcp sends it."
exit $rc
