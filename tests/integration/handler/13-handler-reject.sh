#!/usr/bin/env bash
# 13: a handler REJECT rolls back to the message's savepoint (the rest of the
# batch is applied), records the key as failed (status 2) with the error and
# dead-letters the message `rejected`; several failures in one batch are
# each rolled back to their own savepoint. A later copy with the same content runs
# the handler again when dedup.retry_failed is true, and is dead-lettered
# "previously rejected" without calling the handler when it is false. A
# handler that COMMITs the claim transaction itself stops dedupd.
source "$(dirname "$0")/../lib.sh"
tb_init handler_reject
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
export TB_BATCH_WAIT_MS=500
conf() {
  TB_DEDUP_EXTRA="retry_failed = $1;" tb_config "$TB_CONF" \
    'retry = { backoff_initial = "20ms"; backoff_max = "50ms"; max_attempts = 1; };'
}
produce() { printf '0\t-\t%s\n' "$@" | tb_produce 2>/dev/null || tb_die "produce failed"; }
row() { tb_sql "SELECT status, attempts, error FROM dedup_record WHERE biz_key = 'ev:$1'" | tr '\t' ' '; }
row_is() { test "$(row "$1")" = "$2"; }
# dead letters as "offset reason error", by offset
letters() {
  tb_dlq | python3 -c '
import json, sys
rows = []
for l in sys.stdin:
    h = json.loads(l)["headers"]
    rows.append((int(h["dedupd.offset"]), h["dedupd.reason"], h["dedupd.error"]))
for r in sorted(rows):
    print(*r)'
}
conf true
tb_migrate || tb_die "migrate failed"

# Run 1, one batch: a rejected message and a copy of it between good ones.
produce '{"id":"a"}' '{"id":"r","th":"reject"}' '{"id":"b"}' '{"id":"r","th":"reject"}'
tb_run || tb_die "run 1 failed"
tb_eq "run 1 was one batch" 1 "$(tb_summary batches)"
tb_eq "a and b applied, r not" "ev:a 1
ev:b 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY 1' | tr '\t' ' ')"
tb_eq "r recorded as failed with the error" "2 1 scripted reject" "$(row r)"
tb_eq "both copies dead-lettered rejected" "1 rejected scripted reject
3 rejected copy of a rejected message: scripted reject" "$(letters)"
tb_assert_committed_at_end

# Run 2, retry_failed = true, max_attempts = 1 (one RETRY fails the key).
tb_start run2
run2=$TB_LAST_PID
produce '{"th":"reject", "id":"r"}'
tb_check "the re-encoded copy of r ran the handler again" tb_wait_until 30 "r attempts 2" \
  row_is r "2 2 scripted reject"
produce '{"id":"s","th":"retry:1"}'
tb_check "s failed after max_attempts" tb_wait_until 20 "s failed" \
  row_is s "2 1 gave up after retries: scripted retry"
produce '{"id":"s","th":"retry:1"}'
tb_check "the later copy of s ran the handler and applied it" tb_wait_until 20 "s applied" \
  row_is s "1 2 NULL"
rc=0
tb_stop "$run2" || rc=$?
tb_eq "run 2 stopped cleanly" 0 "$rc"
tb_eq "s applied once" 1 "$(tb_sql "SELECT n FROM th_effect WHERE biz_key = 'ev:s'")"

# Run 3, retry_failed = false: copies of failed keys are not retried.
conf false
produce '{"id":"r","th":"reject"}' '{"id":"t","th":"reject"}' '{"id":"t","th":"reject"}' \
  '{"id":"s","th":"retry:1"}' '{"id":"c"}'
tb_run || tb_die "run 3 failed"
tb_eq "r not retried: row unchanged" "2 2 scripted reject" "$(row r)"
tb_eq "t rejected once by the handler" "2 1 scripted reject" "$(row t)"
tb_eq "s is a duplicate, c applied" "1 1" "$(tb_summary duplicates) $(tb_summary applied)"
tb_eq "dead letters" "1 rejected scripted reject
3 rejected copy of a rejected message: scripted reject
4 rejected scripted reject
5 retries_exhausted gave up after retries: scripted retry
7 rejected previously rejected: scripted reject
8 rejected scripted reject
9 rejected copy of a rejected message: scripted reject" "$(letters)"
tb_eq "effects" "ev:a 1
ev:b 1
ev:c 1
ev:s 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY 1' | tr '\t' ' ')"
tb_assert_committed_at_end

# Run 4: several failures in one batch. The first REJECT sends the batch
# back to run with a savepoint per message; u2 and w then fail inside their
# savepoints. "reject" and "retry:N" write their effect before they fail, so
# an effect of u1, u2 or w in th_effect means a rollback was skipped.
produce '{"id":"u1","th":"reject"}' '{"id":"d"}' '{"id":"u2","th":"reject"}' \
  '{"id":"w","th":"retry:1"}' '{"id":"e"}'
tb_run || tb_die "run 4 failed"
tb_eq "run 4 was one batch" 1 "$(tb_summary batches)"
tb_eq "u1, u2 and w failed, d and e applied" "ev:d 1
ev:e 1
ev:u1 2
ev:u2 2
ev:w 2" "$(tb_sql "SELECT biz_key, status FROM dedup_record WHERE biz_key IN ('ev:u1','ev:d','ev:u2','ev:w','ev:e') ORDER BY 1" | tr '\t' ' ')"
tb_eq "only d and e have effects: the failed writes were rolled back" "ev:d 1
ev:e 1" "$(tb_sql "SELECT biz_key, n FROM th_effect WHERE biz_key IN ('ev:u1','ev:d','ev:u2','ev:w','ev:e') ORDER BY 1" | tr '\t' ' ')"
tb_eq "run 4's dead letters" "12 rejected scripted reject
14 rejected scripted reject
15 retries_exhausted gave up after retries: scripted retry" "$(letters | awk '$1 >= 12')"
tb_assert_committed_at_end

# A handler that COMMITs inside the claim transaction is a bug: dedupd stops
# with exit 1 and does not move the offset past that message.
produce '{"id":"z","th":"commit"}'
rc=0
tb_run >/dev/null || rc=$?
tb_eq "a handler that commits stops dedupd" 1 "$rc"
tb_check "the log names the handler bug" grep -q 'ended the transaction.*handler bug' "$TB_DIR/run.log"
tb_eq "the offset does not pass it (z is at 17)" "0 17" "$(tb_committed)"
tb_done
