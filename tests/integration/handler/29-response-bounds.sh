#!/usr/bin/env bash
# 28: handler responses are bounded, and statements fit max_allowed_packet.
# 1. One batch of 1000 messages whose responses are 17 KB each: the finish
#    statement would be 17 MB, more than the server's max_allowed_packet
#    (16 MiB), so it is split by size: everything is applied in one
#    transaction, nothing rolled back or replayed.
# 2. A response of 17 MB, above handler.max_response_bytes (default 65536),
#    is a handler error: that message is rejected (dead letter "rejected"
#    naming both sizes, key recorded failed, its writes rolled back), the
#    messages around it are applied, and a restart goes on from there.
# 3. handler.max_response_bytes that max_allowed_packet cannot hold (twice
#    it, escaped) is refused at start, naming both values.
# 4. In external mode the effect happened when act() returns: a response
#    over handler.max_response_bytes is dropped with a warning, not
#    rejected. The key is recorded applied without a response, no dead
#    letter; the others keep theirs.
source "$(dirname "$0")/../lib.sh"
tb_init response_bounds
tb_mock events:1 ext:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1 \
  TB_BATCH_MAX=1000 TB_BATCH_WAIT_MS=3000 tb_config
tb_migrate || tb_die "migrate failed"
packet=$(tb_sql 'SELECT @@max_allowed_packet')
tb_check "max_allowed_packet ($packet) is below 1000 responses of 17 KB" test "$packet" -lt 17000000

python3 -c 'import json
for i in range(1000):
    print("0\t-\t%s" % json.dumps({"id": i, "th": "big:17000"}))' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
TB_RUN_TIMEOUT=90 tb_run || tb_not_ok "run 1 failed"
tb_eq "1000 messages applied" 1000 "$(tb_summary applied)"
tb_eq "in one batch" 1 "$(tb_summary batches)"
tb_eq "no batch rolled back and replayed" 0 "$(tb_summary db_retries)"
tb_eq "1000 responses of 17000 bytes stored" "1000 17000" \
  "$(tb_sql 'SELECT COUNT(*), MIN(LENGTH(response)) FROM dedup_record WHERE status = 1 AND LENGTH(response) = 17000' | tr '\t' ' ')"
tb_eq "1000 effects, each once" "1000 1" "$(tb_sql 'SELECT COUNT(*), MAX(n) FROM th_effect' | tr '\t' ' ')"

{
  printf '0\t-\t{"id":1000}\n'
  printf '0\tbig-key\t{"id":1001,"th":"big:17000000"}\n'
  printf '0\t-\t{"id":1002,"th":"big:65536"}\n'
} | tb_produce 2>/dev/null || tb_die "produce failed"
TB_RUN_TIMEOUT=60 tb_run || tb_not_ok "run 2 failed"
tb_eq "run 2: two applied" 2 "$(tb_summary applied)"
tb_eq "run 2: one rejected" 1 "$(tb_summary dlq_rejected)"
tb_eq "run 2: no batch replayed" 0 "$(tb_summary db_retries)"
tb_eq "a response of exactly the bound is kept" 65536 \
  "$(tb_sql "SELECT LENGTH(response) FROM dedup_record WHERE biz_key = 'ev:1002'")"
tb_eq "the key of the oversized response is recorded failed" 2 \
  "$(tb_sql "SELECT status FROM dedup_record WHERE biz_key = 'ev:1001'")"
tb_eq "its writes were rolled back" 0 "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key = 'ev:1001'")"
tb_eq "the dead letter says the size and the limit" \
  "1001 big-key rejected handler th_scripted returned a response of 17000000 bytes, more than handler.max_response_bytes (65536)" \
  "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    h = d["headers"]
    print(h["dedupd.offset"], d["key"], h["dedupd.reason"], h["dedupd.error"])')"

printf '0\t-\t{"id":1003}\n' | tb_produce 2>/dev/null || tb_die "produce failed"
TB_RUN_TIMEOUT=60 tb_run || tb_not_ok "run 3 (restart) failed"
tb_eq "the restart consumes only the new message" 1 "$(tb_summary messages)"
tb_eq "and applies it" 1 "$(tb_summary applied)"
tb_eq "1003 effects, each once" "1003 1" "$(tb_sql 'SELECT COUNT(*), MAX(n) FROM th_effect' | tr '\t' ' ')"
tb_assert_committed_at_end

# 3. A bound max_allowed_packet cannot hold: refused at start.
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' \
  TB_HANDLER_EXTRA='max_response_bytes = 16777215;' tb_config "$TB_DIR/huge.conf"
rc=0
timeout --foreground "$(tb_secs 60)" "$DEDUPD" run -c "$TB_DIR/huge.conf" --exit-at-end \
  >"$TB_DIR/huge.log" 2>&1 || rc=$?
tb_eq "a bound the server cannot take: exit 1" 1 "$rc"
tb_check "the error names the setting and max_allowed_packet" grep -q \
  "handler.max_response_bytes (16777215) needs statements of up to [0-9]* bytes, but the server's max_allowed_packet is $packet" \
  "$TB_DIR/huge.log"

# 4. External mode: dropped, not rejected.
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_external.so" TB_KEY='${id}' TB_TOPIC=ext TB_GROUP=gext \
  TB_DEDUP_EXTRA='table = "dedup_ext";' TB_HANDLER_EXTRA='max_response_bytes = 64;' \
  tb_config "$TB_DIR/ext.conf"
tb_migrate || tb_die "migrate (external) failed"
printf '0\t-\t{"id":"big"}\n0\t-\t{"id":"ok"}\n' | tb_produce ext 2>/dev/null || tb_die "produce failed"
TB_RUN_TIMEOUT=60 tb_run || tb_not_ok "run 4 (external) failed"
tb_eq "external: both applied" 2 "$(tb_summary applied)"
tb_eq "external: no dead letter" 0 "$(tb_summary dlq_rejected)"
tb_eq "the oversized response is dropped, the key recorded applied" "1 NULL" \
  "$(tb_sql "SELECT status, COALESCE(response, 'NULL') FROM dedup_ext WHERE biz_key = 'big'" | tr '\t' ' ')"
tb_eq "a response within the bound is kept" '1 {"fence":1}' \
  "$(tb_sql "SELECT status, response FROM dedup_ext WHERE biz_key = 'ok'" | tr '\t' ' ')"
tb_check "the warning names both sizes" grep -q \
  "returned a response of 200 bytes, more than handler.max_response_bytes (64); not stored" \
  "$TB_DIR/run.log"
tb_done
