#!/usr/bin/env bash
# 98: dedupd on a three-node Galera cluster. Two consumer groups apply the
# same stream through different nodes (group a through node 1, group b
# through node 2), so the same keys are claimed on two nodes at once: the
# loser learns it at COMMIT, as a certification failure (1213), and replays
# its batch, which then finds the winner's rows. Under load node 2 is
# killed (-9) and rejoins by incremental state transfer; group b waits for
# it and goes on. At the end every node holds every payment exactly once,
# no dedup row is applied without its ledger entry, and both groups have
# committed the end of the topic.
source "$(dirname "$0")/../lib.sh"
tb_init galera_groups
not_grep() { ! grep -q "$@"; }
tb_mock payments:4
tb_galera
export TB_MYSQL_HOST=127.0.0.1 TB_MYSQL_EXTRA='tls = { mode = "disabled"; };' TB_WORKERS=2 TB_BATCH_MAX=50
RETRY='retry = { backoff_initial = "20ms"; backoff_max = "1s"; };'
TB_GROUP=ga TB_MYSQL_PORT=$(tb_galera_port 1) tb_config "$TB_DIR/a.conf" "$RETRY"
TB_GROUP=gb TB_MYSQL_PORT=$(tb_galera_port 2) tb_config "$TB_DIR/b.conf" "$RETRY"
TB_CONF="$TB_DIR/a.conf" tb_migrate || tb_die "migrate failed"

tb_gen --keys 6000 --dup-min 1 --dup-max 3 --partitions 4 --bad 20 --conflicts 10 --seed 98
lines=$(wc -l <"$TB_DIR/stream.txt")
head -n "$((lines / 3))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start_groups a b

# Under load: node 2 goes away (group b's batches wait for it) while the
# rest of the stream arrives, then it rejoins.
applied() { tb_galera_sql 1 "SELECT COUNT(*) FROM dedup_record WHERE status = 1"; }
some_applied() { test "$(applied)" -ge 500; }
tb_wait_until 60 "500 keys applied" some_applied || tb_die "no progress: $(applied) keys applied"
sst_before=$(grep -c "SST completed on joiner" "$TB_GALERA/n2/mysqld.err")
ist_before=$(grep -c "IST received" "$TB_GALERA/n2/mysqld.err" || true)
tb_galera_kill9 2
tb_log "node 2 killed at $(applied) keys applied"
tail -n +"$((lines / 3 + 1))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
sleep 3
tb_galera_rejoin 2
tb_log "node 2 rejoined at $(applied) keys applied"
tb_eq "node 2 rejoined by incremental state transfer (no full one)" "$sst_before $((ist_before + 1))" \
  "$(grep -c "SST completed on joiner" "$TB_GALERA/n2/mysqld.err") $(grep -c "IST received" "$TB_GALERA/n2/mysqld.err")"

# at_end GROUP: the group committed the end of every partition.
at_end() {
  local wm committed
  wm=$(tb_watermarks payments | awk '{ print $1, $3 }')
  committed=$(tb_committed "$1" payments | awk '{ print $1, $2 }')
  [[ -n "$wm" && "$wm" == "$committed" ]]
}
tb_wait_until 180 "group a at the end" at_end ga || true
tb_wait_until 180 "group b at the end" at_end gb || true
tb_stop "${TB_PID[a]}" || tb_not_ok "group a exited non-zero"
tb_stop "${TB_PID[b]}" || tb_not_ok "group b exited non-zero"

tb_assert_committed_at_end ga payments
tb_assert_committed_at_end gb payments
tb_galera_wait_ready 1 2 3
for n in 1 2 3; do
  DD_TEST_MYSQL_SOCKET="$TB_GALERA/n$n/mysqld.sock" tb_expect_ledger
  tb_eq "node $n: applied keys" "$(tb_expect_get dedup_rows.applied)" \
    "$(tb_galera_sql "$n" "SELECT COUNT(*) FROM dedup_record WHERE status = 1")"
  tb_eq "node $n: no key applied without its ledger entry" 0 \
    "$(tb_galera_sql "$n" "SELECT COUNT(*) FROM dedup_record d LEFT JOIN ledger_entry l USING (biz_key)
                           WHERE d.status = 1 AND l.biz_key IS NULL")"
  tb_eq "node $n: no key left processing" 0 \
    "$(tb_galera_sql "$n" "SELECT COUNT(*) FROM dedup_record WHERE status = 0")"
done
cert=$(cat "$TB_DIR/a.log" "$TB_DIR/b.log" | grep -c "will replay it.*1213" || true)
tb_log "batches replayed after a certification failure (1213): $cert"
tb_check "the groups met on the same keys: certification failures replayed ($cert)" test "$cert" -ge 1
tb_check "no group stopped for a handler bug" not_grep "level=error.*handler bug" "$TB_DIR/a.log" "$TB_DIR/b.log"
aborted=$(cat "$TB_DIR/a.log" "$TB_DIR/b.log" | grep -c "the server ended the transaction during\|taken for that abort" || true)
tb_log "batches replayed after the node aborted their transaction without an error: $aborted"
tb_check "group b lost its node and replayed" grep -q "will replay it" "$TB_DIR/b.log"
tb_done
