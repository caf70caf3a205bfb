#!/usr/bin/env bash
# deploy/citus/cluster.sh: a Citus 13.2.2 cluster on loopback for tests and trials: one
# coordinator and two workers, each a private PostgreSQL 15 cluster run by
# deploy/local/pg.sh (fsync off, trust on loopback, free ports chosen at first start and
# kept). See docs/scale.md.
#
#   cluster.sh install      build and install Citus from deploy/citus/vendor/ when
#                           PostgreSQL 15 has no citus.so yet (root; about 4-10 minutes
#                           on 2 cores); a quick no-op otherwise
#   cluster.sh start DIR    install if needed, start (or reuse) DIR/coordinator,
#                           DIR/worker1, DIR/worker2, create the extensions in the
#                           "relayroom" database of every node, register the nodes, and
#                           print the coordinator's URL as the only line on stdout
#   cluster.sh stop DIR     stop the three nodes
#
# The database "relayroom" is ready for `relayroom migrate up` then `relayroom migrate
# citus`; the test harness (internal/pg/pgtest) makes its own databases on every node.
set -euo pipefail

readonly HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly PGSH="${HERE}/../local/pg.sh"
readonly PGBIN=/usr/lib/postgresql/15/bin
readonly VERSION=13.2.2
readonly NODES=(coordinator worker1 worker2)
readonly DB=relayroom
readonly HOST=127.0.0.1
# Every node preloads Citus. Test runs open many databases at once, each with its own
# pools and Citus's connections between nodes, hence the connection headroom.
# Citus runs a maintenance daemon (a background worker) per database on every node, and
# the tests make many databases at once.
readonly NODE_CONF="shared_preload_libraries = 'citus'
max_worker_processes = 64
max_connections = 500
citus.max_shared_pool_size = 400
max_prepared_transactions = 200"

# shellcheck source=deploy/lib.sh
source "${HERE}/../lib.sh"
usage() {
	echo "usage: $PROG install | start DIR | stop DIR" >&2
	exit 2
}

installed() { [[ -f "$("${PGBIN}/pg_config" --pkglibdir)/citus.so" ]]; }

cmd_install() {
	bash "$PGSH" install
	if installed; then
		log "Citus is installed for PostgreSQL 15"
		return 0
	fi
	[[ $(id -u) -eq 0 ]] || die "Citus is not installed: run '$0 install' as root (it builds Citus ${VERSION} from deploy/citus/vendor/)"
	exec 7>"${TMPDIR:-/tmp}/relayroom-citus-install.lock"
	flock -w 1800 7 || die "timed out waiting for another Citus install"
	if installed; then
		return 0
	fi
	log "installing Citus's build dependencies from Debian"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		postgresql-server-dev-15 gcc make libzstd-dev liblz4-dev libcurl4-openssl-dev \
		libkrb5-dev libssl-dev libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev \
		</dev/null >&2 || die "apt-get install of Citus's build dependencies failed"
	local work
	work="$(mktemp -d "${TMPDIR:-/tmp}/citus-build.XXXXXX")"
	# shellcheck disable=SC2064 # expand $work now
	trap "rm -rf '$work'" EXIT
	tar -xzf "${HERE}/vendor/citus-${VERSION}.tar.gz" -C "$work"
	(
		cd "$work/citus-${VERSION}"
		patch -p1 <"${HERE}/vendor/citus-${VERSION}-pg15.20.patch" >&2
		log "configuring and building Citus ${VERSION} (no LLVM bitcode)"
		./configure PG_CONFIG="${PGBIN}/pg_config" >"$work/configure.log" 2>&1 ||
			{ tail -n 30 "$work/configure.log" >&2; exit 1; }
		nice make -j"$(nproc)" with_llvm=no >"$work/make.log" 2>&1 ||
			{ tail -n 30 "$work/make.log" >&2; exit 1; }
		make install with_llvm=no >"$work/install.log" 2>&1 ||
			{ tail -n 30 "$work/install.log" >&2; exit 1; }
	) || die "building Citus ${VERSION} failed"
	rm -rf "$work"
	trap - EXIT
	installed || die "citus.so is still missing after the build"
	log "installed Citus ${VERSION}"
}

psql_on() {
	local port="$1" db="$2"
	shift 2
	"${PGBIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$port" -U postgres -d "$db" "$@"
}

port_of() { sed -n 's|^postgres://[^@]*@[^:]*:\([0-9]*\)/.*|\1|p' <<<"$1"; }

cmd_start() {
	[[ $# -eq 1 ]] || usage
	local dir url port
	dir="$(realpath -m -- "$1")"
	cmd_install
	mkdir -p "$dir"
	local -a ports=()
	for n in "${NODES[@]}"; do
		url="$(PGSH_PORT_BASE="${CITUS_PORT_BASE:-54360}" PGSH_CONF="$NODE_CONF" bash "$PGSH" start "$dir/$n" --fast)"
		port="$(port_of "$url")"
		[[ -n $port ]] || die "no port in the URL pg.sh printed for $n: $url"
		# A cluster created before Citus was preloaded (or by an older version of this
		# script) picks the setting up on a restart.
		if [[ "$(psql_on "$port" postgres -tAc "SHOW shared_preload_libraries")" != *citus* ||
			"$(psql_on "$port" postgres -tAc "SHOW max_worker_processes")" != 64 ]]; then
			# pg.sh writes the settings when it starts a stopped cluster.
			log "restarting $n to preload Citus and its settings"
			bash "$PGSH" stop "$dir/$n"
			url="$(PGSH_PORT_BASE="${CITUS_PORT_BASE:-54360}" PGSH_CONF="$NODE_CONF" bash "$PGSH" start "$dir/$n" --fast)"
			port="$(port_of "$url")"
		fi
		ports+=("$port")
	done
	# Only those missing: once the workers hold Citus's metadata, a worker refuses DDL
	# (even a CREATE EXTENSION IF NOT EXISTS that would do nothing).
	local ext
	for port in "${ports[@]}"; do
		for ext in citus vector pg_trgm btree_gin; do
			if [[ "$(psql_on "$port" "$DB" -tAc "SELECT count(*) FROM pg_extension WHERE extname = '$ext'")" == 0 ]]; then
				psql_on "$port" "$DB" -c "CREATE EXTENSION $ext" >&2
			fi
		done
	done
	local coord="${ports[0]}"
	psql_on "$coord" "$DB" -tAc "SELECT citus_set_coordinator_host('${HOST}', ${coord})
		WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE groupid = 0)" >/dev/null
	for port in "${ports[@]:1}"; do
		psql_on "$coord" "$DB" -tAc "SELECT citus_add_node('${HOST}', ${port})
			WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodename = '${HOST}' AND nodeport = ${port})" >/dev/null
	done
	psql_on "$coord" "$DB" -tAc "SELECT nodename || ':' || nodeport || ' ' || noderole || CASE WHEN groupid = 0 THEN ' (coordinator)' ELSE ' (worker)' END
		FROM pg_dist_node ORDER BY groupid" | sed "s/^/${PROG}: node /" >&2
	printf 'postgres://postgres@%s:%s/%s?sslmode=disable\n' "$HOST" "$coord" "$DB"
}

cmd_stop() {
	[[ $# -eq 1 ]] || usage
	local dir n
	dir="$(realpath -m -- "$1")"
	for n in "${NODES[@]}"; do
		bash "$PGSH" stop "$dir/$n"
	done
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
case "$cmd" in
install) [[ $# -eq 0 ]] || usage; cmd_install ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
*) usage ;;
esac
