#!/usr/bin/env bash
# 96: external mode's transactions dropped by the server between two of
# dedupd's statements (DEDUPD_TEST_FAULTS=txn_drop, as test 95): the claim
# (read, then insert or takeover) and the finish (lock, the handler's
# finish(), the outcome). Each dropped step is tried again and nothing of
# it commits outside its transaction: every key applied once, every
# notification sent once, finish()'s record written once per key, and the
# drops never taken for a handler bug.
source "$(dirname "$0")/../lib.sh"
tb_init txn_dropped_external
tb_mock events:2
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=2 TB_BATCH_MAX=5
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
TB_TOPIC=events tb_config "$TB_CONF" 'external = { lease = "5s"; scan_interval = "0"; };' \
  'retry = { backoff_initial = "5ms"; backoff_max = "100ms"; };'
tb_migrate || tb_die "migrate failed"
N=120
seq 1 $N | awk '{ printf "%d\t-\t{\"id\":\"x%d\",\"to\":\"u%d\",\"text\":\"hello\"}\n", $1 % 2, $1, $1 }' |
  tb_produce events 2>/dev/null || tb_die "produce failed"
# Duplicates of the first 20: their claims find the rows applied.
seq 1 20 | awk '{ printf "%d\t-\t{\"id\":\"x%d\",\"to\":\"u%d\",\"text\":\"hello\"}\n", $1 % 2, $1, $1 }' |
  tb_produce events 2>/dev/null || tb_die "produce failed"

DEDUPD_TEST_FAULTS=txn_drop=3 tb_run || tb_die "dedupd run failed"
log=$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
for place in "START TRANSACTION" "external claim read" "external claim" "external finish lock" \
  "external finish"; do
  tb_check "a drop after $place" grep -qF "dropped the transaction after $place " <<<"$log"
done
tb_check "the dropped steps were tried again" grep -q "the server ended the transaction during" <<<"$log"
tb_check "never taken for a handler bug" test "$(grep -c "handler bug" <<<"$log")" -eq 0
tb_eq "every key applied once" "$N 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_record" | tr '\t' ' ')"
tb_eq "every notification sent exactly once" "$N $N" \
  "$(tb_sql "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM notify_outbox" | tr '\t' ' ')"
tb_eq "finish() recorded every key once" "$N" "$(tb_sql "SELECT COUNT(*) FROM notify_log")"
tb_eq "duplicates seen" 20 "$(tb_summary duplicates)"
tb_assert_committed_at_end tg events
tb_done
