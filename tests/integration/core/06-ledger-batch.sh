#!/usr/bin/env bash
# 06: the ledger's handle_batch() and the deferred claim give the same end
# state as handle() one message at a time with every key claimed first. One
# stream (duplicates, bad messages, conflicts, rejected payments, orders
# that already exist as UNPAID or REFUNDED) runs three times:
#  A: handler.batch = true, deferred claims (the defaults);
#  B: handler.batch = false, dedup.defer_claim = false, and the claim read
#     back by a SELECT, as on a server without INSERT ... RETURNING
#     (DEDUPD_TEST_FAULTS=no_returning);
#  C: the defaults with a pre-check that finds nothing, on a server taken
#     for one without bulk execution, so the deferred rows go in as a
#     multi-row INSERT (DEDUPD_TEST_FAULTS=precheck_blind,no_bulk): every
#     key already applied is
#     handled again, its deferred insert fails as a duplicate, exactly as
#     when another consumer wins the race, and the batch is rolled back and
#     replayed with the locking claim.
# A second topic keyed by txn_id adds two payments for one order in the same
# batch, which the ledger declines to batch.
# End state: the same ledger entries, balances, orders, dedup rows, order
# statuses in the responses and dead letters in A, B and C; every response's
# ledger_id is its own ledger entry; A used handle_batch and B did not; C
# raced and A did not.
source "$(dirname "$0")/../lib.sh"
tb_init ledger_batch
tb_mock payments:4 txns:1 txns2:1
DB_A=$TB_DB
DB_B="${TB_DB}_b"
DB_C="${TB_DB}_c"
tb_sql "DROP DATABASE IF EXISTS \`$DB_B\`; CREATE DATABASE \`$DB_B\`"
tb_sql "DROP DATABASE IF EXISTS \`$DB_C\`; CREATE DATABASE \`$DB_C\`"

tb_gen --keys 1200 --dup-min 1 --dup-max 3 --partitions 4 --bad 24 --conflicts 12 --seed 23
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce payments failed"
# 40 orders spread over the stream exist before the run: 20 UNPAID (the
# payment moves them), 20 REFUNDED (left alone: the response reports
# REFUNDED). Batches of 100 keep most of them out of the few batches that a
# rejected payment makes go message by message.
python3 -c '
import json, sys
seen = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        p = json.loads(line.split("\t", 2)[2])
        k = (p["merchant_id"], p["order_no"])
    except Exception:
        continue
    if p.get("amount", 0) > 0 and k not in seen:
        seen.append(k)
