#!/usr/bin/env bash
# 69: two routes in one consumer, each handler in its own mode: payment
# callbacks into the ledger (route payments, local mode: the batch
# transaction) and notifications through the example notify handler (route
# notify, external mode: claim, act outside any transaction, finish, with
# reconcile()). The lanes carry both routes' messages at once. The worker
# crashes twice mid-run: once from notify's fault hook right after a send,
# before dedupd could finish its key (left processing, the send done), once
# by SIGKILL. In the end each route applied every key exactly once in its
# own table: the ledger as expected, every notification sent once (the
# takeover asked reconcile(), which found the send), nothing left
# processing, offsets at the end of both topics. Then the commands per
# route: migrate indexed the processing rows of the external route's table
# only; reconcile scans the external route, refuses the local one by
# --route; replay --apply repairs nothing of the external route (a deleted
# key is reported missing, not sent again) and refuses it by --route.
source "$(dirname "$0")/../lib.sh"
tb_init routes_external
tb_mock payments:2 notes:2
TB_WORKERS=2 TB_BATCH_MAX=10 TB_KAFKA_PROPS="auto.commit.interval.ms=200 session.timeout.ms=3000 max.poll.interval.ms=4000" tb_config_routes "
  { name = \"payments\"; topics = [\"payments\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    table = \"dedup_record\"; handler = { path = \"$DD_LEDGER_SO\"; }; },
  { name = \"notify\"; topics = [\"notes\"]; key = \"n:\${id}\"; table = \"dedup_notify\";
    handler = { path = \"$DD_NOTIFY_SO\";
                config = { socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\";
                           database = \"$TB_DB\"; }; }; }" \
  'external = { lease = "2s"; scan_interval = "1s"; };'
tb_migrate || tb_die "migrate failed"
tb_eq "migrate: the processing index on the external route's table only" "dedup_notify" \
  "$(tb_sql "SELECT GROUP_CONCAT(DISTINCT TABLE_NAME) FROM information_schema.STATISTICS
             WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME = 'ix_processing'")"

# 60 notifications, every third delivered twice.
N=60
seq 1 $N | awk '{ m = sprintf("%d\t-\t{\"id\":\"a%d\",\"to\":\"u%d\",\"text\":\"hi\"}", $1 % 2, $1, $1)
                  print m; if ($1 % 3 == 0) print m }' |
  tb_produce notes 2>/dev/null || tb_die "produce notes failed"

# Crash 1: notify's hook ends the worker right after its 8th send.
rc=0
NOTIFY_CRASH_AFTER_ACT=8 timeout "$(tb_secs 60)" "$DEDUPD" run -c "$TB_CONF" \
  >>"$TB_DIR/run1.log" 2>&1 || rc=$?
tb_eq "the fault hook ended the worker after a send (exit 9)" 9 "$rc"
crashed=$(tb_sql "SELECT COALESCE(GROUP_CONCAT(biz_key ORDER BY biz_key), '') FROM dedup_notify d
                  WHERE status = 0 AND EXISTS (SELECT 1 FROM notify_outbox o WHERE o.biz_key = d.biz_key)")
tb_log "after the crash: keys processing with their send done: $crashed"
tb_check "a notification key is left processing with its send done" test -n "$crashed"

# The payments come now, so the second run has both routes' messages in
# its lanes when it is killed.
tb_gen --keys 600 --dup-min 1 --dup-max 2 --partitions 2 --bad 4 --conflicts 3 --seed 69
tb_produce payments <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce payments failed"

# Crash 2: SIGKILL once the second run has applied some payments (each
# send slowed down, which slows the lanes down: the kill finds both routes
# under way).
NOTIFY_ACT_SLEEP_MS=50 tb_bg run2 "$DEDUPD" run -c "$TB_CONF" --exit-at-end
pid=$TB_LAST_PID
sends() { tb_sql 'SELECT COUNT(*) FROM notify_outbox'; }
payments() { tb_sql 'SELECT COUNT(*) FROM dedup_record'; }
deadline=$((SECONDS + $(tb_secs 30)))
sent=$(sends)
while kill -0 "$pid" 2>/dev/null && (($(payments) < 100 || $(sends) < sent + 4)) &&
  ((SECONDS < deadline)); do sleep 0.01; done
if kill -0 "$pid" 2>/dev/null; then
  tb_kill9 "$pid"
  tb_log "killed run 2 at $(sends) sends, $(payments) payment keys"
else
  wait "$pid" 2>/dev/null || true
  tb_log "run 2 ended before the kill"
fi
tb_run || tb_die "final run failed"

# route payments (local mode): the ledger, its table, its dead letters
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "payments: one applied row per key, the rejected failed" \
  "$(tb_expect_get dedup_rows.applied) $(tb_expect_get dedup_rows.failed)" \
  "$(tb_sql 'SELECT SUM(status = 1), SUM(status = 2) FROM dedup_record' | tr '\t' ' ')"
for reason in bad_json key_missing key_too_long conflict; do
  tb_eq "payments: distinct dead letters $reason" "$(tb_expect_get "dead_letters.$reason")" \
    "$(tb_dlq_distinct "$reason" payments.dlq)"
done
# route notify (external mode): every key applied once, every send once
tb_eq "notify: every key applied" "$N 0" \
  "$(tb_sql 'SELECT SUM(status = 1), SUM(status <> 1) FROM dedup_notify' | tr '\t' ' ')"
tb_eq "notify: every notification sent exactly once" "$N $N" \
  "$(tb_sql 'SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM notify_outbox' | tr '\t' ' ')"
tb_eq "notify: finish() recorded every key once" "$N" "$(tb_sql 'SELECT COUNT(*) FROM notify_log')"
tb_eq "the crashed keys were taken over and found sent by reconcile()" \
  "$(tr ',' '\n' <<<"$crashed" | sed 's/$/ 1/')" \
  "$(tb_sql "SELECT biz_key, JSON_VALUE(response, '\$.reconciled') FROM dedup_notify
             WHERE FIND_IN_SET(biz_key, '$crashed') ORDER BY biz_key" | tr '\t' ' ')"
tb_eq "no route's key in the other's table, none left processing" "0 0 0 0" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM dedup_record WHERE biz_key LIKE 'n:%'),
                    (SELECT COUNT(*) FROM dedup_notify WHERE biz_key NOT LIKE 'n:%'),
                    (SELECT COUNT(*) FROM dedup_record WHERE status = 0),
                    (SELECT COUNT(*) FROM dedup_notify WHERE status = 0)" | tr '\t' ' ')"
tb_assert_committed_at_end tg payments
tb_assert_committed_at_end tg notes

# reconcile: the external route's table; the local route refused by name
"$DEDUPD" reconcile -c "$TB_CONF" >"$TB_DIR/reconcile.txt" 2>&1 || tb_not_ok "reconcile failed"
tb_eq "reconcile: the external route only, nothing stuck" \
  "route notify: dedup table dedup_notify|0 row(s) in processing past their lease (the oldest by 0.0 s)" \
  "$(grep -E '^(route |[0-9]+ row\(s\) in processing)' "$TB_DIR/reconcile.txt" | paste -sd'|')"
rc=0
"$DEDUPD" reconcile -c "$TB_CONF" --route payments >"$TB_DIR/reconcile2.txt" 2>&1 || rc=$?
tb_eq "reconcile --route of the local route: exit 1" 1 "$rc"
tb_check "... saying it is in local mode" \
  grep -q 'route payments: handler ledger is in local mode' "$TB_DIR/reconcile2.txt"

# replay --apply: a notification key deleted from its table is reported
# missing, not sent again; --route naming the external route is refused.
tb_sql "DELETE FROM dedup_notify WHERE biz_key = 'n:a5'"
rc=0
"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --format csv --report "$TB_DIR/report.csv" \
  2>"$TB_DIR/replay.log" || rc=$?
tb_eq "replay --apply over both routes: exit 0" 0 "$rc"
tb_eq "n:a5 reported missing, not repaired" "missing  notify" \
  "$(python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["key"] == "n:a5": print(r["status"], r["apply"], r["route"])' "$TB_DIR/report.csv" | head -n 1)"
tb_check "... saying why" grep -q 'Route notify: its handler notify is in external mode' \
  "$TB_DIR/replay.log"
tb_eq "nothing sent again, the key still missing" "$N 0" \
  "$(tb_sql "SELECT COUNT(*), (SELECT COUNT(*) FROM dedup_notify WHERE biz_key = 'n:a5') FROM notify_outbox" | tr '\t' ' ')"
rc=0
"$DEDUPD" replay -c "$TB_CONF" --from earliest --route notify --apply \
  --report "$TB_DIR/report2.json" 2>"$TB_DIR/replay2.log" || rc=$?
tb_eq "replay --route notify --apply: refused (exit 1)" 1 "$rc"
tb_check "... saying why" grep -q 'replay --apply does not run handlers in external mode' \
  "$TB_DIR/replay2.log"
tb_done
