#!/usr/bin/env bash
# 95: the server ends dedupd's transaction between two of dedupd's own
# statements without an error (what a Galera node's brute-force abort does
# to a statement that was running). DEDUPD_TEST_FAULTS=txn_drop=N rolls the
# transaction back behind dedupd's back after every Nth statement: the
# batch must be rolled back and replayed, never finished outside its
# transaction (no dedup row applied without its business row, every
# payment booked once), and never taken for a handler bug. Every place
# where dedupd sends several statements in one transaction is hit: the
# pre-check and the bulk finish of deferred claims, the claim insert with
# RETURNING, the text finish and the read-back (no bulk, no RETURNING),
# chunks of a batch of more than 1,000 new keys, the savepoints after a
# REJECT, and replay --apply.
source "$(dirname "$0")/../lib.sh"
tb_init txn_dropped
tb_mock a:4 b:4 c:4 d:4 e:4
export TB_WORKERS=1 TB_BATCH_MAX=40
RETRY='retry = { backoff_initial = "5ms"; backoff_max = "100ms"; };'

# expect_whole NAME LOG: the end state of a run whose transactions were dropped.
expect_whole() {
  local name="$1" log="$2" drops
  drops=$(grep -c "DEDUPD_TEST_FAULTS: dropped the transaction" "$log" || true)
  tb_check "$name: transactions were dropped ($drops)" test "$drops" -ge 2
  tb_check "$name: ... and the batches replayed" \
    grep -q "the server ended the transaction during" "$log"
  tb_not_ok_if_grep "$name: ... never taken for a handler bug" "handler bug" "$log"
  tb_expect_ledger
  tb_eq "$name: no key recorded applied without its ledger entry" 0 \
    "$(tb_sql "SELECT COUNT(*) FROM dedup_record d LEFT JOIN ledger_entry l USING (biz_key)
               WHERE d.status = 1 AND l.biz_key IS NULL")"
}

tb_not_ok_if_grep() {
  if grep -q "$2" "$3"; then tb_not_ok "$1: $(grep -m1 "$2" "$3")"; else tb_ok "$1"; fi
}

# use_db NAME: a fresh database (and dead-letter topic) for the next case.
use_db() {
  TB_DB="t_txn_dropped_$1"
  _tb_mariadb -e "DROP DATABASE IF EXISTS \`$TB_DB\`; CREATE DATABASE \`$TB_DB\`"
}

# run_case NAME TOPIC FAULTS GEN-ARGS...
run_case() {
  local name="$1" topic="$2" faults="$3"
  shift 3
  use_db "$name"
  TB_TOPIC="$topic" TB_GROUP="g$topic" tb_config "$TB_CONF" "$RETRY"
  tb_migrate || tb_die "$name: migrate failed"
  tb_gen "$@" --partitions 4
  tb_produce "$topic" <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "$name: produce failed"
  DEDUPD_TEST_FAULTS="$faults" TB_TOPIC="$topic" tb_run || tb_die "$name: dedupd run failed"
  tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" >"$TB_DIR/$name.log"
  expect_whole "$name" "$TB_DIR/$name.log"
  TB_TOPIC="$topic" tb_expect_outcome "$TB_DIR/expect.json"
  tb_assert_committed_at_end "g$topic" "$topic"
}

# expect_place NAME WHAT: a drop hit the transaction after WHAT.
expect_place() {
  tb_check "$1: a drop after $2" grep -qF "dropped the transaction after $2 " "$TB_DIR/$1.log"
}

# a: deferred claims (the default): pre-check, handle_batch(), bulk finish.
run_case deferred a txn_drop=4 --keys 600 --dup-min 1 --dup-max 3 --bad 12 --conflicts 5 --seed 95
expect_place deferred "START TRANSACTION"
expect_place deferred "claim read-back"
expect_place deferred "claim finish (bulk)"

# b: message by message; the rejected payments send their batches through
# a savepoint per message.
TB_HANDLER_EXTRA='batch = false;' run_case savepoints e txn_drop=6 \
  --keys 400 --dup-min 1 --dup-max 2 --bad 60 --seed 99
expect_place savepoints "SAVEPOINT dd_msg"

# c: every key claimed first (INSERT ... RETURNING), the finish an UPDATE:
# checks 1-3 of each transaction (no copies, so no pre-check).
TB_BATCH_MAX=20 TB_DEDUP_EXTRA='defer_claim = false;' run_case locking b txn_drop=3 \
  --keys 500 --dup-min 1 --dup-max 1 --seed 96
expect_place locking "claim insert"
expect_place locking "claim finish"

# d: a server without RETURNING and bulk arrays: the claim's read-back and
# the finish as text: checks 1-4.
TB_BATCH_MAX=20 TB_DEDUP_EXTRA='defer_claim = false;' run_case plain c no_bulk,no_returning,txn_drop=4 \
  --keys 500 --dup-min 1 --dup-max 1 --seed 97
expect_place plain "claim insert"
expect_place plain "claim read-back"
expect_place plain "claim finish"

# e: batches of 2,500 new keys: the pre-check and the finish in chunks of
# at most 1,000 rows (checks 2-4 and 5-7), drops between two chunks.
TB_BATCH_MAX=2500 TB_BATCH_WAIT_MS=1000 run_case chunks d txn_drop=6 \
  --keys 10000 --dup-min 1 --dup-max 1 --seed 98
chunked=$(grep -c "dropped the transaction after claim finish (bulk)" "$TB_DIR/chunks.log" || true)
tb_check "chunks: drops between the chunks of the finish ($chunked)" test "$chunked" -ge 2

# f: replay --apply repairs keys through the same transactions.
TB_DB=t_txn_dropped_deferred
TB_TOPIC=a TB_GROUP=ga tb_config "$TB_CONF" "$RETRY"
tb_sql "CREATE TABLE victims AS SELECT biz_key FROM dedup_record WHERE status = 1
          ORDER BY SHA2(biz_key, 256) LIMIT 40;
        UPDATE merchant_balance b JOIN (SELECT merchant_id, currency, SUM(amount_cents) s, COUNT(*) c
            FROM ledger_entry WHERE biz_key IN (SELECT biz_key FROM victims)
            GROUP BY merchant_id, currency) x USING (merchant_id, currency)
          SET b.balance_cents = b.balance_cents - x.s, b.entries = b.entries - x.c;
        DELETE FROM ledger_entry WHERE biz_key IN (SELECT biz_key FROM victims);
        DELETE FROM dedup_record WHERE biz_key IN (SELECT biz_key FROM victims)"
tb_gen --keys 600 --dup-min 1 --dup-max 3 --bad 12 --conflicts 5 --seed 95 --partitions 4
DEDUPD_TEST_FAULTS=txn_drop=2 "$DEDUPD" replay -c "$TB_CONF" --topic a --from earliest --apply \
  --all-consumed --report "$TB_DIR/apply.json" >"$TB_DIR/replay.log" 2>&1 ||
  tb_die "replay --apply failed: $(tail -n 5 "$TB_DIR/replay.log")"
expect_whole replay "$TB_DIR/replay.log"
tb_eq "replay: the 40 keys repaired" 40 \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["repaired"])' "$TB_DIR/apply.json")"
tb_done
