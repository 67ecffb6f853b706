# shellcheck shell=bash
# Test bed for the numbered integration scenarios (tests/integration/*/NN-*.sh).
#
# Each scenario gets a fresh database on the shared private MariaDB (started
# by scripts/test, socket in DD_TEST_MYSQL_SOCKET), its own mock Kafka
# cluster, a temp dir, and an EXIT trap that stops every process it started.
# Tests never skip: without a database they fail, because a skipped
# integration test is a test nobody notices is not running.
#
# Environment from meson: DEDUPD, DDTK, DD_LEDGER_SO, DD_NOTIFY_SO,
# DD_NOTIFY_NORECONCILE_SO, DD_TEST_HANDLER_DIR, DD_TEST_SRC_DIR; from
# scripts/test: DD_TEST_MYSQL_SOCKET, TB_TIMEOUT_MULT.
#
#   source "$(dirname "$0")/../lib.sh"
#   tb_init dup_basic
#   tb_mock payments:4
#   tb_config
#   tb_migrate
#   printf '0\t-\t{"merchant_id":"m1","order_no":"o1","amount":1.00}\n' | tb_produce
#   tb_run
#   tb_eq "applied rows" 1 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
#   tb_assert_committed_at_end
#   tb_done
#
# Config knobs read by tb_config (set them before calling it):
# A configuration with routes: tb_config_routes (below).
#   TB_GROUP (tg)  TB_TOPIC (first mock topic)  TB_TOPICS (space separated,
#   default TB_TOPIC)  TB_KEY (pay:${merchant_id}:${order_no})  TB_TTL (7d)
#   TB_HANDLER ($DD_LEDGER_SO)  TB_HANDLER_CONFIG (libconfig body of
#   handler.config)  TB_HANDLER_SQL (libconfig body of handler.sql: the SQL
#   handler instead of TB_HANDLER)  TB_WORKERS (2)  TB_BATCH_MAX (500)  TB_BATCH_WAIT_MS (20)
#   TB_KAFKA_PROPS (extra librdkafka "name=value" words)  TB_DEDUP_EXTRA /
#   TB_KAFKA_EXTRA / TB_MYSQL_EXTRA / TB_BATCH_EXTRA / TB_HANDLER_EXTRA
#   (lines inside those groups)  TB_DLQ_TOPIC  TB_MYSQL_HOST / TB_MYSQL_PORT
#   (TCP to host:port instead of the socket DD_TEST_MYSQL_SOCKET).
# Database shards (mysql.shards): tb_shards N (below) before tb_config.
# TB_HANDLER_GRANTS (read by tb_migrate): the handler's grants file, for a
# handler not known to the test bed (tb_grants_file); several, space
# separated, for a configuration with routes.
# Extra arguments after FILE are appended as top-level lines.
#
# Database users: dedupd never runs as root here. tb_init creates two users
# per test, TB_MIG_USER and TB_RT_USER, which get exactly the privileges of
# sql/grants.sql (docs/OPERATIONS.md, "Database users and privileges") on
# each database the test migrates: tb_migrate runs `dedupd migrate` as
# TB_MIG_USER, then grants the runtime privileges of the dedup table and of
# the handler's tables, and the config tb_config writes connects as
# TB_RT_USER (run, replay, purge, stats, check). A privilege missing from
# sql/grants.sql fails the tests. tb_sql and the tests' side channels
# (killing connections, holding locks) stay root.

set -euo pipefail

TB_PASS=0
TB_FAIL=0
TB_PIDS=()
TB_FAILED_MSGS=()
TB_NAME=
TB_DIR=
TB_DB=
TB_BROKERS=
TB_MOCK_PID=
TB_CONF=
TB_RUN_START=0
TB_TIMEOUT_MULT=${TB_TIMEOUT_MULT:-1}
TB_MIG_USER=
TB_RT_USER=
TB_SHARD_SOCKETS=()

tb_log() { printf '# %s\n' "$*"; }

tb_die() {
  printf 'not ok - %s\n' "$*"
  TB_FAILED_MSGS+=("$*")
  TB_FAIL=$((TB_FAIL + 1))
  exit 1
}

# Seconds scaled for slow builds (ASan/UBSan runs export TB_TIMEOUT_MULT=3).
tb_secs() { echo $(($1 * TB_TIMEOUT_MULT)); }

_tb_require_env() {
  local v
  for v in DEDUPD DDTK DD_LEDGER_SO; do
    [[ -n "${!v:-}" ]] || tb_die "environment variable $v is not set (run through meson test)"
  done
  if [[ -z "${DD_TEST_MYSQL_SOCKET:-}" ]]; then
    tb_die "DD_TEST_MYSQL_SOCKET is not set: integration tests need the private MariaDB started by scripts/test"
  fi
  [[ -S "$DD_TEST_MYSQL_SOCKET" ]] || tb_die "DD_TEST_MYSQL_SOCKET=$DD_TEST_MYSQL_SOCKET is not a socket"
}

