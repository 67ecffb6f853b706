#!/usr/bin/env bash
# 11: same business key, different content is a conflict — whether the first
# copy was committed by an earlier run or sits in the same batch — and the
# stored effect is never touched. Re-encoded copies (other field order,
# whitespace, number spelling) are duplicates, never conflicts.
source "$(dirname "$0")/lib.sh"
tb_init conflicts
tb_mock events:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1 \
  TB_BATCH_WAIT_MS=1000 tb_config
tb_migrate || tb_die "migrate failed"

# Run 1: the first copies of a and c.
printf '0\t-\t%s\n' '{"id":"a","v":1.5,"w":"x"}' '{"id":"c","v":3}' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
tb_run || tb_die "first run failed"
tb_eq "run 1 applied a and c" 2 "$(tb_summary applied)"
stored=$(tb_sql 'SELECT biz_key, HEX(request_hash), status, response, koffset FROM dedup_record ORDER BY biz_key')

# Run 2, one batch (offsets 2..7):
printf '0\t-\t%s\n' \
  '{"id":"a","v":2,"w":"x"}' \
  '{ "w" : "x", "v" : 1.50, "id" : "a" }' \
  '{"id":"b","v":1}' \
  '{"id":"b","v":1,"extra":true}' \
  '{"v":1,   "id":"b"}' \
  '{"v":3e0,"id":"c"}' | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "second run failed"

tb_eq "run 2 was one batch" 1 "$(tb_summary batches)"
tb_eq "run 2 applied only b" 1 "$(tb_summary applied)"
tb_eq "run 2 conflicts" 2 "$(tb_summary conflicts)"
tb_eq "run 2 duplicates (re-encoded copies)" 3 "$(tb_summary duplicates)"
tb_eq "each effect applied once" "ev:a 1
ev:b 1
ev:c 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY biz_key' | tr '\t' ' ')"
tb_eq "stored rows of a and c untouched" "$stored" \
  "$(tb_sql "SELECT biz_key, HEX(request_hash), status, response, koffset FROM dedup_record WHERE biz_key <> 'ev:b' ORDER BY biz_key")"
tb_eq "b's row is from its first copy" "1 4" \
  "$(tb_sql "SELECT status, koffset FROM dedup_record WHERE biz_key = 'ev:b'" | tr '\t' ' ')"
tb_eq "conflict dead letters: offset, key header, payload" \
  '2 ev:a {"id":"a","v":2,"w":"x"}
5 ev:b {"id":"b","v":1,"extra":true}' \
  "$(tb_dlq | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    h = d["headers"]
    print(h["dedupd.offset"], h.get("dedupd.biz_key"), d["payload"]) if h["dedupd.reason"] == "conflict" else print("unexpected", h)' | sort -n)"
tb_assert_committed_at_end
tb_done
