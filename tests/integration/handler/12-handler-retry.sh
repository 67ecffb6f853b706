#!/usr/bin/env bash
# 12: a handler that asks for RETRY. The messages before it in the batch are
# committed (in the database and in Kafka) while it is retried; the backoff
# doubles up to retry.backoff_max; the message is applied once when the
# handler finally says OK. With retry.max_attempts set, a message that keeps
# asking is dead-lettered `retries_exhausted` and the partition moves on.
source "$(dirname "$0")/../lib.sh"
tb_init handler_retry
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
export TB_KAFKA_PROPS=auto.commit.interval.ms=200
retry_conf() {
  tb_config "$TB_CONF" "retry = { backoff_initial = \"100ms\"; backoff_max = \"400ms\"; max_attempts = $1; };"
}
retry_conf 0
tb_migrate || tb_die "migrate failed"

# 8 retries at 100, 200, 400, 400, ... ms: about 2.7 s (+-20%); without the
# cap it would be 25.5 s.
printf '0\t-\t%s\n' '{"id":"m0"}' '{"id":"m1"}' '{"id":"m2","th":"retry:8"}' '{"id":"m3"}' |
  tb_produce 2>/dev/null || tb_die "produce failed"
tb_bg run1 "$DEDUPD" run -c "$TB_CONF" --exit-at-end
run1=$TB_LAST_PID
effects_are() { test "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key IN ($1)")" = "$2"; }
committed_is() { test "$(tb_committed)" = "$1"; }
tb_check "m0 and m1 are applied while m2 is retried" tb_wait_until 30 "m0, m1 applied" \
  effects_are "'ev:m0','ev:m1'" 2
tb_eq "m2 and m3 not applied yet" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key IN ('ev:m2','ev:m3')")"
tb_check "offset 2 is committed while m2 is retried" tb_wait_until 10 "committed offset 2" \
  committed_is "0 2"
tb_eq "m2 still not applied" 0 "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key = 'ev:m2'")"
rc=0
wait "$run1" || rc=$?
tb_eq "run exits 0" 0 "$rc"
tb_eq "every effect once" "ev:m0 1
ev:m1 1
ev:m2 1
ev:m3 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY biz_key' | tr '\t' ' ')"
tb_eq "handler asked 8 times" 8 "$(grep -c 'Handler asked to retry' "$TB_DIR/run1.log")"
tb_eq "the summary counts 8 retries" 8 \
  "$(tb_summary_sum retries "$TB_DIR/run1.log")"
# m1 was committed before m2's first call; m2 after the 8 backoffs.
gap=$(tb_sql "SELECT TIMESTAMPDIFF(MICROSECOND, (SELECT updated_at FROM dedup_record WHERE biz_key = 'ev:m1'), (SELECT updated_at FROM dedup_record WHERE biz_key = 'ev:m2')) DIV 1000")
tb_log "m2 applied ${gap} ms after m1"
tb_check "backoff grew exponentially (>= 2000 ms)" test "$gap" -ge 2000
tb_check "backoff is capped by retry.backoff_max (< 6000 ms)" test "$gap" -lt 6000
tb_eq "dedup rows applied, attempts 1" "ev:m0 1 1
ev:m1 1 1
ev:m2 1 1
ev:m3 1 1" "$(tb_sql 'SELECT biz_key, status, attempts FROM dedup_record ORDER BY biz_key' | tr '\t' ' ')"
tb_assert_committed_at_end

# retry.max_attempts = 3: the third RETRY dead-letters the message.
retry_conf 3
printf '0\t-\t%s\n' '{"id":"x0","th":"retry:1000"}' '{"id":"x1"}' | tb_produce 2>/dev/null ||
  tb_die "produce failed"
tb_run || tb_die "run with max_attempts failed"
tb_eq "handler called 3 times" 3 "$(tb_summary retries)"
tb_eq "x0 dead-lettered retries_exhausted" 1 "$(tb_dlq_count retries_exhausted)"
tb_eq "dead letter names x0 at offset 4" "4 ev:x0" "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    h = json.loads(l)["headers"]
    print(h["dedupd.offset"], h.get("dedupd.biz_key"))')"
tb_eq "x0 recorded as failed, x1 applied" "ev:x0 2
ev:x1 1" "$(tb_sql "SELECT biz_key, status FROM dedup_record WHERE biz_key LIKE 'ev:x%' ORDER BY 1" | tr '\t' ' ')"
tb_eq "no effect for x0" "ev:x1 1" \
  "$(tb_sql "SELECT biz_key, n FROM th_effect WHERE biz_key LIKE 'ev:x%'" | tr '\t' ' ')"
tb_assert_committed_at_end
tb_done
