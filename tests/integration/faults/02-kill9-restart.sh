#!/usr/bin/env bash
# 02: the worker is killed with SIGKILL at random moments and restarted until
# it finishes. Still exactly once, nothing missing: the database, not the
# offsets, recognises what was already applied.
source "$(dirname "$0")/../lib.sh"
tb_init kill9_restart
tb_mock payments:4
TB_WORKERS=4 TB_BATCH_MAX=10 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 5000 --dup-min 1 --dup-max 4 --partitions 4 --bad 20 --conflicts 10 --seed 11
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

RANDOM=42
kills=0
applied() { tb_sql 'SELECT COUNT(*) FROM dedup_record'; }
for round in $(seq 1 6); do
  # Kill at a random point of progress: once 40-300 more keys than before
  # are committed (small batches make progress gradual), wherever that is.
  target=$(($(applied) + 40 + RANDOM % 260))
  tb_bg "run$round" "$DEDUPD" run -c "$TB_CONF" --exit-at-end
  pid=$TB_LAST_PID
  while kill -0 "$pid" 2>/dev/null && (($(applied) < target)); do sleep 0.02; done
  sleep "0.0$((RANDOM % 10))" # land anywhere in the lanes' next transactions
  if kill -0 "$pid" 2>/dev/null; then
    tb_kill9 "$pid"
    kills=$((kills + 1))
    tb_log "round $round: killed at $(applied) dedup rows (target $target)"
  else
    wait "$pid" 2>/dev/null && break
  fi
done
tb_log "killed the worker $kills time(s)"
tb_check "worker was killed at least three times ($kills)" test "$kills" -ge 3
tb_run || tb_die "final run failed"

tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "dedup rows processing" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 0')"
exp_rows=$(tb_expect_get dedup_rows.applied)
tb_eq "one applied dedup row per key" "$exp_rows" \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
# Dead letters are at least once: a kill between the ack and the offset
# commit sends one again. Every bad message must be there at least once.
for reason in bad_json key_missing key_too_long conflict; do
  tb_eq "distinct dead letters $reason" "$(tb_expect_get "dead_letters.$reason")" \
    "$(tb_dlq_distinct "$reason")"
done
tb_assert_committed_at_end
tb_done
