# shellcheck shell=bash
# Private MariaDB instances for tests, the demo and the bench.
#
# Every instance lives in its own directory (datadir, socket, pid file, error
# log) and is started with --no-defaults and, unless given a TCP port,
# --skip-networking, so it never reads the system's my.cnf and never touches
# a system MariaDB that may be installed or running next to it. Source this
# file, then:
#
#   dd_mariadb_start DIR [OPTION...]   initialise DIR/data if needed, start,
#                            wait; exports DD_MYSQL_SOCKET=DIR/mysqld.sock
#   dd_mariadb_stop DIR      clean shutdown (kill by pid file as a fallback)
#   dd_mariadb_kill9 DIR     SIGKILL, as a crash test's power cut
#   dd_mariadb_restart DIR [OPTION...]   start again on the same datadir
#                            (crash recovery)
#   dd_mariadb_client DIR [mariadb args...]   run the client on that socket
#
# OPTIONs go to mariadbd after the fixed ones, e.g. --ssl-cert=...; with a
# --port=N among them the server also listens on TCP (give --bind-address,
# such as 127.0.0.1), else it has no network at all. A restart takes only
# the options it is given.
#
# Durability stays at the default (innodb_flush_log_at_trx_commit=1) because
# crash tests kill the server and expect committed transactions to survive.

DD_MARIADB_START_TIMEOUT=${DD_MARIADB_START_TIMEOUT:-60}

_dd_mariadb_pid() {
  local pidfile="$1/mysqld.pid"
  [[ -s "$pidfile" ]] && cat "$pidfile"
}

_dd_mariadb_alive() {
  local pid
  pid=$(_dd_mariadb_pid "$1") || return 1
  kill -0 "$pid" 2>/dev/null
}

dd_mariadb_client() {
  local dir="$1"
  shift
  mariadb --no-defaults --socket="$dir/mysqld.sock" -uroot "$@"
}

_dd_mariadb_fail() {
  local dir="$1" msg="$2"
  echo "mariadb: ERROR: $msg" >&2
  if [[ -f "$dir/mysqld.err" ]]; then
    echo "---- last lines of $dir/mysqld.err ----" >&2
    tail -n 40 "$dir/mysqld.err" >&2
    echo "----" >&2
  fi
  return 1
}

# A new datadir is a copy of one installed datadir per user and server
# version (DD_MARIADB_TEMPLATE): mariadb-install-db runs once, under a lock,
# so instances created at the same time (tests in parallel, the shards of
# one test) neither run it concurrently nor each pay for it.
_dd_mariadb_install() {
  local dir="$1" tmpl
  [[ -d "$dir/data/mysql" ]] && return 0
  tmpl=${DD_MARIADB_TEMPLATE:-${TMPDIR:-/tmp}/dedupd-mariadb-template.$(id -u).$(mariadbd --version | cksum | cut -d' ' -f1)}
  mkdir -p "$dir/data"
  (
    flock 9
    if [[ ! -f "$tmpl/installed" ]]; then
      rm -rf "$tmpl" && mkdir -p "$tmpl/data" || exit 1
      if ! mariadb-install-db --no-defaults --datadir="$tmpl/data" --user="$(id -un)" \
          --auth-root-authentication-method=normal --skip-test-db \
          >"$tmpl/install-db.log" 2>&1; then
        cat "$tmpl/install-db.log" >&2
        exit 1
      fi
      touch "$tmpl/installed"
    fi
    cp -a "$tmpl/data/." "$dir/data/"
  ) 9>"$tmpl.lock" || {
    _dd_mariadb_fail "$dir" "mariadb-install-db failed for $tmpl/data (the template of $dir/data)"
    return 1
  }
}

