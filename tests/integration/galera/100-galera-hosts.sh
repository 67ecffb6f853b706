#!/usr/bin/env bash
# 100: one configuration, several nodes: mysql.hosts names the three nodes
# of a Galera cluster, and no load balancer stands in front of them.
# dedupd connects to the first; that node is killed under load: the batches
# on it are replayed on the next node that answers, the rest of the stream
# is applied while the first node stays down, and /readyz stays ready
# (a node answers). Every payment exactly once, offsets at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init galera_hosts
not_alive() { ! dd_galera_client "$TB_GALERA" 1 -e "SELECT 1" >/dev/null 2>&1; }
tb_mock payments:4
tb_galera
export TB_MYSQL_HOST=127.0.0.1 TB_WORKERS=2 TB_BATCH_MAX=50
p1=$(tb_galera_port 1) p2=$(tb_galera_port 2) p3=$(tb_galera_port 3)
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_MYSQL_EXTRA="hosts = \"127.0.0.1:$p1, 127.0.0.1:$p2,127.0.0.1:$p3\"; tls = { mode = \"disabled\"; };" \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" \
  'retry = { backoff_initial = "20ms"; backoff_max = "500ms"; };'
tb_migrate || tb_die "migrate failed"

tb_gen --keys 4000 --dup-min 1 --dup-max 2 --partitions 4 --bad 10 --conflicts 5 --seed 100
lines=$(wc -l <"$TB_DIR/stream.txt")
head -n "$((lines / 4))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
th_wait_status 30 200 /readyz || tb_die "/readyz never became ready: $(th_body /readyz)"
applied() { tb_galera_sql 2 "SELECT COUNT(*) FROM dedup_record WHERE status = 1"; }
some_applied() { test "$(applied)" -ge 300; }
tb_wait_until 60 "300 keys applied" some_applied || tb_die "no progress: $(applied) keys applied"
tb_check "connected to node 1 first" test "$(grep -c "Connected to node" "$TB_DIR/run.log")" -eq 0

tb_galera_kill9 1
tb_log "node 1 killed at $(applied) keys applied"
tail -n +"$((lines / 4 + 1))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_wait_until 30 "moved to another node" grep -q "Connected to node 127.0.0.1:\($p2\|$p3\) of mysql.hosts" \
  "$TB_DIR/run.log" || tb_not_ok "dedupd did not move to another node"
tb_eq "/readyz ready with node 1 down" 200 "$(th_status /readyz)"
# at_end: the group committed the end of every partition, node 1 still down.
at_end() {
  [[ "$(tb_watermarks payments | awk '{ print $1, $3 }')" == "$(tb_committed tg payments | awk '{ print $1, $2 }')" ]]
}
tb_wait_until 120 "everything applied and committed" at_end || tb_not_ok "not at the end with node 1 down"
tb_check "node 1 is still down" not_alive
tb_stop "$pid" || tb_not_ok "dedupd exited non-zero"

tb_assert_committed_at_end tg payments
tb_galera_wait_ready 2 3
DD_TEST_MYSQL_SOCKET="$TB_GALERA/n2/mysqld.sock" tb_expect_ledger
tb_eq "node 3: applied keys" "$(tb_expect_get dedup_rows.applied)" \
  "$(tb_galera_sql 3 "SELECT COUNT(*) FROM dedup_record WHERE status = 1")"
tb_eq "no key applied without its ledger entry" 0 \
  "$(tb_galera_sql 2 "SELECT COUNT(*) FROM dedup_record d LEFT JOIN ledger_entry l USING (biz_key)
                      WHERE d.status = 1 AND l.biz_key IS NULL")"
tb_check "the batches on node 1 were replayed" grep -q "will replay it" "$TB_DIR/run.log"
tb_done
