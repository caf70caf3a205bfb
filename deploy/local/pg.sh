#!/usr/bin/env bash
# deploy/local/pg.sh: a private PostgreSQL 15 cluster with pg_trgm and pgvector for
# development, `make run`, `make test` and CI. No Docker: Debian's PostgreSQL 15 plus
# pgvector built from Debian trixie's source package. See docs/local-postgres.md.
#
#   pg.sh install              install PostgreSQL 15 + contrib + pgvector (idempotent;
#                              a quick no-op when everything is there)
#   pg.sh start DIR [--fast]   install if needed, create the cluster in DIR if needed,
#                              start it (or reuse it if running), create the database
#                              "relayroom", print its URL as the only line on stdout
#   pg.sh url DIR              print the URL of the running cluster in DIR (exit 1 if not)
#   pg.sh stop DIR             stop the cluster in DIR (no error if not running)
#   pg.sh restart DIR          pg_ctl restart -m fast of the running cluster in DIR, same
#                              port (what `make chaos` does to a server under load)
#   pg.sh status DIR           exit 0 running, 3 not running, 4 cannot tell (no access)
#
# Every progress or log message goes to stderr; stdout carries only the URL (start, url)
# or the status line (status).
#
# Environment knobs (all optional):
#   PGSH_PORT_BASE   first port probed for a new cluster (default 54330)
#   PGSH_TIMEOUT     seconds to wait for the server to start or stop (default 60)
#   PGSH_CONF        extra postgresql.conf lines, written last into the managed config on
#                    every start (deploy/citus/cluster.sh preloads Citus this way)
set -euo pipefail

readonly PG_MAJOR=15
readonly PGBIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
readonly PG_CONFIG="${PGBIN}/pg_config"
readonly DB_NAME="relayroom"
readonly DB_USER="postgres"
readonly LISTEN_ADDR="127.0.0.1"
readonly PORT_BASE="${PGSH_PORT_BASE:-54330}"
readonly TIMEOUT="${PGSH_TIMEOUT:-60}"
readonly EXTRA_CONF="${PGSH_CONF:-}"
readonly APT_PACKAGES=(postgresql-15 postgresql-contrib postgresql-server-dev-15 make gcc dpkg-dev)
readonly KEYRING="/usr/share/keyrings/debian-archive-keyring.gpg"
# Written into the data directory and included from postgresql.conf; rewritten on every
# start. It is also where the cluster's port is remembered between starts.
readonly MANAGED_CONF="relayroom.conf"

# shellcheck source=deploy/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# Nothing from the caller's libpq environment may redirect our own client calls.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGSERVICE PGSERVICEFILE PGOPTIONS \
	PGPASSWORD PGPASSFILE PGSSLMODE PGDATA PGTARGETSESSIONATTRS 2>/dev/null || true

