#!/usr/bin/env bash
# Starts a local PostgreSQL server for the pgstore tests and prints its
# connection URL on stdout (progress and errors go to stderr), so:
#
#   export CITIZEN_PG_URL=$(events/pgstore/testdata/start-postgres.sh)
#   go test ./events/pgstore
#   events/pgstore/testdata/start-postgres.sh stop
#
# Starting is idempotent: a server already running from $PG_WORK is reused
# and its URL printed again; a stopped one is restarted on its data (after
# a crash PostgreSQL recovers from its WAL). The first start runs initdb
# (superuser "citizen", trust authentication, listening on 127.0.0.1 and
# a unix socket in $PG_WORK only) and creates the database "citizen".
# PostgreSQL refuses to run as root: under root the server runs as the
# system user $PG_OS_USER (default: "postgres" if it exists, otherwise
# "citizen-pg", created here).
#
# Arguments: start (the default); stop (fast shutdown); kill (immediate
# shutdown, no checkpoint: what a crash leaves, for crash tests); destroy
# (kill, then remove $PG_WORK).
#
# Environment: PG_WORK (default ${TMPDIR:-/tmp}/citizen-pg; must be
# reachable by the server's user), PG_PORT (default: the port of an
# earlier start from $PG_WORK, else the first free port from 54329),
# PG_BIN (the directory of initdb, pg_ctl, postgres; default: found from
# pg_config or /usr/lib/postgresql/*/bin), PG_OS_USER, PG_READY_TIMEOUT
# seconds (default 60).
set -euo pipefail

WORK=${PG_WORK:-${TMPDIR:-/tmp}/citizen-pg}
TIMEOUT=${PG_READY_TIMEOUT:-60}
DATA=$WORK/data
DB=citizen
USER_NAME=citizen
cmd=${1:-start}

say() { echo "start-postgres: $*" >&2; }
die() { say "$*"; exit 1; }

find_bin() {
	if [ -n "${PG_BIN:-}" ]; then
		echo "$PG_BIN"
		return
	fi
	local d
	if command -v pg_config >/dev/null && d=$(pg_config --bindir 2>/dev/null) && [ -x "$d/initdb" ]; then
		echo "$d"
		return
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return
		fi
	done
	if d=$(command -v initdb 2>/dev/null); then
		dirname "$(readlink -f "$d")"
		return
	fi
	return 1
}
BIN=$(find_bin) || die "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found; install them (apt-get install -y postgresql) or set PG_BIN"
for b in initdb pg_ctl postgres; do
	[ -x "$BIN/$b" ] || die "$BIN/$b not found; set PG_BIN"
done

# as_pg runs a command as the server's user.
if [ "$(id -u)" = 0 ]; then
	OS_USER=${PG_OS_USER:-}
	if [ -z "$OS_USER" ]; then
		if id postgres >/dev/null 2>&1; then OS_USER=postgres; else OS_USER=citizen-pg; fi
	fi
	if ! id "$OS_USER" >/dev/null 2>&1; then
		say "creating system user $OS_USER"
		useradd --system --no-create-home --shell /usr/sbin/nologin "$OS_USER" >&2 ||
			die "could not create system user $OS_USER (PostgreSQL refuses to run as root)"
	fi
	as_pg() {
		if command -v runuser >/dev/null; then
			runuser -u "$OS_USER" -- "$@"
		else
			su -s /bin/sh "$OS_USER" -c "$(printf '%q ' "$@")"
		fi
	}
else
	OS_USER=$(id -un)
	as_pg() { "$@"; }
fi

running() { [ -f "$DATA/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

shutdown() { # shutdown MODE
	if running; then
		as_pg "$BIN/pg_ctl" -D "$DATA" -m "$1" -w -t "$TIMEOUT" stop >&2
		say "stopped the server in $DATA ($1)"
	fi
}

case "$cmd" in
start) ;;
stop)
	shutdown fast
	exit 0
	;;
kill)
	shutdown immediate
	exit 0
	;;
destroy)
	shutdown immediate
	rm -rf "$WORK"
	exit 0
	;;
*) die "unknown argument $cmd (start, stop, kill or destroy)" ;;
esac

mkdir -p "$WORK"
chown "$OS_USER" "$WORK"
chmod 755 "$WORK"
if command -v flock >/dev/null; then # concurrent starts of one $PG_WORK wait for each other
	exec 9>"$WORK/.start.lock"
	flock 9
fi

PORT=${PG_PORT:-}
if [ -z "$PORT" ] && [ -f "$WORK/port" ]; then
	PORT=$(cat "$WORK/port")
fi
url() { echo "postgres://$USER_NAME@127.0.0.1:$PORT/$DB?sslmode=disable"; }

if [ -n "$PORT" ] && running && port_open "$PORT"; then
	say "already running from $DATA on 127.0.0.1:$PORT"
	url
	exit 0
fi
# free_port prints the first port from $1 that nothing listens on.
free_port() {
	local p
	for ((p = $1; p < 54529; p++)); do
		if ! port_open "$p"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}
chosen= # set when this script picked the port (another process may take it before the server binds it)
if [ -z "$PORT" ]; then
	PORT=$(free_port 54329) || die "no free port in 54329-54528; set PG_PORT"
	chosen=1
elif port_open "$PORT" && ! running; then
	die "127.0.0.1:$PORT is taken by another process; set PG_PORT"
fi

if [ ! -f "$DATA/PG_VERSION" ]; then
	say "initdb in $DATA (as $OS_USER)"
	rm -rf "$DATA"
	as_pg "$BIN/initdb" -D "$DATA" -U "$USER_NAME" --auth=trust -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1 ||
		{ cat "$WORK/initdb.log" >&2; die "initdb failed"; }
	# fsync and synchronous_commit keep their durable defaults: the crash
	# tests rely on them.
	cat >>"$DATA/postgresql.conf" <<CONF
# citizen test server (start-postgres.sh)
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
max_connections = 200
log_min_messages = warning
CONF
fi
# A port this script picked can be taken between the probe and the
# server's bind (another test run on the machine): the server then fails
# with "Address already in use", and the next free port is tried.
for attempt in 1 2 3 4 5; do
	echo "$PORT" >"$WORK/port"
	running && break
	seen=0
	[ -f "$WORK/postgres.log" ] && seen=$(wc -l <"$WORK/postgres.log")
	if as_pg "$BIN/pg_ctl" -D "$DATA" -l "$WORK/postgres.log" -w -t "$TIMEOUT" -o "-p $PORT" start >&2 9>&-; then
		break
	fi
	if [ -n "$chosen" ] && [ "$attempt" -lt 5 ] && tail -n +$((seen + 1)) "$WORK/postgres.log" | grep -q "Address already in use"; then
		say "127.0.0.1:$PORT was taken before the server bound it; trying the next free port"
		PORT=$(free_port $((PORT + 1))) || die "no free port in 54329-54528; set PG_PORT"
		continue
	fi
	tail -n 40 "$WORK/postgres.log" >&2
	die "the server did not start"
done
port_open "$PORT" || { tail -n 40 "$WORK/postgres.log" >&2; die "the server is not listening on 127.0.0.1:$PORT"; }

PSQL=$BIN/psql
[ -x "$PSQL" ] || PSQL=$(command -v psql) || die "psql not found"
have=$("$PSQL" -X -q -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'")
if [ "$have" != 1 ]; then
	"$PSQL" -X -q -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -c "CREATE DATABASE $DB" >&2
fi
say "ready: $("$BIN/postgres" --version) on 127.0.0.1:$PORT, data $DATA, log $WORK/postgres.log"
url
