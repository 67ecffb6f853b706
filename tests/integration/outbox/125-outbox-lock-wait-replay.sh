#!/usr/bin/env bash
# 125: a batch whose handler emitted its events is rolled back by a real
# lock wait timeout and replayed. Another session holds a gap lock where
# the batch's deferred dedup row of one key goes (SELECT ... FOR UPDATE on
# that missing key, REPEATABLE READ), so the batch runs the ledger, which
# emits payment.booked for each payment, and then waits at its dedup rows'
# insert until the server gives up (innodb_lock_wait_timeout = 1): dedupd
# rolls everything back, the events too, and replays the batch, again and
# again until the other session lets go.
# End state: each payment booked once and its event in the outbox once,
# with the id of its first attempt; once relayed, each event once on the
# topic.
# On a private MariaDB: the test lowers innodb_lock_wait_timeout globally.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/outbox.sh"
tb_init outbox_lock_wait_replay
tb_private_db
_tb_mariadb -e 'SET GLOBAL innodb_lock_wait_timeout = 1' || tb_die "cannot set the lock wait timeout"
tb_mock payments:1 payment.booked:1
TB_WORKERS=1 TB_BATCH_WAIT_MS=500 TB_HANDLER_CONFIG='emit_topic = "payment.booked";' tb_config "$TB_CONF" \
  'retry = { backoff_initial = "50ms"; backoff_max = "200ms"; };' \
  'outbox = { enabled = true; relay = false; };'
tb_migrate || tb_die "migrate failed"
pay() { # merchant order cents
  printf '0\t-\t{"merchant_id":"%s","order_no":"%s","txn_id":"T%s","amount":%d.%02d,"currency":"CNY","status":"PAID"}\n' \
    "$1" "$2" "$2" $(($3 / 100)) $(($3 % 100))
}
tb_bg blocker _tb_mariadb "$TB_DB" -e "
  SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION;
  SELECT COUNT(*) FROM dedup_record WHERE biz_key = 'pay:mb:P2' FOR UPDATE;
  SELECT SLEEP(600);
  COMMIT;"
blocker=$TB_LAST_PID
blocker_id() {
  tb_sql "SELECT id FROM information_schema.PROCESSLIST WHERE db = '$TB_DB' AND info LIKE 'SELECT SLEEP(600)%'"
}
locked() { test -n "$(blocker_id)"; }
tb_wait_until 10 "the other session holds its lock" locked || tb_die "the blocker did not start"
{ pay ma P1 100; pay mb P2 200; pay mc P3 300; } | tb_produce 2>/dev/null || tb_die "produce failed"
tb_bg w "$DEDUPD" run -c "$TB_CONF" --exit-at-end
w=$TB_LAST_PID
timeouts() { (($(grep -c 'Lock wait timeout exceeded' "$TB_DIR/w.log") >= 2)); }
tb_wait_until 60 "the batch timed out on the lock twice" timeouts || tb_die "no lock wait timeout"
tb_sql "KILL QUERY $(blocker_id)" || tb_die "cannot end the blocker's sleep"
wait "$blocker" || true
rc=0
timeout --foreground "$(tb_secs 120)" tail --pid="$w" -f /dev/null || kill -KILL "$w" 2>/dev/null
wait "$w" || rc=$?
tb_eq "the worker ran to the end of the topic" 0 "$rc"
tb_check "the batch was rolled back and replayed" test "$(tb_summary_sum db_retries "$TB_DIR/w.log")" -ge 2
tb_eq "each payment booked once" "ma P1|mb P2|mc P3" \
  "$(tb_sql 'SELECT merchant_id, order_no FROM ledger_entry ORDER BY 1' | tr '\t' ' ' | paste -sd '|')"
tb_eq "each payment's event in the outbox once" "ma 1|mb 1|mc 1" \
  "$(tb_sql "SELECT CAST(msg_key AS CHAR), COUNT(*) FROM dedupd_outbox GROUP BY 1 ORDER BY 1" | tr '\t' ' ' | paste -sd '|')"
tb_eq "with the id of the first attempt (derived from the business key)" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox o JOIN ledger_entry l ON CAST(o.msg_key AS CHAR) = l.merchant_id
             WHERE CAST(o.event_id AS BINARY) <> $(tb_outbox_id_sql l.biz_key)")"
tb_check "the rolled-back attempts had emitted too (their outbox ids are used up)" \
  test "$(tb_sql 'SELECT MIN(id) FROM dedupd_outbox')" -gt 3
timeout --foreground "$(tb_secs 60)" "$DEDUPD" relay -c "$TB_CONF" --until-empty >"$TB_DIR/relay.out" 2>"$TB_DIR/relay.log" ||
  tb_die "dedupd relay --until-empty failed"
tb_outbox_check
tb_eq "each event once on the topic" 0 "$(val copies)"
tb_done