# Stops one process: SIGTERM, then SIGKILL after a grace period.
_tb_reap() {
  local pid="$1" ticks=50
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && ((ticks-- > 0)); do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

_tb_cleanup() {
  local rc=$? pid f
  set +e
  for pid in "${TB_PIDS[@]}"; do _tb_reap "$pid"; done
  if [[ -z "$TB_DIR" ]]; then
    :
  elif ((rc != 0 || TB_FAIL > 0)); then
    # meson --print-errorlogs shows this output (only its last 100 lines for
    # a long log): the logs explain the failure, the recap says what failed.
    for f in "$TB_DIR"/*.log; do
      [[ -s "$f" ]] || continue
      echo "# ---- last 20 lines of $f ----"
      tail -n 20 "$f" | sed 's/^/#   /'
    done
    echo "# test dir kept: $TB_DIR"
    for f in "${TB_FAILED_MSGS[@]}"; do echo "# FAILED: $f"; done
    echo "# $TB_NAME: exit $rc, $TB_PASS passed, $TB_FAIL failed"
  elif [[ -n "$TB_DIR" && -z "${TB_KEEP:-}" ]]; then
    rm -rf "$TB_DIR"
  fi
  exit "$rc"
}

# Debian's python3 first on PATH (a link in TB_DIR/bin) when another one is
# in front of it: scripts/install-deps installs the test bed's packages
# (python3-avro) for Debian's, and the test bed calls python3 hundreds of
# times a run, where a version manager's shim (pyenv's runs a shell script
# for each call) costs about half a second of CPU each time.
_tb_debian_python() {
  [[ -x /usr/bin/python3 && "$(type -P python3)" != /usr/bin/python3 ]] || return 0
  mkdir "$TB_DIR/bin"
  ln -s /usr/bin/python3 "$TB_DIR/bin/python3"
  PATH="$TB_DIR/bin:$PATH"
}

tb_init() {
  TB_NAME="${1:?usage: tb_init NAME}"
  trap _tb_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  _tb_require_env
  TB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dd-it-${TB_NAME//[^A-Za-z0-9_-]/_}.XXXXXX")
  TB_DB="t_${TB_NAME//[^A-Za-z0-9_]/_}"
  TB_DB="${TB_DB:0:64}"
  TB_CONF="$TB_DIR/dedupd.conf"
  _tb_debian_python
  export DD_TEST_PW=  # tests run without a password; the variable must exist
  _tb_mariadb -e "DROP DATABASE IF EXISTS \`$TB_DB\`; CREATE DATABASE \`$TB_DB\`" ||
    tb_die "cannot create database $TB_DB on $DD_TEST_MYSQL_SOCKET"
  TB_MIG_USER="${TB_DB}_mig"
  TB_RT_USER="${TB_DB}_rt"
  tb_users
  tb_log "test $TB_NAME: dir $TB_DIR, database $TB_DB, users $TB_MIG_USER and $TB_RT_USER"
}

# tb_users: (re)creates the test's two database users, without privileges,
# on the server of DD_TEST_MYSQL_SOCKET (tb_private_db calls it for its own).
tb_users() {
  _tb_mariadb -e "DROP USER IF EXISTS '$TB_MIG_USER'@'%', '$TB_RT_USER'@'%';
                  CREATE USER '$TB_MIG_USER'@'%'; CREATE USER '$TB_RT_USER'@'%'" ||
    tb_die "cannot create the users $TB_MIG_USER and $TB_RT_USER"
}

# _tb_grants SECTION [TABLE] [PREFIX]: the GRANT statements of
# sql/grants.sql's [SECTION] for the test's users on TB_DB, the dedup table
# TABLE (dedup_record) and the ledger's tables with PREFIX.
_tb_grants() {
  local table="${2:-dedup_record}" prefix="${3:-}"
  awk -v s="[$1]" '/^-- \[/ { on = index($0, s) == 4 } on && /^GRANT /' \
    "$DD_TEST_SRC_DIR/sql/grants.sql" |
    sed -e "s/\`payments\`/\`$TB_DB\`/g" -e "s/\`dedup_record\`/\`$table\`/g" \
      -e "s/\`\(ledger_entry\|merchant_balance\|payment_order\)\`/\`$prefix\1\`/g" \
      -e "s/'dedupd_migrate'@'%'/'$TB_MIG_USER'@'%'/g" -e "s/'dedupd'@'%'/'$TB_RT_USER'@'%'/g"
}

# The test handlers' tables, granted like a handler's (the ledger's are in
# sql/grants.sql).
_tb_grants_th() {
  local t
  for t in "$@"; do
    echo "GRANT SELECT, INSERT, UPDATE ON \`$TB_DB\`.\`$t\` TO '$TB_RT_USER'@'%';"
  done
}

# tb_grants_file FILE: the GRANT statements of a handler's grants file (as
# examples/*/grants.sql: ON `DATABASE`.`TABLE` TO 'dedupd'@'%') for the
# test's database and runtime user.
tb_grants_file() {
  grep '^GRANT ' "$1" |
    sed -E -e "s/ ON \`[^\`]+\`\./ ON \`$TB_DB\`./" -e "s/'dedupd'@'%'/'$TB_RT_USER'@'%'/g"
}

# _tb_conf_str NAME: the value of the first `NAME = "..."` in TB_CONF.
_tb_conf_str() {
  grep -o "\b$1 = \"[^\"]*\"" "$TB_CONF" | head -n 1 | cut -d'"' -f2
}

# _tb_conf_strs NAME: the values of every `NAME = "..."` in TB_CONF (each
# route's), one a line.
_tb_conf_strs() {
  grep -o "\b$1 = \"[^\"]*\"" "$TB_CONF" | cut -d'"' -f2
}

# _tb_grant_runtime: the runtime user's privileges on TB_DB for TB_CONF's
# dedup tables (every route's; or DEDUPD_DEDUP_TABLE) and handlers:
# TB_HANDLER_GRANTS names the handlers' grants files (tb_grants_file), else
# they are known by the handler's name.
_tb_grant_runtime() {
  local table tables handler sql="" f
  tables=${DEDUPD_DEDUP_TABLE:-$(_tb_conf_strs table)}
  for table in ${tables:-dedup_record}; do sql+=$(_tb_grants runtime "$table")$'\n'; done
  if [[ -n "${TB_HANDLER_GRANTS:-}" ]]; then
    for f in $TB_HANDLER_GRANTS; do sql+=$'\n'$(tb_grants_file "$f"); done
  else
    for handler in $(_tb_conf_strs path); do
      case "$(basename "$handler" .so)" in
      ledger) sql+=$'\n'$(_tb_grants ledger "$table" "$(_tb_conf_str table_prefix)") ;;
      th_scripted*) sql+=$'\n'$(_tb_grants_th th_effect) ;;
      th_abi_v1) sql+=$'\n'$(_tb_grants_th th_v1_effect) ;;
      th_abi_v2) sql+=$'\n'$(_tb_grants_th th_v2_effect) ;;
      th_abi_v5) sql+=$'\n'$(_tb_grants_th th_v5_effect) ;;
      th_v3) sql+=$'\n'$(_tb_grants_th th_v3_effect th_v3_conn) ;;
      notify | notify_noreconcile) sql+=$'\n'$(_tb_grants notify "$table") ;;
      coupon) sql+=$'\n'$(tb_grants_file "$DD_TEST_SRC_DIR/examples/coupon/grants.sql") ;;
      esac
    done
  fi
  grep -q 'outbox = { enabled = true' "$TB_CONF" && sql+=$'\n'$(_tb_grants outbox)
  [[ $sql == *GRANT* ]] || tb_die "no GRANT statements in sql/grants.sql"
  _tb_mariadb_each -e "$sql" || tb_die "cannot grant the runtime privileges on $TB_DB: $sql"
}

