#!/usr/bin/env bash
# 105: a redrive killed with SIGKILL and started again applies every dead
# letter exactly once. 400 dead letters of keys without a row (their
# messages' claims were never recorded) are redriven at --rate 100; the
# redrive is killed once a hundred are applied. Its group has committed
# part of the way (progress is tracked), never past a letter whose outcome
# is not committed; the second redrive starts there, finds what the first
# applied after its last commit applied (duplicates), applies the rest, and
# every key has its effect once.
source "$(dirname "$0")/../lib.sh"
tb_init redrive_kill9
tb_mock events:1 events.dlq:2
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
tb_config
tb_migrate || tb_die "migrate failed"
DLQ=events.dlq
N=400

for i in $(seq 1 $N); do printf '%d\t-\t{"id":"k%d"}\n' $((i % 2)) "$i"; done |
  "$DDTK" produce -b "$TB_BROKERS" -t "$DLQ" -H dedupd.reason=rejected -H dedupd.topic=events \
    -H dedupd.partition=0 -H dedupd.offset=0 2>/dev/null || tb_die "produce failed"
effects() { tb_sql "SELECT COUNT(*) FROM th_effect"; }
at_least() { (($(effects) >= $1)); }

tb_bg first "$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --rate 100 --report /dev/null
first=$TB_LAST_PID
tb_check "the first redrive applies a hundred" tb_wait_until 60 "100 effects" at_least 100
tb_kill9 "$first"
applied=$(effects)
committed=$(tb_committed tg.redrive "$DLQ" | awk '$2 > 0 { s += $2 } END { print s + 0 }')
tb_log "killed after $applied effects, $committed letters committed"
tb_check "the redrive was killed before the end ($applied < $N)" test "$applied" -lt "$N"
tb_check "its progress was committed ($committed > 0)" test "$committed" -gt 0
tb_check "never past an outcome not committed ($committed <= $applied)" test "$committed" -le "$applied"

"$DEDUPD" redrive -c "$TB_CONF" --from-dlq "$DLQ" --report "$TB_DIR/second.json" \
  2>"$TB_DIR/second.log" || tb_die "second redrive failed (see second.log)"
rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
tb_eq "the second redrive reads from the committed progress" $((N - committed)) \
  "$(rj "$TB_DIR/second.json" 'r["summary"]["letters"]')"
tb_eq "it applies the rest" $((N - applied)) "$(rj "$TB_DIR/second.json" 'r["summary"]["applied"]')"
tb_eq "what the first applied after its last commit is a duplicate" $((applied - committed)) \
  "$(rj "$TB_DIR/second.json" 'r["summary"]["duplicate"]')"
tb_eq "every key applied once" "$N 1 1" "$(tb_sql 'SELECT COUNT(*), MIN(n), MAX(n) FROM th_effect' | tr '\t' ' ')"
tb_eq "every dedup row applied" "$N" "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_assert_committed_at_end tg.redrive "$DLQ"
tb_done
