#!/usr/bin/env bash
# The boot storm: N simulated machines powering on within SPREAD against one siteagent.
#
#   sudo bench/storm/run.sh                 (from anywhere; needs root: a network namespace, port 67/68)
#   N=1000 SPREAD=10s DEPLOY_MIB=32 PROFILE=1 sudo bench/storm/run.sh
#
# Everything runs in a network namespace of its own, on its loopback: the agent at 127.0.0.2
# (proxy DHCP on 67 and 4011, HTTP on 8080, TFTP on 127.0.0.1:6969), the machines at 127.1.0.1
# and up, one address each, their DHCP on port 68 as firmware's. The storm program (bench/storm) runs the control
# plane and the image origin in process over HTTP and the agent as a separate process (the
# examples/siteagent binary with a TOML config), and reads the agent's CPU time and peak RSS
# from /proc/PID/stat and /proc/PID/status.
#
# PROFILE=1 (the default) runs the storm a second time with the agent in process and writes
# a CPU profile; the top functions are printed twice: all of the process (the simulated
# machines included) and only the agent's packages.
#
# Then the same storm against dnsmasq's TFTP server (tftp-root with the same build, its
# defaults otherwise) and nginx (the chain and boot scripts as static files, kernel, initrd
# and the deploy image), in the same namespace at the same addresses, with the agent stopped;
# nginx's and dnsmasq's CPU and peak RSS are read the same way. The machines skip DHCP there
# (-no-dhcp: told the boot file and chain URL): dnsmasq's proxy DHCP does not give the
# simulated machines a boot file (the note printed at the end says what it answers).
# Exit status: 0 when every machine booted against the agent (the peer's failures are figures).
set -euo pipefail

N=${N:-1000}
SPREAD=${SPREAD:-10s}
TIMEOUT=${TIMEOUT:-3m}
PROFILE=${PROFILE:-1}
DEPLOY_MIB=${DEPLOY_MIB:-32}
TFTP_MAX=${TFTP_MAX:-0} # the agent's boot.tftp_max_transfers; 0 is its default, 64
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/sbstorm.XXXXXX)
NS=sbstorm$$

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespace, port 67)" >&2; exit 1; }
cleanup() {
	[ -n "${DQ:-}" ] && kill "$DQ" 2>/dev/null
	[ -n "${NG:-}" ] && kill "$NG" 2>/dev/null
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$REPO" && go build -o "$WORK/storm" ./bench/storm && go build -o "$WORK/siteagent" ./examples/siteagent)
ip netns add "$NS"
ip -n "$NS" link set lo up

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, $(go env GOVERSION); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ip netns exec $NS storm -target agent -agent-bin siteagent -n $N -spread $SPREAD -deploy-mib $DEPLOY_MIB -tftp-max-transfers $TFTP_MAX"
rc=0
ip netns exec "$NS" "$WORK/storm" -target agent -agent-bin "$WORK/siteagent" -n "$N" -spread "$SPREAD" \
	-deploy-mib "$DEPLOY_MIB" -tftp-max-transfers "$TFTP_MAX" -timeout "$TIMEOUT" -work "$WORK/agent" 2> >(grep -v 'control plane unreachable' >&2) || rc=$?

# The peer: dnsmasq (TFTP only) and nginx serving the same files.
PEER="$WORK/peer"
"$WORK/storm" -gen "$PEER" -server 127.0.0.2 -http-port 8080 -deploy-mib "$DEPLOY_MIB"
mkdir -p "$PEER/nginx-tmp"
chmod 755 "$WORK"
chmod -R a+rX "$PEER"
cat >"$PEER/nginx.conf" <<EOF
worker_processes 2;
pid $PEER/nginx.pid;
error_log $PEER/nginx-error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	keepalive_requests 10000;
	default_type application/octet-stream;
	client_body_temp_path $PEER/nginx-tmp;
	proxy_temp_path $PEER/nginx-tmp;
	fastcgi_temp_path $PEER/nginx-tmp;
	uwsgi_temp_path $PEER/nginx-tmp;
	scgi_temp_path $PEER/nginx-tmp;
	server {
		listen 127.0.0.2:8080;
		root $PEER/www;
	}
}
EOF
ip netns exec "$NS" dnsmasq --keep-in-foreground --conf-file=/dev/null --port=0 --interface=lo --bind-interfaces \
	--enable-tftp --tftp-root="$PEER/tftp" --user=root --pid-file="$PEER/dnsmasq.pid" --log-facility="$PEER/dnsmasq.log" &
DQ=$!
ip netns exec "$NS" nginx -p "$PEER" -c "$PEER/nginx.conf" -g 'daemon off;' &
NG=$!
sleep 1
echo
echo "# the same storm against dnsmasq $(dnsmasq --version | head -1 | cut -d' ' -f3) (TFTP at 127.0.0.1:69) and $(nginx -v 2>&1 | cut -d' ' -f3) (HTTP at 127.0.0.2:8080)"
echo "# ip netns exec $NS storm -target peer -no-dhcp -tftp 127.0.0.1:69 -n $N -spread $SPREAD -deploy-mib $DEPLOY_MIB"
ip netns exec "$NS" "$WORK/storm" -target peer -no-dhcp -tftp 127.0.0.1:69 -peer-pids "$DQ,$NG" -n "$N" -spread "$SPREAD" \
	-deploy-mib "$DEPLOY_MIB" -timeout "$TIMEOUT" || true # the peer's failures are its figures, not ours
kill "$DQ" "$NG" 2>/dev/null || true
wait "$DQ" "$NG" 2>/dev/null || true
DQ= NG=

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
echo "# the peer ran without DHCP: dnsmasq 2.90 in proxy mode answers the simulated DISCOVER"
echo "# (option 93 = 7, option 55 asking for 43, 66, 67) with a broadcast offer that names no boot"
echo "# file and carries no option 43, and a REQUEST to port 4011 with an ACK carrying only option 43"
echo "# (discovery control 8) and no boot file; internal/simmachine reads a unicast offer naming the"
echo "# boot file, as siteboot's proxydhcp sends it."
exit $rc
