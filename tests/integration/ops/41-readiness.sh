#!/usr/bin/env bash
# 41: /readyz follows the database. The run uses a second private MariaDB
# that this test owns (the shared one must never stop): stopped, /readyz
# turns 503 while /healthz stays 200 (an idle loop with a database away is
# alive); started again, /readyz is back to 200 on a reconnected ping, and
# messages produced afterwards are applied. SIGTERM then exits 0 with the
# offsets committed.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
source "$DD_TEST_SRC_DIR/scripts/lib/mariadb.sh"
tb_init readiness

# Our own server: every tb_sql/tb_migrate and the config below go to it.
db2="$TB_DIR/db2"
# Stop our processes before our server, then let lib.sh clean up the rest.
trap 'rc=$?; for p in "${TB_PIDS[@]}"; do _tb_reap "$p"; done
      dd_mariadb_stop "$db2" >/dev/null 2>&1; (exit $rc); _tb_cleanup' EXIT
dd_mariadb_start "$db2" >"$TB_DIR/db2-start.log" 2>&1 || tb_die "cannot start the second MariaDB"
export DD_TEST_MYSQL_SOCKET="$db2/mysqld.sock"
_tb_mariadb -e "CREATE DATABASE \`$TB_DB\`" || tb_die "cannot create $TB_DB on the second MariaDB"
tb_users

tb_mock events:2
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

_produce_range() {
  python3 -c 'import json, sys
for i in range(int(sys.argv[1]), int(sys.argv[2])):
    print("%d\t-\t%s" % (i % 2, json.dumps({"id": i})))' "$1" "$2" | tb_produce 2>/dev/null
}
_produce_range 0 50 || tb_die "produce failed"

tb_start run
pid=$TB_LAST_PID
th_wait_status 30 200 /readyz || tb_die "/readyz never became ready: $(th_body /readyz)"
tb_ok "/readyz 200 with partitions assigned and the database up"
tb_check "/readyz says how many partitions" grep -q "2 partition(s) assigned" <(th_body /readyz)
_effects_are() { [[ "$(tb_sql 'SELECT COUNT(*) FROM th_effect')" == "$1" ]]; }
tb_wait_until 30 "first 50 applied" _effects_are 50 ||
  tb_die "the first 50 messages were not applied"

dd_mariadb_stop "$db2" || tb_die "cannot stop the second MariaDB"
th_wait_status 15 503 /readyz || tb_die "/readyz stayed $(th_status /readyz) with the database down"
tb_ok "/readyz 503 while the database is down"
tb_check "/readyz names the database" grep -q "database" <(th_body /readyz)
tb_eq "/healthz stays 200 while idle with the database down" 200 "$(th_status /healthz)"
tb_eq "/metrics still served" 200 "$(th_status /metrics)"

dd_mariadb_restart "$db2" >>"$TB_DIR/db2-start.log" 2>&1 || tb_die "cannot restart the second MariaDB"
th_wait_status 15 200 /readyz || tb_die "/readyz stayed $(th_status /readyz) after the restart"
tb_ok "/readyz back to 200 after the database restart"

_produce_range 50 80 || tb_die "produce failed"
tb_wait_until 60 "all 80 applied" _effects_are 80 ||
  tb_die "messages after the restart were not applied"
rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "80 applied dedup rows" 80 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_assert_committed_at_end
tb_done
