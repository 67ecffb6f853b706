#!/usr/bin/env bash
# 91: a failover to an asynchronous replica that lagged. A primary and its
# replica (MariaDB replication between two private servers started here).
# 1,500 unique payments are applied and replicated; the replica's SQL
# thread is stopped, 1,500 more are applied on the primary only (the
# replica holds them unapplied in its relay log); the primary is killed
# with SIGKILL and the replica promoted as a failover tool does (STOP
# SLAVE, RESET SLAVE ALL: what it had not applied is gone). dedupd,
# restarted against the replica with Kafka's offsets at the end of every
# partition, starts from the replica's own positions: every payment once
# in the promoted database, nothing lost, nothing doubled. The group runs
# as two processes after the failover (its partitions rebalanced between
# them as they join), and a second group applies the same topic to the
# same table all along: after the failover it is behind too, reads again
# and finds every payment applied (by the first group): duplicates only.
source "$(dirname "$0")/../lib.sh"
tb_init replica_failover

port=$(tb_free_port)
tb_private_db --port="$port" --bind-address=127.0.0.1 --log-bin=mysql-bin --server-id=1 \
  --binlog-format=ROW
primary_sock=$DD_TEST_MYSQL_SOCKET
REPLICA="$TB_DIR/replica"
dd_mariadb_start "$REPLICA" --server-id=2 >>"$TB_DIR/replica-db.log" 2>&1 ||
  tb_die "cannot start the replica (see replica-db.log)"
TB_PIDS+=("$(cat "$REPLICA/mysqld.pid")")
replica_sql() { dd_mariadb_client "$REPLICA" -N -B "$@"; }
_tb_mariadb -e "CREATE USER 'repl'@'%'; GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'" ||
  tb_die "cannot create the replication user"
# From the primary's first binary log on: the test's database and users too.
replica_sql -e "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $port,
  MASTER_USER = 'repl', MASTER_LOG_FILE = 'mysql-bin.000001', MASTER_LOG_POS = 4;
  START SLAVE" || tb_die "cannot start replication"

tb_mock payments:4
# both_configs: the first group's (TB_CONF) and the second's (g2.conf).
both_configs() {
  TB_GROUP=tg2 TB_WORKERS=2 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config "$TB_DIR/g2.conf"
  TB_WORKERS=2 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config "$TB_DIR/dedupd.conf"
}
run_g2() { TB_CONF=$TB_DIR/g2.conf tb_run || tb_die "the second group's run failed"; }
both_configs
tb_migrate || tb_die "migrate failed"

tb_gen --keys 3000 --dup-min 1 --dup-max 1 --partitions 4 --seed 91
head -n 1500 "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the first run failed"
run_g2
replicated() { [[ "$(replica_sql "$TB_DB" -e 'SELECT COUNT(*) FROM ledger_entry')" == "$1" ]]; }
tb_wait_until 60 "the replica has the first 1,500" replicated 1500 || tb_die "replication is not working"
# Everything of the first run, positions included, is on the replica.
sleep 1
replica_sql -e "STOP SLAVE SQL_THREAD" || tb_die "cannot stop the replica's SQL thread"

tail -n +1501 "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the second run failed"
run_g2
tb_eq "the second group found them applied" "0 1500" "$(tb_summary applied) $(tb_summary duplicates)"
tb_eq "the primary applied all 3,000" 3000 "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_assert_committed_at_end
tb_eq "the replica lags: still 1,500" 1500 "$(replica_sql "$TB_DB" -e 'SELECT COUNT(*) FROM ledger_entry')"

# The primary dies; the replica is promoted without what it had not applied.
tb_private_db_kill9
replica_sql -e "STOP SLAVE; RESET SLAVE ALL" || tb_die "cannot promote the replica"
export DD_TEST_MYSQL_SOCKET="$REPLICA/mysqld.sock"
both_configs

# The group, as two processes.
tb_start a
a=$TB_LAST_PID
tb_start b
b=$TB_LAST_PID
# Kafka's offsets were at the end all along: the database's positions say
# when the two processes are through. Kafka's commits follow the database's
# positions (up to a second later): both are at the end before a process
# stops, or the rebalance its leaving starts could keep the other's last
# commit from reaching the broker.
ends=$(tb_watermarks | awk '{ s += $3 } END { print s }')
at_end() {
  [[ "$(tb_sql "SELECT SUM(next_offset) FROM dedupd_position WHERE group_id = 'tg'")" == "$ends" &&
    "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')" == 3000 &&
    "$(tb_committed | awk '{ s += $2 } END { print s }')" == "$ends" ]]
}
tb_wait_until 120 "the group applied everything again and recorded its positions" at_end ||
  tb_not_ok "the two processes did not reach the end"
tb_stop "$a" || tb_not_ok "process a stops cleanly"
tb_stop "$b" || tb_not_ok "process b stops cleanly"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_eq "the 1,500 the replica lacked applied there, once over both processes" 1500 \
  "$(tb_summary_sum applied "$TB_DIR/a.log" "$TB_DIR/b.log")"
warned=$(cat "$TB_DIR/a.log" "$TB_DIR/b.log" |
  grep -o "level=warn.*position of group tg, payments \[[0-3]\] is [0-9]*, behind Kafka's committed offset [0-9]*: the database went back in time" |
  grep -o 'payments \[[0-3]\]' | sort -u | paste -sd' ')
tb_eq "warn lines name every partition" "payments [0] payments [1] payments [2] payments [3]" "$warned"
tb_check "rewinds counted" test "$(tb_summary_sum position_rewinds "$TB_DIR/a.log" "$TB_DIR/b.log")" -ge 4

# The second group: behind too, everything it reads again is applied.
run_g2
tb_eq "the second group read again what the replica lost: duplicates only" "0 1500" \
  "$(tb_summary applied) $(tb_summary duplicates)"
tb_eq "the second group counts a rewind per partition" 4 "$(tb_summary position_rewinds)"
tb_assert_committed_at_end tg2
tb_eq "the promoted database's positions at the end" "$(tb_committed)" \
  "$(tb_sql "SELECT kpartition, next_offset FROM dedupd_position WHERE group_id = 'tg'
             AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"
tb_done
