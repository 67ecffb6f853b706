#!/usr/bin/env bash
# 120: host->emit writes events into the outbox in dedupd's transaction.
# The ledger (handler.config.emit_topic) emits payment.booked per booked
# payment, in handle() and in handle_batch(); the relay is off
# (outbox.relay = false), so the table holds what was committed. Every
# transaction is rolled back once after the handler ran and replayed (as
# after a deadlock: DEDUPD_TEST_FAULTS=rollback_after_handler), and every
# third COMMIT's reply is lost after it went through (commit_lost=3).
# End state: one event per booked payment (none for a rejected, conflicting
# or duplicate message, none twice for a replayed batch), each with the id
# derived from its business key (the same in every attempt), carried in the
# payload too, keyed by the merchant, with the handler's header. Then
# th_scripted's events with message.max.bytes 1000: one that fits is
# committed; for one larger, emit fails with a clear error, the message is
# dead-lettered after its retries and nothing of it commits. Last, dedupd handler-test of the emitting ledger compares the
# outbox after its two passes: the same events.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/outbox.sh"
tb_init outbox_emit
tb_mock payments:4 big:1
TB_WORKERS=2 TB_HANDLER_CONFIG='emit_topic = "payment.booked";' tb_config "$TB_CONF" \
  'outbox = { enabled = true; relay = false; };'
ledger_conf=$TB_CONF
tb_migrate || tb_die "migrate failed"
tb_check "migrate created the outbox" grep -q 'outbox table dedupd_outbox ready' "$TB_DIR/migrate.log"

tb_gen --keys 400 --dup-min 1 --dup-max 3 --partitions 4 --bad 20 --conflicts 10 --seed 12
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
DEDUPD_TEST_FAULTS=rollback_after_handler,commit_lost=3 tb_run || tb_die "dedupd run failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_check "batches went through handle_batch" test "$(tb_summary batched)" -gt 0

booked=$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')
tb_eq "one event per booked payment" "$booked" "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox')"
tb_eq "every event's ledger entry exists, none twice" "$booked $booked" \
  "$(tb_sql "SELECT COUNT(DISTINCT l.id), COUNT(*) FROM dedupd_outbox o
             JOIN ledger_entry l ON l.id = JSON_VALUE(o.msg_value, '\$.ledger_id')
             AND l.order_no = JSON_VALUE(o.msg_value, '\$.order_no')" | tr '\t' ' ')"
tb_eq "each event's id is derived from its business key (stable across replays)" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox o
             JOIN ledger_entry l ON l.id = JSON_VALUE(o.msg_value, '\$.ledger_id')
             WHERE CAST(o.event_id AS BINARY) <> $(tb_outbox_id_sql l.biz_key)")"
tb_eq "the payload carries the event id" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox WHERE JSON_VALUE(msg_value, '\$.event_id') <> event_id")"
tb_eq "keyed by the merchant, to payment.booked, pending, with the type header" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox WHERE CAST(msg_key AS CHAR) <> JSON_VALUE(msg_value, '\$.merchant_id')
             OR topic <> 'payment.booked' OR state <> 0 OR LOCATE('payment.booked', headers) = 0")"

# Events against message.max.bytes (1000 here), from th_scripted: 100
# bytes fit, 600 do not (with the key and the record's 512).
TB_TOPIC=big TB_GROUP=gbig TB_KAFKA_PROPS=message.max.bytes=1000 TB_KEY='ev:${id}' \
  TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" tb_config "$TB_DIR/big.conf" \
  'outbox = { enabled = true; relay = false; };' 'retry = { max_attempts = 2; backoff_initial = "10ms"; };'
tb_migrate || tb_die "migrate of th_scripted failed"
printf '0\t-\t{"id":"small","th":"emit:100"}\n0\t-\t{"id":"large","th":"emit:600"}\n' |
  tb_produce big 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run of the large event failed"
tb_eq "the large event's message dead-lettered after its retries" 1 "$(tb_dlq_count retries_exhausted big.dlq)"
tb_check "its dead letter says the event is too large" \
  grep -q 'is more than the relay.s producer sends (message.max.bytes 1000)' <<<"$(tb_dlq big.dlq)"
tb_eq "the small event and its effect committed, nothing of the large one" "1 1 0 0" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM th_effect WHERE biz_key = 'ev:small'),
             (SELECT COUNT(*) FROM dedupd_outbox WHERE CAST(msg_key AS CHAR) = 'ev:small' AND LENGTH(msg_value) = 100),
             (SELECT COUNT(*) FROM th_effect WHERE biz_key = 'ev:large'),
             (SELECT COUNT(*) FROM dedupd_outbox WHERE CAST(msg_key AS CHAR) = 'ev:large')" | tr '\t' ' ')"

# dedupd handler-test compares the outbox too: the same events after both
# passes (ids, keys, headers; the ledger's value carries its entry's
# AUTO_INCREMENT id, which differs by design).
"$DEDUPD" handler-test -c "$ledger_conf" --mysql-socket "$DD_TEST_MYSQL_SOCKET" \
  --ignore-column dedupd_outbox.msg_value "$DD_TEST_SRC_DIR/examples/ledger/messages.jsonl" \
  >"$TB_DIR/htest.out" 2>"$TB_DIR/htest.log" || tb_not_ok "handler-test of the emitting ledger failed"
tb_check "handler-test: the same events after both passes" \
  grep -q '^ok   table dedupd_outbox (ignoring id, msg_value, created): the same 4 row(s) after both passes' \
  "$TB_DIR/htest.out"
tb_done