# Starts mariadbd on an installed datadir and waits until it answers.
_dd_mariadb_launch() {
  local dir="$1" waited=0 net=--skip-networking opt
  shift
  for opt in "$@"; do [[ $opt == --port=* ]] && net=; done
  if _dd_mariadb_alive "$dir"; then
    _dd_mariadb_fail "$dir" "a server is already running for $dir (pid $(_dd_mariadb_pid "$dir"))"
    return 1
  fi
  rm -f "$dir/mysqld.pid" "$dir/mysqld.sock"
  # --user=root is required when running as root; harmless otherwise since it
  # names the current user. A background job of a script ignores ctrl-c; the
  # caller's EXIT trap shuts the server down cleanly instead.
  mariadbd --no-defaults \
    --datadir="$dir/data" \
    --socket="$dir/mysqld.sock" \
    --pid-file="$dir/mysqld.pid" \
    --log-error="$dir/mysqld.err" \
    --tmpdir="$dir" \
    --user="$(id -un)" \
    ${net:+"$net"} \
    --skip-name-resolve \
    --skip-log-bin \
    --performance-schema=OFF \
    --innodb-buffer-pool-size=256M \
    --innodb-log-file-size=256M \
    --innodb-flush-log-at-trx-commit=1 \
    --max-connections=500 \
    --character-set-server=utf8mb4 \
    "$@" \
    </dev/null >>"$dir/mysqld.out" 2>&1 &
  local launcher=$!

  while ! dd_mariadb_client "$dir" -e 'SELECT 1' >/dev/null 2>&1; do
    if ! kill -0 "$launcher" 2>/dev/null; then
      wait "$launcher" 2>/dev/null || true
      _dd_mariadb_fail "$dir" "mariadbd exited during startup (datadir $dir/data)"
      return 1
    fi
    if ((waited >= DD_MARIADB_START_TIMEOUT * 10)); then
      _dd_mariadb_fail "$dir" "mariadbd did not answer within ${DD_MARIADB_START_TIMEOUT}s on $dir/mysqld.sock"
      kill -9 "$launcher" 2>/dev/null || true
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  # The pid file is written before the socket accepts connections, but make
  # sure of it: stop and kill9 rely on it.
  if [[ ! -s "$dir/mysqld.pid" ]]; then
    echo "$launcher" >"$dir/mysqld.pid"
  fi
  export DD_MYSQL_SOCKET="$dir/mysqld.sock"
}

dd_mariadb_start() {
  local dir="${1:?usage: dd_mariadb_start DIR}"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  shift
  _dd_mariadb_install "$dir" || return 1
  _dd_mariadb_launch "$dir" "$@"
}

dd_mariadb_restart() {
  local dir="${1:?usage: dd_mariadb_restart DIR}"
  dir=$(cd "$dir" && pwd)
  if [[ ! -d "$dir/data/mysql" ]]; then
    _dd_mariadb_fail "$dir" "no datadir to restart in $dir/data"
    return 1
  fi
  shift
  _dd_mariadb_launch "$dir" "$@"
}

# Waits up to $2 tenths of a second for the pid in DIR's pid file to exit.
_dd_mariadb_wait_gone() {
  local dir="$1" ticks="$2" pid
  pid=$(_dd_mariadb_pid "$dir") || return 0
  while kill -0 "$pid" 2>/dev/null; do
    ((ticks-- > 0)) || return 1
    sleep 0.1
  done
}

dd_mariadb_stop() {
  local dir="${1:?usage: dd_mariadb_stop DIR}" pid
  pid=$(_dd_mariadb_pid "$dir") || return 0
  if kill -0 "$pid" 2>/dev/null; then
    mariadb-admin --no-defaults --socket="$dir/mysqld.sock" -uroot \
      --shutdown-timeout=30 shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
    if ! _dd_mariadb_wait_gone "$dir" 300; then
      echo "mariadb: server $pid for $dir did not stop in 30s; killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
      _dd_mariadb_wait_gone "$dir" 100 || true
    fi
  fi
  rm -f "$dir/mysqld.pid"
}

dd_mariadb_kill9() {
  local dir="${1:?usage: dd_mariadb_kill9 DIR}" pid
  pid=$(_dd_mariadb_pid "$dir") || {
    echo "mariadb: ERROR: no pid file in $dir" >&2
    return 1
  }
  # When the server is our own child, reap it here so bash does not print a
  # "Killed" job notice into the test output.
  { kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
  if ! _dd_mariadb_wait_gone "$dir" 100; then
    echo "mariadb: ERROR: server $pid for $dir survived SIGKILL" >&2
    return 1
  fi
  # mariadbd cannot remove its pid file after SIGKILL; a stale one would make
  # the restart think the server is still running if the pid were reused.
  rm -f "$dir/mysqld.pid"
}