usage() {
	cat >&2 <<EOF
usage: $PROG install
       $PROG start DIR [--fast]
       $PROG url DIR
       $PROG stop DIR
       $PROG restart DIR
       $PROG status DIR
EOF
	exit 2
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# ---------------------------------------------------------------------------------------
# install

# Prints what is missing (one item a line); prints nothing when all is installed.
missing_parts() {
	if [[ ! -x "${PGBIN}/postgres" || ! -x "${PG_CONFIG}" ]]; then
		echo "postgresql-${PG_MAJOR}"
		echo "pgvector"
		return 0
	fi
	local sharedir pkglibdir
	sharedir="$("${PG_CONFIG}" --sharedir)"
	pkglibdir="$("${PG_CONFIG}" --pkglibdir)"
	[[ -f "${sharedir}/extension/pg_trgm.control" ]] || echo "postgresql-contrib (pg_trgm)"
	if [[ ! -f "${sharedir}/extension/vector.control" || ! -f "${pkglibdir}/vector.so" ]]; then
		echo "pgvector"
	fi
	return 0
}

# The Debian mirror this machine's own apt configuration uses, e.g. http://HOST/debian.
# Prefers the entry for the running release's codename (not -security/-updates).
machine_mirror() {
	local codename="bookworm" f uri=""
	if [[ -r /etc/os-release ]]; then
		codename="$(sed -n 's/^VERSION_CODENAME=["'\'']\{0,1\}\([a-z]*\).*/\1/p' /etc/os-release)"
		codename="${codename:-bookworm}"
	fi
	local -a sources=() lists=()
	for f in /etc/apt/sources.list.d/*.sources; do [[ -f $f ]] && sources+=("$f"); done
	for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do [[ -f $f ]] && lists+=("$f"); done
	if ((${#sources[@]})); then
		# deb822: paragraphs separated by blank lines; comment lines ignored.
		uri="$(awk -v cn="$codename" '
			function flush() {
				if (types ~ /(^| )deb(-src)?( |$)/ && enabled != "no" && uris != "" &&
				    (" " suites " ") ~ (" " cn " ") && found == "") {
					split(uris, u, " "); found = u[1]
				}
				types = ""; uris = ""; suites = ""; enabled = ""
			}
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{
				line = $0; key = tolower(line); sub(/:.*/, "", key)
				val = line; sub(/^[^:]*:[ \t]*/, "", val); gsub(/[ \t]+/, " ", val)
				if (key == "types") types = val
				else if (key == "uris") uris = val
				else if (key == "suites") suites = val
				else if (key == "enabled") enabled = tolower(val)
			}
			END { flush(); print found }
		' "${sources[@]}")"
	fi
	if [[ -z $uri ]] && ((${#lists[@]})); then
		# One-line style: deb [options] URI SUITE COMPONENTS...
		uri="$(awk -v cn="$codename" '
			/^[ \t]*#/ { next }
			$1 == "deb" || $1 == "deb-src" {
				line = $0; sub(/^[ \t]*deb(-src)?[ \t]+/, "", line)
				if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)
				n = split(line, w, /[ \t]+/)
				if (n >= 2 && w[2] == cn) { print w[1]; exit }
			}
		' "${lists[@]}")"
	fi
	uri="${uri%/}"
	[[ -n $uri ]] || die "could not find the Debian mirror of this machine in /etc/apt/sources.list.d/ or /etc/apt/sources.list (release ${codename})"
	printf '%s\n' "$uri"
}

# When this run installed postgresql-15 for the first time, Debian's packaging may have
# created (and, on a machine with a service manager, started) a system cluster "main" on
# port 5432. Nothing here uses it: stop it and keep it from starting again.
quiet_system_cluster() {
	local start_conf="/etc/postgresql/${PG_MAJOR}/main/start.conf"
	[[ -f $start_conf ]] || return 0
	log "stopping Debian's system cluster ${PG_MAJOR}/main (unused) and setting it to manual start"
	if command -v pg_ctlcluster >/dev/null 2>&1; then
		pg_ctlcluster "${PG_MAJOR}" main stop >&2 2>/dev/null || true
	fi
	printf '%s\n' "manual" >"$start_conf"
}

build_pgvector() {
	local mirror work
	mirror="$(machine_mirror)"
	work="$(mktemp -d "${TMPDIR:-/tmp}/pgvector-build.XXXXXX")"
	# apt downloads as the unprivileged _apt user: it must be able to enter and write here.
	chmod 755 "$work"
	# shellcheck disable=SC2064 # expand $work now: it is local to this function
	trap "rm -rf '$work'" EXIT
	mkdir -p "$work/sources.list.d" "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
	chown _apt "$work/lists/partial" "$work/cache/archives/partial" "$work/src" 2>/dev/null || true
	cat >"$work/sources.list.d/trixie-src.sources" <<EOF
Types: deb-src
URIs: ${mirror}
Suites: trixie
Components: main
Signed-By: ${KEYRING}
EOF
	local -a aptopts=(
		-o "Dir::Etc::SourceList=/dev/null"
		-o "Dir::Etc::SourceParts=$work/sources.list.d"
		-o "Dir::State::Lists=$work/lists"
		-o "Dir::Cache=$work/cache"
	)
	log "fetching pgvector's source package from trixie (deb-src ${mirror})"
	apt-get "${aptopts[@]}" update >&2 || die "apt-get update for the trixie deb-src list failed"
	(cd "$work/src" && apt-get "${aptopts[@]}" source pgvector >&2) ||
		die "apt-get source pgvector (trixie) failed"
	local srcdir
	srcdir="$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n1)"
	[[ -n $srcdir ]] || die "no pgvector-* directory after apt-get source"
	log "building $(basename "$srcdir") against PostgreSQL ${PG_MAJOR}"
	# with_llvm=no: no JIT bitcode (would need clang). OPTFLAGS= drops -march=native, as
	# Debian's own build does, so the library never depends on this exact CPU.
	make -C "$srcdir" PG_CONFIG="$PG_CONFIG" with_llvm=no OPTFLAGS= >&2 ||
		die "building pgvector failed"
	make -C "$srcdir" PG_CONFIG="$PG_CONFIG" with_llvm=no OPTFLAGS= install >&2 ||
		die "installing pgvector failed"
	rm -rf "$work"
	trap - EXIT
}

cmd_install() {
	local missing
	missing="$(missing_parts)"
	if [[ -z $missing ]]; then
		log "PostgreSQL ${PG_MAJOR} with pg_trgm and pgvector is installed"
		return 0
	fi
	if ! is_root; then
		log "missing: $(echo "$missing" | paste -sd, - | sed 's/,/, /g')"
		log "install them as root, either all at once with:"
		log "    sudo $0 install"
		log "or by hand: sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${APT_PACKAGES[*]}"
		log "then build pgvector from Debian trixie's source package (see docs/local-postgres.md)"
		exit 1
	fi

	# Serialise concurrent installs (e.g. two make targets at once).
	exec 8>"${TMPDIR:-/tmp}/relayroom-pg-install.lock"
	flock -w 900 8 || die "timed out waiting for another pg.sh install"
	missing="$(missing_parts)"
	if [[ -z $missing ]]; then
		exec 8>&-
		log "PostgreSQL ${PG_MAJOR} with pg_trgm and pgvector is installed"
		return 0
	fi

	log "installing: $(echo "$missing" | paste -sd, - | sed 's/,/, /g')"
	local had_server=0 pkg
	[[ -x "${PGBIN}/postgres" ]] && had_server=1
	# Only the packages not installed yet: naming an installed one would upgrade it
	# (and, with it, the server binaries under clusters that are running).
	local -a to_install=()
	for pkg in "${APT_PACKAGES[@]}"; do
		[[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null)" == ii* ]] || to_install+=("$pkg")
	done
	export DEBIAN_FRONTEND=noninteractive
	if ((${#to_install[@]})); then
		apt-get update >&2 || die "apt-get update failed"
		apt-get install -y --no-install-recommends "${to_install[@]}" </dev/null >&2 ||
			die "apt-get install ${to_install[*]} failed"
	fi
	((had_server)) || quiet_system_cluster

	if [[ -n "$(missing_parts | grep -x pgvector || true)" ]]; then
		build_pgvector
	fi
	missing="$(missing_parts)"
	[[ -z $missing ]] || die "still missing after install: $missing"
	exec 8>&-
	log "installed PostgreSQL ${PG_MAJOR} with pg_trgm and pgvector"
}

# ---------------------------------------------------------------------------------------
# cluster helpers

# Run a PostgreSQL server-side program as the cluster's owner: the postgres system user
# when we are root (the server refuses to run as root), else ourselves. Runs from / so
# that an unreadable working directory never bothers it.
as_owner() {
	# 8>&- 9>&-: our lock descriptors must not leak into the long-lived server.
	if is_root; then
		(cd / && runuser -u postgres -- "$@") 8>&- 9>&-
	else
		(cd / && "$@") 8>&- 9>&-
	fi
}

# Absolute path without requiring it to exist.
abspath() { realpath -m -- "$1"; }

# dir_arg is a command's one argument, DIR, made absolute; anything else is a usage error
# (under set -e, its exit ends the script).
dir_arg() {
	[[ $# -eq 1 ]] || usage
	abspath "$1"
}

# Port the running server listens on (4th line of postmaster.pid), or nothing.
pid_port() {
	local pidfile="$1/postmaster.pid"
	[[ -r $pidfile ]] || return 0
	sed -n '4p' "$pidfile"
}

# Port remembered in the managed config, or nothing.
saved_port() {
	local conf="$1/${MANAGED_CONF}"
	[[ -r $conf ]] || return 0
	sed -n 's/^port = \([0-9][0-9]*\)$/\1/p' "$conf" | head -n1
}

port_in_use() {
	# A connection that succeeds means someone is listening there.
	timeout 2 bash -c "exec 3<>/dev/tcp/${LISTEN_ADDR}/$1" 2>/dev/null
}

# First free port from $1 (inclusive), skipping ports listed in $2 (space separated).
find_free_port() {
	local p="$1" skip=" ${2:-} " i
	for ((i = 0; i < 500; i++, p++)); do
		[[ $skip == *" $p "* ]] && continue
		port_in_use "$p" || {
			echo "$p"
			return 0
		}
	done
	die "no free TCP port on ${LISTEN_ADDR} from $1 to $((p - 1))"
}

url_for_port() { printf 'postgres://%s@%s:%s/%s?sslmode=disable\n' "$DB_USER" "$LISTEN_ADDR" "$1" "$DB_NAME"; }

# pg_ctl status: 0 running, 3 not running, 4 no accessible data directory.
cluster_status() {
	local dir="$1" rc=0
	[[ -f "$dir/PG_VERSION" ]] || {
		# As a non-owner we may not even see PG_VERSION: tell that apart from "no cluster".
		if [[ -d $dir && ! -x $dir ]]; then return 4; fi
		return 3
	}
	as_owner "${PGBIN}/pg_ctl" status -D "$dir" >/dev/null 2>&1 || rc=$?
	return "$rc"
}

ready() { "${PGBIN}/pg_isready" -q -h "$LISTEN_ADDR" -p "$1" -U "$DB_USER" -d postgres -t 2 >/dev/null 2>&1; }

wait_ready() {
	local port="$1" deadline=$((SECONDS + TIMEOUT))
	until ready "$port"; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# Let the postgres user reach DIR: every ancestor must be searchable by it.
ensure_traversable() {
	local dir="$1" d="" part
	local -a parts
	IFS=/ read -r -a parts <<<"${dir#/}"
	# All ancestors, top-down, excluding DIR itself.
	for part in "${parts[@]:0:${#parts[@]}-1}"; do
		[[ -n $part ]] || continue
		d="$d/$part"
		if ! runuser -u postgres -- test -x "$d" 2>/dev/null; then
			log "letting the postgres user traverse $d (chmod o+x)"
			chmod o+x "$d"
		fi
	done
}

# Write the config file that the server includes: port, addresses, socket, knobs.
write_managed_conf() {
	local dir="$1" port="$2" fast="$3" sockdir="$1" tmp
	# sun_path holds 107 bytes: with a longer path, use TCP only (no unix socket).
	if ((${#dir} + ${#port} + 10 > 107)); then
		log "path too long for a unix socket in $dir: TCP only"
		sockdir=""
	fi
	tmp="$dir/${MANAGED_CONF}.tmp"
	{
		echo "# Managed by deploy/local/pg.sh: rewritten on every start. Do not edit."
		echo "listen_addresses = '${LISTEN_ADDR}'"
		echo "port = ${port}"
		echo "unix_socket_directories = '${sockdir//\'/\'\'}'"
		if ((fast)); then
			# A test cluster serves every package's tests at once, each starting servers
			# with their own pools: 200 ran out ("too many clients already") on CI.
			echo "max_connections = 400"
			echo "fsync = off"
			echo "synchronous_commit = off"
			echo "full_page_writes = off"
		else
			echo "max_connections = 100"
		fi
		if [[ -n $EXTRA_CONF ]]; then printf '%s\n' "$EXTRA_CONF"; fi
	} >"$tmp"
	is_root && chown postgres:postgres "$tmp"
	chmod 600 "$tmp"
	mv -f "$tmp" "$dir/${MANAGED_CONF}"
}

create_cluster() {
	local dir="$1" locale="C"
	if locale -a 2>/dev/null | grep -qixE 'c\.utf-?8'; then locale="C.UTF-8"; fi
	log "creating a new cluster in $dir (UTF8, locale ${locale}, user ${DB_USER}, trust on loopback)"
	local -a args=(-D "$dir" -U "$DB_USER" -E UTF8 --locale="$locale"
		--auth-local=trust --auth-host=trust)
	local out
	if ! out="$(as_owner "${PGBIN}/initdb" "${args[@]}" 2>&1)"; then
		printf '%s\n' "$out" >&2
		die "initdb failed for $dir"
	fi
	# Our settings live in a file of our own, rewritten on each start.
	printf '\n# Added by deploy/local/pg.sh\ninclude_if_exists = %s\n' "'${MANAGED_CONF}'" |
		as_owner tee -a "$dir/postgresql.conf" >/dev/null
}

# Make DIR ready to hold (or to be) a cluster owned by the right user.
prepare_dir() {
	local dir="$1"
	mkdir -p "$(dirname "$dir")"
	if is_root; then
		id postgres >/dev/null 2>&1 || die "no 'postgres' system user: run '$0 install' first"
		if [[ ! -e $dir ]]; then
			install -d -o postgres -g postgres -m 700 "$dir"
		elif [[ -d $dir ]]; then
			if [[ $(stat -c %U "$dir") != postgres ]]; then
				if [[ -f "$dir/PG_VERSION" ]] || [[ -z "$(ls -A "$dir")" ]]; then
					log "giving $dir to the postgres user (server refuses to run as root)"
					chown -R postgres:postgres "$dir"
				else
					die "$dir exists, is not empty and holds no PostgreSQL cluster"
				fi
			fi
			chmod 700 "$dir"
		else
			die "$dir exists and is not a directory"
		fi
		ensure_traversable "$dir"
	else
		if [[ -e $dir && ! -O $dir ]]; then
			die "$dir belongs to $(stat -c %U "$dir"), not to $(id -un): run as that user (or root), or remove it"
		fi
		if [[ -d $dir && -n "$(ls -A "$dir")" && ! -f "$dir/PG_VERSION" ]]; then
			die "$dir exists, is not empty and holds no PostgreSQL cluster"
		fi
	fi
}

log_size() { stat -c %s "$1/server.log" 2>/dev/null || echo 0; }

# The server log from byte offset $2 on.
log_since() { tail -c +"$(($2 + 1))" "$1/server.log" 2>/dev/null || true; }

# The last lines of the server log (from byte offset $2 on, if given).
print_log_tail() {
	local logf="$1/server.log"
	if [[ -r $logf ]]; then
		log "last lines of $logf:"
		log_since "$1" "${2:-0}" | tail -n 25 | sed 's/^/    /' >&2
	fi
}

ensure_database() {
	local port="$1" exists
	exists="$("${PGBIN}/psql" -X -q -v ON_ERROR_STOP=1 -h "$LISTEN_ADDR" -p "$port" -U "$DB_USER" \
		-d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '${DB_NAME}'")" ||
		die "cannot query the server on port $port"
	if [[ $exists != 1 ]]; then
		log "creating database ${DB_NAME}"
		"${PGBIN}/createdb" -h "$LISTEN_ADDR" -p "$port" -U "$DB_USER" "$DB_NAME" ||
			die "createdb ${DB_NAME} failed"
	fi
}

# Serialise pg.sh runs on clusters in the same parent directory (e.g. parallel
# `make` targets): lock the parent directory itself, so no lock file is left behind.
lock_dir() {
	local dir="$1"
	exec 9<"$(dirname "$dir")"
	flock -w "$((TIMEOUT * 2))" 9 || die "timed out waiting for another pg.sh on $dir"
}

# ---------------------------------------------------------------------------------------
# subcommands

cmd_start() {
	local dir="" fast=0 arg
	for arg in "$@"; do
		case "$arg" in
		--fast) fast=1 ;;
		-*) usage ;;
		*) [[ -z $dir ]] || usage; dir="$arg" ;;
		esac
	done
	[[ -n $dir ]] || usage
	dir="$(abspath "$dir")"

	cmd_install
	mkdir -p "$(dirname "$dir")"
	lock_dir "$dir"
	prepare_dir "$dir"

	local rc=0 port
	cluster_status "$dir" || rc=$?
	if ((rc == 0)); then
		port="$(pid_port "$dir")"
		[[ -n $port ]] || die "cluster in $dir is running but postmaster.pid names no port"
		if ! wait_ready "$port"; then
			print_log_tail "$dir"
			die "cluster in $dir is running (port $port) but does not accept connections"
		fi
		log "cluster in $dir already running on port $port: reusing it (options unchanged)"
	else
		((rc == 3)) || die "cannot access the cluster in $dir (pg_ctl status exit $rc)"
		if [[ ! -f "$dir/PG_VERSION" ]]; then
			create_cluster "$dir"
		fi
		local ver
		ver="$(cat "$dir/PG_VERSION")"
		[[ $ver == "$PG_MAJOR" ]] ||
			die "$dir holds a PostgreSQL $ver cluster, not $PG_MAJOR: remove it to start afresh"

		local tried="" attempt mode="" log_from=0
		if ((fast)); then mode=" (fast: fsync off)"; fi
		port="$(saved_port "$dir")"
		if [[ -n $port ]] && port_in_use "$port"; then
			log "saved port $port is taken by something else: choosing another"
			tried="$port"
			port=""
		fi
		for ((attempt = 1; ; attempt++)); do
			((attempt <= 5)) || die "could not find a free port to start on (tried:${tried})"
			[[ -n $port ]] || port="$(find_free_port "$PORT_BASE" "$tried")"
			write_managed_conf "$dir" "$port" "$fast"
			log "starting PostgreSQL ${PG_MAJOR} in $dir on ${LISTEN_ADDR}:$port${mode}"
			log_from="$(log_size "$dir")"
			if as_owner "${PGBIN}/pg_ctl" start -D "$dir" -l "$dir/server.log" -w -t "$TIMEOUT" -s >&2 2>&1; then
				break
			fi
			# Lost a race for the port? Pick another and try again.
			if log_since "$dir" "$log_from" | grep -q 'could not bind\|Address already in use'; then
				log "port $port was taken meanwhile: trying another"
				tried="$tried $port"
				port=""
				continue
			fi
			print_log_tail "$dir" "$log_from"
			die "PostgreSQL did not start in $dir"
		done
		if ! wait_ready "$port"; then
			print_log_tail "$dir"
			die "PostgreSQL in $dir did not accept connections within ${TIMEOUT}s"
		fi
	fi
	ensure_database "$port"
	url_for_port "$port"
}

cmd_url() {
	local dir rc=0 port
	dir="$(dir_arg "$@")"
	cluster_status "$dir" || rc=$?
	if ((rc != 0)); then
		log "no running cluster in $dir (start it with: $0 start $1)"
		exit 1
	fi
	port="$(pid_port "$dir")"
	if [[ -z $port ]] || ! ready "$port"; then
		log "cluster in $dir is running but not accepting connections"
		exit 1
	fi
	url_for_port "$port"
}

cmd_stop() {
	local dir rc=0
	dir="$(dir_arg "$@")"
	if [[ ! -f "$dir/PG_VERSION" && ! -d $dir ]]; then
		log "no cluster in $dir"
		return 0
	fi
	cluster_status "$dir" || rc=$?
	case "$rc" in
	0) ;;
	3)
		log "cluster in $dir is not running"
		return 0
		;;
	*) die "cannot access the cluster in $dir (pg_ctl status exit $rc)" ;;
	esac
	lock_dir "$dir"
	log "stopping the cluster in $dir"
	if ! as_owner "${PGBIN}/pg_ctl" stop -D "$dir" -m fast -w -t "$TIMEOUT" -s >&2 2>&1; then
		print_log_tail "$dir"
		die "could not stop the cluster in $dir"
	fi
}

cmd_restart() {
	local dir rc=0
	dir="$(dir_arg "$@")"
	cluster_status "$dir" || rc=$?
	((rc == 0)) || die "no running cluster in $dir to restart (pg_ctl status exit $rc)"
	lock_dir "$dir"
	log "restarting the cluster in $dir (fast: open sessions are disconnected)"
	# -l again: without it the restarted server would write its log to our stdout.
	if ! as_owner "${PGBIN}/pg_ctl" restart -D "$dir" -m fast -w -t "$TIMEOUT" -l "$dir/server.log" -s >&2 2>&1; then
		print_log_tail "$dir"
		die "could not restart the cluster in $dir"
	fi
}

cmd_status() {
	local dir rc=0 port
	dir="$(dir_arg "$@")"
	cluster_status "$dir" || rc=$?
	case "$rc" in
	0)
		port="$(pid_port "$dir")"
		echo "running: $dir on ${LISTEN_ADDR}:${port} ($(url_for_port "$port"))"
		return 0
		;;
	3)
		if [[ -f "$dir/PG_VERSION" ]]; then echo "not running: $dir"; else echo "not running: no cluster in $dir"; fi
		exit 3
		;;
	*)
		echo "unknown: cannot access $dir as $(id -un)"
		exit 4
		;;
	esac
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd="$1"
	shift
	case "$cmd" in
	install) [[ $# -eq 0 ]] || usage; cmd_install ;;
	start) cmd_start "$@" ;;
	url) cmd_url "$@" ;;
	stop) cmd_stop "$@" ;;
	restart) cmd_restart "$@" ;;
	status) cmd_status "$@" ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