_tb_mariadb() {
  mariadb --no-defaults --socket="$DD_TEST_MYSQL_SOCKET" -uroot "$@"
}

# _tb_mariadb_each ARGS: _tb_mariadb on every shard's server (tb_shards), or
# on the one server.
_tb_mariadb_each() {
  local s
  ((${#TB_SHARD_SOCKETS[@]} > 0)) || { _tb_mariadb "$@"; return; }
  for s in "${TB_SHARD_SOCKETS[@]}"; do
    DD_TEST_MYSQL_SOCKET="$s" _tb_mariadb "$@" || return 1
  done
}

# tb_sql "SQL" -> result rows, tab separated, no header, against TB_DB.
tb_sql() {
  _tb_mariadb -N -B "$TB_DB" -e "$1"
}

# tb_bg NAME cmd...: runs cmd in the background, output to $TB_DIR/NAME.log;
# the cleanup trap stops it. The pid is in TB_LAST_PID.
tb_bg() {
  local name="$1"
  shift
  "$@" >>"$TB_DIR/$name.log" 2>&1 &
  TB_LAST_PID=$!
  TB_PIDS+=("$TB_LAST_PID")
}

# tb_wait_until SECONDS "what" cmd...: polls cmd until it succeeds.
tb_wait_until() {
  local secs ticks what="$2"
  secs=$(tb_secs "$1")
  ticks=$((secs * 5))
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((ticks-- > 0)) || { echo "# timed out after ${secs}s waiting for: $what"; return 1; }
    sleep 0.2
  done
}

# tb_mock TOPIC:PARTS [...]: starts a mock cluster with those topics.
# TB_MOCK_BROKERS sets the broker count. Sets TB_BROKERS and, if unset, TB_TOPIC.
tb_mock() {
  (($# > 0)) || tb_die "usage: tb_mock TOPIC:PARTITIONS [...]"
  local args=() t
  for t in "$@"; do args+=(--topic "$t"); done
  [[ -n "${TB_MOCK_BROKERS:-}" ]] && args+=(--brokers "$TB_MOCK_BROKERS")
  rm -f "$TB_DIR/mock.bootstrap"
  [[ -p "$TB_DIR/mock.ctl" ]] || mkfifo "$TB_DIR/mock.ctl"
  tb_bg mock "$DEDUPD" mock-kafka "${args[@]}" \
    --bootstrap-file "$TB_DIR/mock.bootstrap" --control "$TB_DIR/mock.ctl"
  TB_MOCK_PID=$TB_LAST_PID
  if ! tb_wait_until 20 "mock cluster bootstrap file" test -s "$TB_DIR/mock.bootstrap"; then
    kill -0 "$TB_MOCK_PID" 2>/dev/null || tb_die "dedupd mock-kafka exited (see mock.log)"
    tb_die "dedupd mock-kafka wrote no bootstrap file"
  fi
  TB_BROKERS=$(head -n 1 "$TB_DIR/mock.bootstrap")
  TB_TOPIC="${TB_TOPIC:-${1%%:*}}"
  tb_log "mock cluster at $TB_BROKERS (pid $TB_MOCK_PID)"
}

# tb_mock_ctl "command": one line to the mock's control FIFO; waits for the
# mock's "ok <command>" answer on its stdout and fails the test on "error".
tb_mock_ctl() {
  local before answer ticks=50
  [[ -p "$TB_DIR/mock.ctl" ]] || tb_die "no mock cluster control FIFO"
  before=$(wc -l <"$TB_DIR/mock.log")
  timeout --foreground 10 bash -c 'printf "%s\n" "$1" >"$2"' _ "$1" "$TB_DIR/mock.ctl" ||
    tb_die "mock cluster did not read control command: $1"
  while ((ticks-- > 0)); do
    answer=$(tail -n +"$((before + 1))" "$TB_DIR/mock.log" | grep -m 1 -E '^(ok|error) ' || true)
    [[ -n "$answer" ]] && break
    sleep 0.1
  done
  case "$answer" in
  ok*) tb_log "mock: $answer" ;;
  error*) tb_die "mock cluster refused '$1': $answer" ;;
  *) tb_die "mock cluster did not answer control command: $1" ;;
  esac
}

# A libconfig string literal.
_tb_str() {
  local s="${1//\\/\\\\}"
  printf '"%s"' "${s//\"/\\\"}"
}

_tb_str_list() {
  local out="" w
  for w in "$@"; do out+="${out:+, }$(_tb_str "$w")"; done
  printf '[%s]' "$out"
}

# tb_config [FILE] [extra top-level lines...]: writes a config from TB_*.
tb_config() {
  local file="${1:-$TB_CONF}" topics props handler
  local default_key='pay:${merchant_id}:${order_no}'
  (($# > 0)) && shift
  [[ -n "$TB_BROKERS" ]] || tb_die "tb_config needs a cluster: call tb_mock first"
  # shellcheck disable=SC2206 # word splitting of the lists is intended
  topics=(${TB_TOPICS:-$TB_TOPIC})
  # shellcheck disable=SC2206
  props=(session.timeout.ms=6000 max.poll.interval.ms=10000 heartbeat.interval.ms=1000
    ${TB_KAFKA_PROPS:-})
  handler="${TB_HANDLER:-$DD_LEDGER_SO}"
  {
    echo "# written by tests/integration/lib.sh for $TB_NAME"
    echo "kafka = { brokers = $(_tb_str "$TB_BROKERS"); group = $(_tb_str "${TB_GROUP:-tg}");"
    echo "          topics = $(_tb_str_list "${topics[@]}");"
    echo "          properties = $(_tb_str_list "${props[@]}");"
    [[ -n "${TB_KAFKA_EXTRA:-}" ]] && echo "          $TB_KAFKA_EXTRA"
    echo "};"
    if [[ -n "${TB_MYSQL_HOST:-}" ]]; then
      echo "mysql = { host = $(_tb_str "$TB_MYSQL_HOST"); port = ${TB_MYSQL_PORT:-3306};"
    else
      echo "mysql = { socket = $(_tb_str "$DD_TEST_MYSQL_SOCKET");"
    fi
    echo "          user = $(_tb_str "$TB_RT_USER"); database = $(_tb_str "$TB_DB");"
    [[ -n "${TB_MYSQL_EXTRA:-}" ]] && echo "          $TB_MYSQL_EXTRA"
    ((${#TB_SHARD_SOCKETS[@]} > 0)) && _tb_shards_setting
    echo "};"
    echo "dedup = { key = $(_tb_str "${TB_KEY:-$default_key}"); ttl = $(_tb_str "${TB_TTL:-7d}");"
    [[ -n "${TB_DEDUP_EXTRA:-}" ]] && echo "          $TB_DEDUP_EXTRA"
    echo "};"
    if [[ -n "${TB_HANDLER_SQL:-}" ]]; then
      echo "handler = { ${TB_HANDLER_EXTRA:-} sql = { $TB_HANDLER_SQL }; };"
    elif [[ -n "${TB_HANDLER_CONFIG:-}" ]]; then
      echo "handler = { path = $(_tb_str "$handler"); ${TB_HANDLER_EXTRA:-} config = { $TB_HANDLER_CONFIG }; };"
    else
      echo "handler = { path = $(_tb_str "$handler"); ${TB_HANDLER_EXTRA:-} };"
    fi
    [[ -n "${TB_DLQ_TOPIC:-}" ]] && echo "dlq = { topic = $(_tb_str "$TB_DLQ_TOPIC"); };"
    echo "batch = { max_messages = ${TB_BATCH_MAX:-500}; max_wait_ms = ${TB_BATCH_WAIT_MS:-20}; ${TB_BATCH_EXTRA:-} };"
    echo "workers = ${TB_WORKERS:-2};"
    local line
    for line in "$@"; do echo "$line"; done
  } >"$file"
  TB_CONF="$file"
}

# tb_config_routes ROUTES [extra top-level lines...]: writes TB_CONF with
# `routes = ( ROUTES );` (the text of the route groups) where tb_config
# writes kafka.topics, dedup, handler and dlq; the rest as tb_config
# (TB_GROUP, TB_KAFKA_PROPS, TB_KAFKA_EXTRA, TB_WORKERS, TB_BATCH_MAX,
# TB_BATCH_WAIT_MS, the shards of tb_shards).
# TB_COUPON_SO is the coupon example handler, for routes to name.
tb_config_routes() {
  local routes="$1" props line
  shift
  [[ -n "$TB_BROKERS" ]] || tb_die "tb_config_routes needs a cluster: call tb_mock first"
  # shellcheck disable=SC2206
  props=(session.timeout.ms=6000 max.poll.interval.ms=10000 heartbeat.interval.ms=1000
    ${TB_KAFKA_PROPS:-})
  {
    echo "# written by tests/integration/lib.sh for $TB_NAME"
    echo "kafka = { brokers = $(_tb_str "$TB_BROKERS"); group = $(_tb_str "${TB_GROUP:-tg}");"
    echo "          properties = $(_tb_str_list "${props[@]}");"
    [[ -n "${TB_KAFKA_EXTRA:-}" ]] && echo "          $TB_KAFKA_EXTRA"
    echo "};"
    echo "mysql = { socket = $(_tb_str "$DD_TEST_MYSQL_SOCKET");"
    echo "          user = $(_tb_str "$TB_RT_USER"); database = $(_tb_str "$TB_DB");"
    ((${#TB_SHARD_SOCKETS[@]} > 0)) && _tb_shards_setting
    echo "};"
    echo "routes = ("
    echo "$routes"
    echo ");"
    echo "batch = { max_messages = ${TB_BATCH_MAX:-500}; max_wait_ms = ${TB_BATCH_WAIT_MS:-20}; };"
    echo "workers = ${TB_WORKERS:-2};"
    for line in "$@"; do echo "$line"; done
  } >"$TB_CONF"
}
TB_COUPON_SO=${DD_LEDGER_SO:+$(dirname "$DD_LEDGER_SO")/coupon.so}

# tb_run [args]: dedupd run --exit-at-end on TB_CONF; returns its exit code.
tb_run() {
  local rc=0 secs log="$TB_DIR/run.log" start
  secs=$(tb_secs "${TB_RUN_TIMEOUT:-120}")
  echo "---- dedupd run $* ($(date +%T))" >>"$log"
  start=$(wc -l <"$log")
  TB_RUN_START=$start
  # --foreground keeps timeout in the test's process group, so meson's kill of
  # a timed-out test reaches dedupd too.
  timeout --foreground -k 10 "$secs" "$DEDUPD" run -c "$TB_CONF" --exit-at-end "$@" >>"$log" 2>&1 || rc=$?
  if ((rc == 124)); then
    echo "# dedupd run timed out after ${secs}s; last 50 lines of $log:"
    tail -n +"$((start + 1))" "$log" | tail -n 50 | sed 's/^/#   /'
  elif ((rc != 0)); then
    echo "# dedupd run exited $rc; last 50 lines of $log:"
    tail -n +"$((start + 1))" "$log" | tail -n 50 | sed 's/^/#   /'
  fi
  return "$rc"
}

# tb_summary FIELD: a field of the "summary messages=N applied=N ..." line
# that the last tb_run printed (empty when that run printed none).
tb_summary() {
  tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" |
    awk -v f="$1" '/^summary / { v = "" ; for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) v = kv[2] } } END { print v }'
}

# tb_summary_route ROUTE FIELD: a field of the "summary_route route=ROUTE
# ..." line the last tb_run printed (a configuration with routes).
tb_summary_route() {
  tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" |
    awk -v r="route=$1" -v f="$2" '/^summary_route / && $2 == r { v = "" ; for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) v = kv[2] } } END { print v }'
}

# tb_summary_sum FIELD LOG...: FIELD of the summary lines in the LOG files
# (of background runs), added up.
tb_summary_sum() {
  local f="$1"
  shift
  awk -v f="$f" '/^summary / { for (i = 2; i <= NF; i++) { split($i, kv, "=");
    if (kv[1] == f) s += kv[2] } } END { print s + 0 }' "$@"
}

# tb_start NAME [args]: dedupd run (no --exit-at-end) in the background; pid in
# TB_LAST_PID, output in $TB_DIR/NAME.log. Stop it with tb_stop or tb_kill9.
tb_start() {
  local name="$1"
  shift
  tb_bg "$name" "$DEDUPD" run -c "$TB_CONF" "$@"
}

# tb_start_groups NAME...: dedupd run on $TB_DIR/NAME.conf for each NAME in
# the background (output in $TB_DIR/NAME.log, pid in TB_PID[NAME]), then
# waits until each has been assigned partitions of TB_TOPIC.
declare -gA TB_PID
tb_start_groups() {
  local name
  for name in "$@"; do
    tb_bg "$name" "$DEDUPD" run -c "$TB_DIR/$name.conf"
    TB_PID[$name]=$TB_LAST_PID
  done
  for name in "$@"; do
    tb_wait_until 30 "$name assigned" grep -q "Assigned $TB_TOPIC " "$TB_DIR/$name.log" ||
      tb_die "$name got no partition"
  done
}

# tb_stop PID: SIGTERM and wait; returns the process's exit code.
tb_stop() {
  local pid="$1" rc=0 secs
  secs=$(tb_secs 60)
  kill -TERM "$pid" 2>/dev/null || true
  timeout --foreground "$secs" tail --pid="$pid" -f /dev/null || {
    echo "# pid $pid ignored SIGTERM for ${secs}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  }
  wait "$pid" 2>/dev/null || rc=$?
  return "$rc"
}

tb_kill9() {
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# tb_migrate: `dedupd migrate` on TB_CONF as TB_MIG_USER, after granting it
# its privileges on TB_DB; then the runtime user's (_tb_grant_runtime).
tb_migrate() {
  local rc=0
  _tb_mariadb_each -e "$(_tb_grants migrate)" ||
    tb_die "cannot grant the migration privileges on $TB_DB"
  DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_CONF" >>"$TB_DIR/migrate.log" 2>&1 ||
    rc=$?
  ((rc == 0)) || { echo "# dedupd migrate exited $rc:"; sed 's/^/#   /' "$TB_DIR/migrate.log"; }
  ((rc == 0)) && _tb_grant_runtime
  return "$rc"
}

# Kafka helpers through ddtk; TOPIC defaults to TB_TOPIC.
tb_produce() { "$DDTK" produce -b "$TB_BROKERS" -t "${1:-$TB_TOPIC}"; }
tb_consume() { "$DDTK" consume -b "$TB_BROKERS" -t "${1:-$TB_TOPIC}"; }
tb_dlq() { "$DDTK" consume -b "$TB_BROKERS" -t "${1:-${TB_DLQ_TOPIC:-$TB_TOPIC.dlq}}"; }
tb_committed() { "$DDTK" committed -b "$TB_BROKERS" -g "${1:-${TB_GROUP:-tg}}" -t "${2:-$TB_TOPIC}"; }
tb_watermarks() { "$DDTK" watermarks -b "$TB_BROKERS" -t "${1:-$TB_TOPIC}"; }

# tb_dlq_reasons [TOPIC]: "reason count" lines, sorted, from the DLQ headers.
tb_dlq_reasons() {
  tb_dlq "$@" | python3 -c '
import collections, json, sys
c = collections.Counter()
for line in sys.stdin:
    if line.strip():
        c[json.loads(line).get("headers", {}).get("dedupd.reason", "(none)")] += 1
for reason in sorted(c):
    print(reason, c[reason])'
}

# tb_dlq_distinct REASON [TOPIC]: how many different source messages (by
# dedupd.topic/partition/offset headers) were dead-lettered with that reason.
# Dead letters are at least once: a crash between ack and commit repeats one.
tb_dlq_distinct() {
  local reason="$1"
  shift
  tb_dlq "$@" | python3 -c '
import json, sys
seen = set()
for line in sys.stdin:
    if line.strip():
        h = json.loads(line).get("headers", {})
        if h.get("dedupd.reason") == sys.argv[1]:
            seen.add((h.get("dedupd.topic"), h.get("dedupd.partition"), h.get("dedupd.offset")))
print(len(seen))' "$reason"
}

# tb_dlq_count REASON [TOPIC]: how many dead letters carry that reason.
tb_dlq_count() {
  local reason="$1"
  shift
  tb_dlq_reasons "$@" | awk -v r="$reason" '$1 == r { n = $2 } END { print n + 0 }'
}

# --- assertions ----------------------------------------------------------

tb_ok() {
  TB_PASS=$((TB_PASS + 1))
  printf 'ok - %s\n' "$1"
}

tb_not_ok() {
  TB_FAIL=$((TB_FAIL + 1))
  TB_FAILED_MSGS+=("$1")
  printf 'not ok - %s\n' "$1"
}

# tb_eq WHAT EXPECTED ACTUAL
tb_eq() {
  if [[ "$2" == "$3" ]]; then
    tb_ok "$1"
  else
    tb_not_ok "$1: expected '$2', got '$3'"
  fi
}

# tb_check WHAT cmd...: passes when cmd succeeds.
tb_check() {
  local what="$1"
  shift
  if "$@"; then tb_ok "$what"; else tb_not_ok "$what (command failed: $*)"; fi
}

# tb_assert_committed_at_end [GROUP] [TOPIC]: every partition's committed
# offset equals its high watermark (an empty partition may have none).
tb_assert_committed_at_end() {
  local group="${1:-${TB_GROUP:-tg}}" topic="${2:-$TB_TOPIC}" wm committed
  wm=$(tb_watermarks "$topic") || { tb_not_ok "watermarks of $topic"; return 0; }
  committed=$(tb_committed "$group" "$topic") || { tb_not_ok "committed offsets of $group"; return 0; }
  local bad
  bad=$(awk '
    NR == FNR { c[$1] = $2; next }
    { high = $3; got = ($1 in c) ? c[$1] : "none"
      if (got != high && !(high == 0 && got == -1)) printf "p%s committed %s high %s; ", $1, got, high }
  ' <(printf '%s\n' "$committed") <(printf '%s\n' "$wm"))
  if [[ -z "$wm" ]]; then
    tb_not_ok "group $group committed at end of $topic: no partitions"
  elif [[ -n "$bad" ]]; then
    tb_not_ok "group $group committed at end of $topic: $bad"
  else
    tb_ok "group $group committed at end of $topic ($(wc -l <<<"$wm") partitions)"
  fi
}

# tb_gen [gen-payments.py args]: writes $TB_DIR/stream.txt (for tb_produce)
# and $TB_DIR/expect.json (what a correct run leaves behind).
tb_gen() {
  python3 "$DD_TEST_SRC_DIR/scripts/gen-payments.py" "$@" --expect "$TB_DIR/expect.json" \
    >"$TB_DIR/stream.txt" || tb_die "gen-payments.py $* failed"
}

# tb_expect_get PATH [EXPECT_JSON]: a value of the expect file by dotted path
# (dead_letters.conflict, dedup_rows.applied, merchants.m001.balance_cents).
tb_expect_get() {
  python3 -c '
import json, sys
v = json.load(open(sys.argv[2]))
for part in sys.argv[1].split("."):
    v = v[part]
print(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)' \
    "$1" "${2:-$TB_DIR/expect.json}"
}

# tb_expect_ledger EXPECT_JSON [TABLE_PREFIX]: the ledger handler's tables hold
# every payment exactly once: per-merchant balances and entry counts, total
# entries, and no business key booked twice.
tb_expect_ledger() {
  local exp="${1:-$TB_DIR/expect.json}" pre="${2:-}" want
  want=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
for m in sorted(e["merchants"]):
    print("%s\t%d\t%d" % (m, e["merchants"][m]["balance_cents"], e["merchants"][m]["entries"]))' "$exp")
  tb_eq "merchant balances and entries" "$want" \
    "$(tb_sql "SELECT merchant_id, balance_cents, entries FROM \`${pre}merchant_balance\` ORDER BY merchant_id")"
  tb_eq "ledger entries" "$(tb_expect_get unique_keys_applied "$exp")" \
    "$(tb_sql "SELECT COUNT(*) FROM \`${pre}ledger_entry\`")"
  tb_eq "ledger total cents" "$(tb_expect_get balance_cents_total "$exp")" \
    "$(tb_sql "SELECT COALESCE(SUM(amount_cents), 0) FROM \`${pre}ledger_entry\`")"
  tb_eq "no business key booked twice" 0 \
    "$(tb_sql "SELECT COUNT(*) FROM (SELECT biz_key FROM \`${pre}ledger_entry\` GROUP BY biz_key HAVING COUNT(*) > 1) d")"
}

# tb_expect_ledger_ids [LABEL]: in TB_DB, every applied key's response names
# its own ledger entry (the ledger_id of the entry booked under that key).
tb_expect_ledger_ids() {
  tb_eq "${1:-$TB_DB}: every applied row's ledger_id is its own entry" 0 \
    "$(tb_sql "SELECT COUNT(*) FROM dedup_record d LEFT JOIN ledger_entry l ON l.biz_key = d.biz_key
               WHERE d.status = 1 AND (l.id IS NULL OR JSON_VALUE(d.response, '\$.ledger_id') <> l.id)")"
}

# tb_expect_outcome EXPECT_JSON [TABLE]: checks the dead letters and the dedup
# rows against a scripts/gen-payments.py --expect file.
tb_expect_outcome() {
  local exp="$1" table="${2:-dedup_record}" reason n
  for reason in bad_json key_missing key_too_long rejected conflict; do
    n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dead_letters"][sys.argv[2]])' "$exp" "$reason")
    tb_eq "dead letters $reason" "$n" "$(tb_dlq_count "$reason")"
  done
  n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dedup_rows"]["applied"])' "$exp")
  tb_eq "dedup rows applied" "$n" "$(tb_sql "SELECT COUNT(*) FROM \`$table\` WHERE status = 1")"
  n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dedup_rows"]["failed"])' "$exp")
  tb_eq "dedup rows failed" "$n" "$(tb_sql "SELECT COUNT(*) FROM \`$table\` WHERE status = 2")"
  tb_eq "dedup rows processing" 0 "$(tb_sql "SELECT COUNT(*) FROM \`$table\` WHERE status = 0")"
}

tb_done() {
  echo "1..$((TB_PASS + TB_FAIL))"
  echo "# $TB_NAME: $TB_PASS passed, $TB_FAIL failed"
  ((TB_FAIL == 0)) || exit 1
  exit 0
}

# --- ports -------------------------------------------------------------------

# tb_free_port: a TCP port on 127.0.0.1 for a server the test starts (its
# own, never another test's; scripts/lib/ports.sh says why it stays free).
tb_free_port() {
  # shellcheck source=../../scripts/lib/ports.sh
  source "$DD_TEST_SRC_DIR/scripts/lib/ports.sh"
  dd_free_ports 1 || tb_die "no free TCP port"
}

# --- a private database server (for tests that crash it or change globals) --

# tb_private_db [OPTION...]: starts a second MariaDB in $TB_DIR/db2
# (scripts/lib/mariadb.sh; OPTIONs go to mariadbd, e.g. a --port and TLS)
# and moves the test onto it: DD_TEST_MYSQL_SOCKET (so tb_config, tb_sql and
# tb_migrate use it), a fresh TB_DB and the test's users there. Call before
# tb_config. The cleanup trap stops the server. Use it to kill the server or
# SET GLOBAL, never on the shared one.
tb_private_db() {
  # shellcheck source=../../scripts/lib/mariadb.sh
  source "$DD_TEST_SRC_DIR/scripts/lib/mariadb.sh"
  TB_DB2="$TB_DIR/db2"
  dd_mariadb_start "$TB_DB2" "$@" >>"$TB_DIR/db2.log" 2>&1 ||
    tb_die "cannot start a private MariaDB in $TB_DB2 (see db2.log)"
  TB_PIDS+=("$(cat "$TB_DB2/mysqld.pid")")
  export DD_TEST_MYSQL_SOCKET="$TB_DB2/mysqld.sock"
  _tb_mariadb -e "CREATE DATABASE \`$TB_DB\`" || tb_die "cannot create $TB_DB on $TB_DB2"
  tb_users
}

# tb_private_db_kill9 / tb_private_db_restart [OPTION...]: crash and restart
# it (with only the OPTIONs given now).
tb_private_db_kill9() {
  dd_mariadb_kill9 "$TB_DB2" >>"$TB_DIR/db2.log" 2>&1 || tb_die "cannot kill the private MariaDB"
}

tb_private_db_restart() {
  dd_mariadb_restart "$TB_DB2" "$@" >>"$TB_DIR/db2.log" 2>&1 ||
    tb_die "cannot restart the private MariaDB (see db2.log)"
  TB_PIDS+=("$(cat "$TB_DB2/mysqld.pid")")
}

# --- database shards (mysql.shards) -----------------------------------------

# tb_shards N: the test's database on N shards: shard 0 is the shared server
# (DD_TEST_MYSQL_SOCKET), shards 1..N-1 private MariaDB servers started in
# $TB_DIR/shardK (scripts/lib/mariadb.sh, as tb_private_db), each with TB_DB
# and the test's users. Sets TB_SHARD_SOCKETS: tb_config then writes
# mysql.shards (one element per server, in this order; the element order is
# the shard index), and tb_migrate grants on every server. Call after
# tb_init, before tb_config. The cleanup trap stops the servers.
tb_shards() {
  local n="${1:?usage: tb_shards N}" k
  # shellcheck source=../../scripts/lib/mariadb.sh
  source "$DD_TEST_SRC_DIR/scripts/lib/mariadb.sh"
  TB_SHARD_SOCKETS=("$DD_TEST_MYSQL_SOCKET")
  for ((k = 1; k < n; k++)); do
    dd_mariadb_start "$TB_DIR/shard$k" >>"$TB_DIR/shard$k-db.log" 2>&1 ||
      tb_die "cannot start the MariaDB of shard $k (see shard$k-db.log)"
    TB_PIDS+=("$(cat "$TB_DIR/shard$k/mysqld.pid")")
    TB_SHARD_SOCKETS+=("$TB_DIR/shard$k/mysqld.sock")
    DD_TEST_MYSQL_SOCKET="$TB_DIR/shard$k/mysqld.sock" _tb_mariadb -e "CREATE DATABASE \`$TB_DB\`" ||
      tb_die "cannot create $TB_DB on shard $k"
    DD_TEST_MYSQL_SOCKET="$TB_DIR/shard$k/mysqld.sock" tb_users
  done
  tb_log "$n shards: ${TB_SHARD_SOCKETS[*]}"
}

# The mysql.shards line of tb_config: TB_SHARD_ORDER (shard indexes of
# TB_SHARD_SOCKETS, space separated; default all, in order) lists the
# servers, so a test can write a configuration with another layout.
_tb_shards_setting() {
  local k out="" order
  order=${TB_SHARD_ORDER:-$(seq 0 $((${#TB_SHARD_SOCKETS[@]} - 1)) | paste -sd' ')}
  for k in $order; do out+="${out:+, }{ socket = $(_tb_str "${TB_SHARD_SOCKETS[$k]}"); }"; done
  echo "          shards = ( $out );"
}

# tb_shard_sql K "SQL": tb_sql on shard K's server.
tb_shard_sql() {
  DD_TEST_MYSQL_SOCKET="${TB_SHARD_SOCKETS[$1]}" tb_sql "$2"
}

# tb_shards_sql "SQL": tb_sql on every shard, the rows one after another.
tb_shards_sql() {
  local k
  for k in "${!TB_SHARD_SOCKETS[@]}"; do tb_shard_sql "$k" "$1"; done
}

# tb_shard_kill9 K / tb_shard_restart K: crash and restart shard K's
# private server (K >= 1).
tb_shard_kill9() {
  dd_mariadb_kill9 "$TB_DIR/shard$1" >>"$TB_DIR/shard$1-db.log" 2>&1 ||
    tb_die "cannot kill the MariaDB of shard $1"
}

tb_shard_restart() {
  dd_mariadb_restart "$TB_DIR/shard$1" >>"$TB_DIR/shard$1-db.log" 2>&1 ||
    tb_die "cannot restart the MariaDB of shard $1 (see shard$1-db.log)"
  TB_PIDS+=("$(cat "$TB_DIR/shard$1/mysqld.pid")")
}

# tb_shards_expect_ledger EXPECT_JSON: as tb_expect_ledger and
# tb_expect_outcome's dedup rows, over the union of the shards; and every
# merchant's rows (dedup rows, ledger entries, balance) in one shard only.
tb_shards_expect_ledger() {
  local exp="$1" want
  want=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))
for m in sorted(e["merchants"]):
    print("%s\t%d\t%d" % (m, e["merchants"][m]["balance_cents"], e["merchants"][m]["entries"]))' "$exp")
  tb_eq "merchant balances and entries, all shards" "$want" \
    "$(tb_shards_sql "SELECT merchant_id, balance_cents, entries FROM merchant_balance" | sort)"
  tb_eq "ledger entries, all shards" "$(tb_expect_get unique_keys_applied "$exp")" \
    "$(tb_shards_sql "SELECT COUNT(*) FROM ledger_entry" | awk '{ s += $1 } END { print s + 0 }')"
  tb_eq "ledger total cents, all shards" "$(tb_expect_get balance_cents_total "$exp")" \
    "$(tb_shards_sql "SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entry" | awk '{ s += $1 } END { print s + 0 }')"
  tb_eq "no business key booked twice, in one shard or two" "" \
    "$(tb_shards_sql "SELECT biz_key FROM ledger_entry" | sort | uniq -d | head -n 5)"
  tb_eq "no dedup row in two shards" "" \
    "$(tb_shards_sql "SELECT biz_key FROM dedup_record" | sort | uniq -d | head -n 5)"
  tb_eq "dedup rows applied, all shards" "$(tb_expect_get dedup_rows.applied "$exp")" \
    "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1" | awk '{ s += $1 } END { print s + 0 }')"
  tb_eq "dedup rows failed, all shards" "$(tb_expect_get dedup_rows.failed "$exp")" \
    "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 2" | awk '{ s += $1 } END { print s + 0 }')"
  tb_eq "dedup rows processing, all shards" 0 \
    "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 0" | awk '{ s += $1 } END { print s + 0 }')"
}

# tb_shards_expect_placed: with dedup.shard_key "${merchant_id}" and
# shard_by hash over the shards, every row of every shard K is where the
# routing function puts it: CRC32(merchant_id) % N = K (MySQL's CRC32() is
# dedupd's), for the dedup rows (the merchant of pay:MERCHANT:ORDER) and
# the ledger's rows; and every shard holds some.
tb_shards_expect_placed() {
  local n=${#TB_SHARD_SOCKETS[@]} k
  for ((k = 0; k < n; k++)); do
    tb_eq "shard $k: every dedup row's merchant hashes to shard $k" 0 \
      "$(tb_shard_sql "$k" "SELECT COUNT(*) FROM dedup_record
         WHERE CRC32(SUBSTRING_INDEX(SUBSTRING_INDEX(biz_key, ':', 2), ':', -1)) % $n <> $k")"
    tb_eq "shard $k: every ledger entry's merchant hashes to shard $k" 0 \
      "$(tb_shard_sql "$k" "SELECT COUNT(*) FROM ledger_entry WHERE CRC32(merchant_id) % $n <> $k")"
    tb_eq "shard $k: every balance's merchant hashes to shard $k" 0 \
      "$(tb_shard_sql "$k" "SELECT COUNT(*) FROM merchant_balance WHERE CRC32(merchant_id) % $n <> $k")"
    tb_check "shard $k holds applied keys" test \
      "$(tb_shard_sql "$k" "SELECT COUNT(*) FROM dedup_record WHERE status = 1")" -gt 0
  done
}

# --- a Galera cluster (scripts/lib/galera.sh) --------------------------------

# tb_galera: starts a three-node Galera cluster on loopback in
# $TB_DIR/galera and moves the test onto it: DD_TEST_MYSQL_SOCKET is node
# 1's socket (tb_sql, tb_migrate's grants), TB_DB and the test's users are
# created there (and replicate). tb_config then needs TB_MYSQL_HOST=127.0.0.1
# and TB_MYSQL_PORT=$(tb_galera_port N) to use node N. The cleanup trap
# stops the nodes.
tb_galera() {
  # shellcheck source=../../scripts/lib/galera.sh
  source "$DD_TEST_SRC_DIR/scripts/lib/galera.sh"
  TB_GALERA="$TB_DIR/galera"
  dd_galera_start "$TB_GALERA" >>"$TB_DIR/galera.log" 2>&1 ||
    tb_die "cannot start the Galera cluster in $TB_GALERA (see galera.log)"
  _tb_galera_pids
  export DD_TEST_MYSQL_SOCKET="$TB_GALERA/n1/mysqld.sock"
  _tb_mariadb -e "CREATE DATABASE \`$TB_DB\`" || tb_die "cannot create $TB_DB on the cluster"
  tb_users
}

_tb_galera_pids() {
  local n
  for n in 1 2 3; do
    [[ -s "$TB_GALERA/n$n/mysqld.pid" ]] && TB_PIDS+=("$(cat "$TB_GALERA/n$n/mysqld.pid")")
  done
  return 0
}

tb_galera_port() { dd_galera_port "$TB_GALERA" "$1"; }

# tb_galera_sql N "SQL": tb_sql on node N.
tb_galera_sql() {
  dd_galera_client "$TB_GALERA" "$1" -N -B "$TB_DB" -e "$2"
}

# tb_galera_wait_ready N...: waits until each node N accepts queries
# (dd_galera_ready). After a node is killed the others can leave the
# primary component for a moment while the cluster settles; end-state
# checks wait for them.
tb_galera_wait_ready() {
  local n
  for n in "$@"; do
    tb_wait_until 60 "node $n ready" dd_galera_ready "$TB_GALERA" "$n" || tb_die "node $n never became ready"
  done
}

tb_galera_kill9() {
  dd_galera_node_kill9 "$TB_GALERA" "$1" >>"$TB_DIR/galera.log" 2>&1 ||
    tb_die "cannot kill node $1"
}

# tb_galera_rejoin N: starts node N again (incremental state transfer after
# a kill, full after dd_galera_node_wipe) and waits until it is synced.
tb_galera_rejoin() {
  dd_galera_node_rejoin "$TB_GALERA" "$1" >>"$TB_DIR/galera.log" 2>&1 ||
    tb_die "node $1 did not rejoin (see galera.log and $TB_GALERA/n$1/mysqld.err)"
  _tb_galera_pids
}
