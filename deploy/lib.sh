# deploy/lib.sh: what the scripts of deploy/ share, sourced by each (never run on its own):
# PROG, the name every message starts with, log (a line on stderr) and die (an error line
# on stderr, exit 1).
# shellcheck shell=bash

PROG="$(basename "$0")"
readonly PROG

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$PROG" "$*" >&2
	exit 1
}