for i, (m, o) in enumerate(seen[::len(seen) // 40][:40]):
    print("INSERT INTO payment_order (merchant_id, order_no, status) VALUES (\"%s\", \"%s\", \"%s\");"
          % (m, o, "UNPAID" if i % 2 else "REFUNDED"))' "$TB_DIR/stream.txt" >"$TB_DIR/orders.sql"
tb_check "40 existing orders picked" test "$(wc -l <"$TB_DIR/orders.sql")" -eq 40

# Keyed by txn_id, one batch each: on txns, payments for an UNPAID order Y,
# a REFUNDED order Z and a new order W (batched: the read-back of statuses);
# on txns2, two payments for a new order X (declined: X twice) and a copy.
txn() { printf '0\t-\t{"merchant_id":"m900","order_no":"%s","txn_id":"%s","amount":%s,"currency":"EUR","status":"PAID"}\n' "$@"; }
{ txn Y1 TY-1 7.25; txn Z1 TZ-1 1.00; txn W1 TW-1 3.00; } |
  tb_produce txns 2>/dev/null || tb_die "produce txns failed"
{ txn X1 TX-1 10.00; txn X1 TX-2 2.50; txn X1 TX-1 10.00; } |
  tb_produce txns2 2>/dev/null || tb_die "produce txns2 failed"
printf '%s\n' "INSERT INTO payment_order (merchant_id, order_no, status) VALUES ('m900', 'Y1', 'UNPAID');" \
  "INSERT INTO payment_order (merchant_id, order_no, status) VALUES ('m900', 'Z1', 'REFUNDED');" \
  >>"$TB_DIR/orders.sql"

# run_stats: "batched declined" of the last run, "select" when it read the
# claims back with a SELECT (logged once per connection), and how many
# transactions were replayed after a deferred claim's race (claim_races).
run_stats() {
  local how=returning log
  log=$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
  grep -q 'acting as if the server had no INSERT ... RETURNING' <<<"$log" && how=select
  echo "$(tb_summary batched) $(tb_summary batch_declined) $how $(tb_summary claim_races)"
}

# run_into DB GROUP BATCH DEFER FAULTS: the topics into DB, with
# handler.batch = BATCH, dedup.defer_claim = DEFER and
# DEDUPD_TEST_FAULTS=FAULTS.
run_into() {
  TB_DB=$1
  TB_GROUP=$2
  TB_DLQ_TOPIC="dlq-$2"
  TB_TOPIC=payments
  TB_HANDLER_EXTRA="batch = $3;"
  TB_DEDUP_EXTRA="defer_claim = $4;"
  TB_WORKERS=4 TB_BATCH_MAX=100 tb_config
  tb_migrate || tb_die "migrate $1 failed"
  tb_sql "$(cat "$TB_DIR/orders.sql")"
  DEDUPD_TEST_FAULTS=$5 tb_run || tb_die "dedupd run into $1 failed"
  run_stats >"$TB_DIR/$2.batch"
  for TB_TOPIC in txns txns2; do
    TB_KEY='txn:${txn_id}' TB_WORKERS=1 TB_BATCH_WAIT_MS=1000 tb_config
    DEDUPD_TEST_FAULTS=$5 tb_run || tb_die "dedupd run of $TB_TOPIC into $1 failed"
    run_stats >>"$TB_DIR/$2.batch"
  done
}
run_into "$DB_A" ga true true ""
run_into "$DB_B" gb false false no_returning
run_into "$DB_C" gc true true precheck_blind,no_bulk

read -r a_batched a_declined _ a_raced < <(head -n 1 "$TB_DIR/ga.batch")
tb_check "A applied most payments through handle_batch ($a_batched of 1200)" test "${a_batched:-0}" -ge 600
tb_check "A declined the batches with rejected payments ($a_declined)" test "${a_declined:-0}" -ge 1
tb_eq "A: txns batched, txns2 declined (order X twice), claims by RETURNING, no race" \
  "3 0 returning 0|0 1 returning 0" "$(sed -n 2p "$TB_DIR/ga.batch")|$(sed -n 3p "$TB_DIR/ga.batch")"
tb_eq "A: payments claimed by RETURNING, no race" "returning 0" \
  "$(head -n 1 "$TB_DIR/ga.batch" | cut -d' ' -f3-)"
tb_eq "B: never handle_batch, claims read back by SELECT, no race" \
  "0 0 select 0|0 0 select 0|0 0 select 0" "$(paste -sd'|' "$TB_DIR/gb.batch")"
read -r _ _ _ c_raced < <(head -n 1 "$TB_DIR/gc.batch")
tb_check "C: batches with known keys raced and were replayed ($c_raced)" test "${c_raced:-0}" -ge 5

# dump DB: the end state that must not depend on the path taken.
dump() {
  TB_DB=$1
  tb_sql "SELECT HEX(biz_key), merchant_id, order_no, txn_id, amount_cents, currency FROM ledger_entry ORDER BY 1, 4"
  tb_sql "SELECT * FROM merchant_balance ORDER BY 1, 2"
  tb_sql "SELECT merchant_id, order_no, status, txn_id, amount_cents FROM payment_order ORDER BY 1, 2"
  tb_sql "SELECT HEX(biz_key), HEX(request_hash), status, attempts, error,
            JSON_VALUE(response, '\$.order_status') FROM dedup_record ORDER BY 1"
}
dump "$DB_A" >"$TB_DIR/a.dump"
dump "$DB_B" >"$TB_DIR/b.dump"
dump "$DB_C" >"$TB_DIR/c.dump"
tb_check "the dumps are not empty ($(wc -l <"$TB_DIR/a.dump") lines)" test "$(wc -l <"$TB_DIR/a.dump")" -gt 2500
tb_eq "A and B hold the same rows" "" "$(diff "$TB_DIR/a.dump" "$TB_DIR/b.dump" | head -n 20)"
tb_eq "A and C hold the same rows" "" "$(diff "$TB_DIR/a.dump" "$TB_DIR/c.dump" | head -n 20)"
for db in "$DB_A" "$DB_B" "$DB_C"; do
  TB_DB=$db
  tb_expect_ledger_ids
done
TB_DB=$DB_A
tb_eq "responses of orders Y, Z, W" "txn:TY-1 PAID|txn:TZ-1 REFUNDED|txn:TW-1 PAID" \
  "$(tb_sql "SELECT biz_key, JSON_VALUE(response, '\$.order_status') FROM dedup_record
             WHERE biz_key IN ('txn:TY-1', 'txn:TZ-1', 'txn:TW-1') ORDER BY koffset" |
    tr '\t' ' ' | paste -sd'|')"
tb_eq "responses report the stored order status" "REFUNDED 21" \
  "$(tb_sql "SELECT JSON_VALUE(response, '\$.order_status'), COUNT(*) FROM dedup_record
             WHERE JSON_VALUE(response, '\$.order_status') <> 'PAID' GROUP BY 1" | tr '\t' ' ')"
tb_eq "order X: first payment's state, both payments booked" "PAID TX-1 1000|1250" \
  "$(tb_sql "SELECT status, txn_id, amount_cents FROM payment_order WHERE order_no = 'X1'" | tr '\t' ' ')|$(
    tb_sql "SELECT SUM(amount_cents) FROM ledger_entry WHERE order_no = 'X1'")"
tb_eq "ledger entries: the generated payments and 5 txns" \
  "$(($(tb_expect_get unique_keys_applied) + 5))" "$(tb_sql "SELECT COUNT(*) FROM ledger_entry")"
TB_DLQ_TOPIC=dlq-ga
for reason in bad_json key_missing key_too_long rejected conflict; do
  tb_eq "dead letters $reason: A as B" "$(TB_DLQ_TOPIC=dlq-gb tb_dlq_count "$reason")" \
    "$(tb_dlq_count "$reason")"
  tb_eq "dead letters $reason: A as C" "$(TB_DLQ_TOPIC=dlq-gc tb_dlq_count "$reason")" \
    "$(tb_dlq_count "$reason")"
  tb_eq "dead letters $reason: as generated" "$(tb_expect_get "dead_letters.$reason")" \
    "$(tb_dlq_count "$reason")"
done
tb_sql "DROP DATABASE \`$DB_B\`; DROP DATABASE \`$DB_C\`"
tb_done
