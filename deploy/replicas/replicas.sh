#!/usr/bin/env bash
# deploy/replicas/replicas.sh: N `relayroom serve` replicas on loopback behind HAProxy
# (Debian's haproxy package), against one database (a plain PostgreSQL or a Citus
# coordinator). See docs/scale.md.
#
#   replicas.sh start DIR N DATABASE_URL [BIN]   start N replicas (free loopback ports)
#                      and HAProxy in front of them, wait until every replica answers
#                      /readyz, print the balancer's URL as the only line on stdout
#   replicas.sh stop DIR                         stop the replicas of DIR (each drains its
#                      calls in flight), then HAProxy
#   replicas.sh kill DIR I                       SIGKILL replica I (1-based): a crash
#   replicas.sh restart DIR I                    start replica I again on its port (after
#                      a crash), with the settings of `start`; wait until it is ready
#
# DIR keeps haproxy.cfg, the pid files and the logs. BIN defaults to bin/relayroom.
# Every replica gets the same RELAYROOM_PUBLIC_URL (the balancer's), the same
# RELAYROOM_SIGNING_KEY (the caller's, else one made by `start` and kept in DIR: download
# links and desk cursors made by one replica must be accepted by the others) and the
# caller's environment (RELAYROOM_SECRET_KEY must be the same on every replica).
set -euo pipefail

readonly HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/lib.sh
source "${HERE}/../lib.sh"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_replica DIR I PORT: one `relayroom serve` on 127.0.0.1:PORT, with the database,
# public URL and binary `start` kept in DIR (so that `restart` starts it the same way).
start_replica() {
	local dir=$1 i=$2 port=$3
	# HAProxy (on loopback) names the client in X-Forwarded-For: the per-address limits
	# count the client, not the balancer.
	DATABASE_URL="$(cat "$dir/database_url")" RELAYROOM_ADDR="127.0.0.1:${port}" RELAYROOM_PUBLIC_URL="$(cat "$dir/public_url")" \
		RELAYROOM_SIGNING_KEY="$(cat "$dir/signing_key")" RELAYROOM_TRUSTED_PROXIES="${RELAYROOM_TRUSTED_PROXIES:-127.0.0.1}" setsid "$(cat "$dir/bin")" serve >>"$dir/replica$i.log" 2>&1 </dev/null &
	echo $! >"$dir/replica$i.pid"
	echo "$port" >"$dir/replica$i.port"
}

wait_ready() { # url seconds
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		if curl -fsS -o /dev/null "$1/readyz" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	return 1
}

cmd_start() {
	local dir=$1 n=$2 url=$3 bin=${4:-bin/relayroom}
	[[ $n =~ ^[1-9][0-9]?$ ]] || die "N must be 1-99, got $n"
	command -v haproxy >/dev/null || die "haproxy is not installed (apt-get install haproxy)"
	[[ -x $bin ]] || die "no relayroom binary at $bin (make build)"
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	cmd_stop "$dir" 2>/dev/null || true
	local lb_port servers="" i port
	lb_port=$(free_port)
	local public="http://127.0.0.1:${lb_port}"
	# the database URL may hold a password: readable by the owner only
	(umask 077 && printf '%s\n' "$url" >"$dir/database_url")
	# one signing key for every replica, readable by the owner only
	(umask 077 && printf '%s\n' "${RELAYROOM_SIGNING_KEY:-$(python3 -c 'import secrets; print(secrets.token_hex(32))')}" >"$dir/signing_key")
	echo "$public" >"$dir/public_url"
	(cd "$(dirname "$bin")" && echo "$(pwd)/$(basename "$bin")") >"$dir/bin"
	for ((i = 1; i <= n; i++)); do
		port=$(free_port)
		start_replica "$dir" "$i" "$port"
		servers+="    server r$i 127.0.0.1:${port}"$'\n'"    server r$i-open 127.0.0.1:${port} backup no-check"$'\n'
	done
	for ((i = 1; i <= n; i++)); do
		# a failed start stops what it started rather than leave it running
		wait_ready "http://127.0.0.1:$(cat "$dir/replica$i.port")" 60 || { cmd_stop "$dir"; die "replica $i did not become ready (log: $dir/replica$i.log)"; }
	done
	python3 - "$HERE/haproxy.cfg" "$dir/haproxy.cfg" "127.0.0.1:${lb_port}" "$servers" <<'PY'
import sys
src, dst, bind, servers = sys.argv[1:]
text = open(src).read().replace("__BIND__", bind).replace("__SERVERS__\n", servers)
open(dst, "w").write(text)
PY
	haproxy -c -q -f "$dir/haproxy.cfg" || { cmd_stop "$dir"; die "haproxy refused $dir/haproxy.cfg"; }
	haproxy -D -f "$dir/haproxy.cfg" -p "$dir/haproxy.pid" >>"$dir/haproxy.log" 2>&1
	wait_ready "$public" 30 || { cmd_stop "$dir"; die "haproxy does not answer on $public"; }
	log "$n replicas behind haproxy at $public (dir $dir)"
	echo "$public"
}

stop_pid() { # pidfile seconds: SIGTERM, then SIGKILL after that long
	[[ -f $1 ]] || return 0
	local pid
	pid=$(cat "$1")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq $(($2 * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

# cmd_stop stops the replicas first, all at once, each draining its calls in flight
# (RELAYROOM_SHUTDOWN_TIMEOUT, then as long for its jobs: 45 s before SIGKILL), while the
# balancer still carries their answers; then the balancer, whose SIGTERM is a hard stop.
cmd_stop() {
	local dir=$1 f
	[[ -d $dir ]] || return 0
	for f in "$dir"/replica*.pid; do
		[[ -e $f ]] && { kill -TERM "$(cat "$f")" 2>/dev/null || true; }
	done
	for f in "$dir"/replica*.pid; do
		[[ -e $f ]] && stop_pid "$f" 45
	done
	stop_pid "$dir/haproxy.pid" 10
	return 0
}

cmd_kill() {
	local f="$1/replica$2.pid"
	[[ -f $f ]] || die "no replica $2 in $1"
	kill -KILL "$(cat "$f")"
	rm -f "$f"
}

cmd_restart() {
	local dir=$1 i=$2
	[[ -f $dir/replica$i.port ]] || die "no replica $i in $dir"
	[[ ! -f $dir/replica$i.pid ]] || ! kill -0 "$(cat "$dir/replica$i.pid")" 2>/dev/null || die "replica $i is running"
	start_replica "$dir" "$i" "$(cat "$dir/replica$i.port")"
	wait_ready "http://127.0.0.1:$(cat "$dir/replica$i.port")" 60 || die "replica $i did not become ready (log: $dir/replica$i.log)"
	log "replica $i is back on port $(cat "$dir/replica$i.port")"
}

case "${1:-}" in
start) [[ $# -ge 4 ]] || die "usage: $PROG start DIR N DATABASE_URL [BIN]"; cmd_start "$2" "$3" "$4" "${5:-}" ;;
stop) [[ $# -eq 2 ]] || die "usage: $PROG stop DIR"; cmd_stop "$2" ;;
kill) [[ $# -eq 3 ]] || die "usage: $PROG kill DIR I"; cmd_kill "$2" "$3" ;;
restart) [[ $# -eq 3 ]] || die "usage: $PROG restart DIR I"; cmd_restart "$2" "$3" ;;
*) echo "usage: $PROG start DIR N DATABASE_URL [BIN] | stop DIR | kill DIR I | restart DIR I" >&2; exit 2 ;;
esac
