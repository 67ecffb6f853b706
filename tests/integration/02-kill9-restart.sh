#!/usr/bin/env bash
# 02: the worker is killed with SIGKILL at random moments and restarted until
# it finishes. Still exactly once, nothing missing: the database, not the
# offsets, recognises what was already applied.
source "$(dirname "$0")/lib.sh"
tb_init kill9_restart
tb_mock payments:4
TB_WORKERS=4 TB_BATCH_MAX=20 TB_KAFKA_PROPS=auto.commit.interval.ms=200 tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 1600 --dup-min 1 --dup-max 4 --partitions 4 --bad 20 --conflicts 10 --seed 11
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

RANDOM=42
kills=0
for round in $(seq 1 6); do
  tb_bg "run$round" "$DEDUPD" run -c "$TB_CONF" --exit-at-end
  pid=$TB_LAST_PID
  # Wait for the assignment (a rejoin after a kill takes a session timeout),
  # then kill it mid-flight at a random moment.
  tb_wait_until 60 "assignment in round $round" grep -q "Assigned [0-9]* partition" \
    "$TB_DIR/run$round.log" || true
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.05 + (r % 900) / 1000 }')"
  if kill -0 "$pid" 2>/dev/null; then
    tb_kill9 "$pid"
    kills=$((kills + 1))
  else
    wait "$pid" 2>/dev/null && break
  fi
done
tb_log "killed the worker $kills time(s)"
tb_check "worker was killed at least twice" test "$kills" -ge 2
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
