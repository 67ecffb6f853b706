#!/usr/bin/env bash
# 24: a lock wait inside the ledger's bulk insert of the entries, after the
# first row. The insert returns the ids (INSERT ... RETURNING): the rows come
# back as they are inserted, so the server's error for a later row arrives
# while the ids are fetched, not from the execution. The ledger must leave
# it in mysql_errno for dedupd, which rolls back and replays the batch as a
# batch; a declined batch means the error was lost on the way (dedupd then
# sees a handler that declined, and goes message by message). Once the other
# session commits, every payment is applied once.
#
# Merchant index before the batch: (ma,1) (mb,2) (mc,3). The other session
# reads merchant mb's entries with FOR UPDATE (REPEATABLE READ), locking
# (mb,2), the gap before it and (mc,3) with the gap before it. The batch's
# first entry, for mc, goes after (mc,3) and is not in a locked gap; its
# second, for mb, goes between (mb,2) and (mc,3) and waits.
#
# On a private MariaDB: the test lowers innodb_lock_wait_timeout globally.
source "$(dirname "$0")/../lib.sh"
tb_init ledger_lock_wait
tb_private_db
_tb_mariadb -e 'SET GLOBAL innodb_lock_wait_timeout = 1' || tb_die "cannot set the lock wait timeout"
tb_mock payments:1
TB_WORKERS=1 tb_config "$TB_CONF" 'retry = { backoff_initial = "50ms"; backoff_max = "200ms"; };'
tb_migrate || tb_die "migrate failed"
pay() { # merchant order cents
  printf '0\t-\t{"merchant_id":"%s","order_no":"%s","txn_id":"T%s","amount":%d.%02d,"currency":"CNY","status":"PAID"}\n' \
    "$1" "$2" "$2" $(($3 / 100)) $(($3 % 100))
}
{ pay ma P1 100; pay mb P2 200; pay mc P3 300; } | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run 1 failed"
tb_eq "run 1 booked one entry per merchant" "ma 1|mb 2|mc 3" \
  "$(tb_sql 'SELECT merchant_id, id FROM ledger_entry ORDER BY id' | tr '\t' ' ' | paste -sd '|')"

# The other session holds its lock until the worker has timed out on it at
# least once (KILL QUERY ends its SLEEP; the session then commits, or, if
# the client stops at the interruption, disconnects: either way the lock is
# gone), so the test does not depend on how fast the worker joins its group.
tb_bg blocker _tb_mariadb "$TB_DB" -e "
  SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ;
  START TRANSACTION;
  SELECT COUNT(*) FROM ledger_entry FORCE INDEX (idx_merchant) WHERE merchant_id = 'mb' FOR UPDATE;
  SELECT SLEEP(600);
  COMMIT;"
blocker=$TB_LAST_PID
blocker_id() {
  tb_sql "SELECT id FROM information_schema.PROCESSLIST
          WHERE db = '$TB_DB' AND info LIKE 'SELECT SLEEP(600)%'"
}
locked() { test -n "$(blocker_id)"; }
tb_wait_until 10 "the other session holds its lock" locked || tb_die "the blocker did not start"
{ pay mc P4 400; pay mb P5 500; pay ma P6 600; } | tb_produce 2>/dev/null || tb_die "produce failed"
tb_bg w "$DEDUPD" run -c "$TB_CONF" --exit-at-end
w=$TB_LAST_PID
timed_out() { grep -q 'Lock wait timeout exceeded.*inside the handler' "$TB_DIR/w.log"; }
tb_wait_until 60 "the worker timed out on the lock" timed_out || tb_die "no lock wait timeout"
tb_sql "KILL QUERY $(blocker_id)" || tb_die "cannot end the blocker's sleep"
wait "$blocker" || true
rc=0
timeout --foreground "$(tb_secs 120)" tail --pid="$w" -f /dev/null || kill -KILL "$w" 2>/dev/null
wait "$w" || rc=$?
tb_eq "the worker ran to the end of the topic" 0 "$rc"

sum() { tb_summary_sum "$1" "$TB_DIR/w.log"; }
waits=$(grep -c 'Lock wait timeout exceeded.*inside the handler' "$TB_DIR/w.log" || true)
tb_check "the entries' insert timed out waiting for the lock ($waits times)" test "$waits" -ge 1
tb_check "each time, the batch was rolled back and replayed" test "$(sum db_retries)" -ge "$waits"
tb_eq "no batch declined: the error reached dedupd" 0 "$(sum batch_declined)"
tb_eq "the three payments went through handle_batch" 3 "$(sum batched)"
tb_eq "each payment booked once" "ma P1 100|ma P6 600|mb P2 200|mb P5 500|mc P3 300|mc P4 400" \
  "$(tb_sql 'SELECT merchant_id, order_no, amount_cents FROM ledger_entry ORDER BY 1, 2' |
    tr '\t' ' ' | paste -sd '|')"
tb_eq "balances" "ma 700 2|mb 700 2|mc 700 2" \
  "$(tb_sql 'SELECT merchant_id, balance_cents, entries FROM merchant_balance ORDER BY 1' |
    tr '\t' ' ' | paste -sd '|')"
tb_eq "six dedup rows, all applied" "6 6" \
  "$(tb_sql 'SELECT COUNT(*), SUM(status = 1) FROM dedup_record' | tr '\t' ' ')"
tb_expect_ledger_ids
tb_assert_committed_at_end
tb_done
