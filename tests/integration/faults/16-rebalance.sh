#!/usr/bin/env bash
# 16: rebalances under load. Workers of one group join (two, then three),
# one is killed with SIGKILL, one leaves with SIGTERM, while offset commits
# fail with REBALANCE_IN_PROGRESS (27) and ILLEGAL_GENERATION (22). Every
# effect is applied exactly once, the group ends committed at the end of every
# partition, and a committed offset never goes backwards (a worker that lost
# a partition never commits a stale offset for it).
source "$(dirname "$0")/../lib.sh"
tb_init rebalance
tb_mock events:6
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=2 TB_BATCH_MAX=20 \
  TB_KAFKA_PROPS=auto.commit.interval.ms=300 \
  tb_config "$TB_CONF" 'retry = { backoff_initial = "50ms"; backoff_max = "500ms"; };'
tb_migrate || tb_die "migrate failed"

PHASE=2500
next_id=0
# produce_phase: PHASE new keys over 6 partitions, a third of them twice
# (the copy on another partition), each handler call taking 1 ms.
produce_phase() {
  python3 - "$next_id" "$PHASE" <<'PY' | tb_produce 2>/dev/null || tb_die "produce failed"
import json, sys
start, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(start, start + n):
    doc = json.dumps({"id": i, "th": "sleep:1"})
    print("%d\t-\t%s" % (i % 6, doc))
    if i % 3 == 0:
        print("%d\t-\t%s" % ((i + 1) % 6, doc))
PY
  next_id=$((next_id + PHASE))
}
effects() { tb_sql 'SELECT COUNT(*) FROM th_effect'; }
effects_at_least() { (($(effects) >= $1)); }
assigned_in() { grep -c 'Assigned events' "$TB_DIR/$1.log" || true; }
# wait_assigned NAME N: the worker's log shows at least N partition assignments.
wait_assigned() {
  local want="$2"
  more_assigned() { (($(assigned_in "$1") >= want)); }
  tb_wait_until 40 "$1 assigned" more_assigned "$1" || tb_die "$1 was not assigned partitions"
}

# Committed offsets sampled all along: they must never go backwards.
sample_committed() {
  while :; do
    tb_committed 2>/dev/null | sed "s/^/$(date +%s.%N) /" >>"$TB_DIR/committed.samples" || true
    sleep 0.3
  done
}
tb_bg sampler sample_committed

produce_phase
tb_start w1
w1=$TB_LAST_PID
tb_wait_until 40 "w1 applies" effects_at_least 300 || tb_die "w1 does not apply"

# w2 joins while w1 is busy; commits fail during the rebalance.
produce_phase
tb_mock_ctl "request-errors 8 27 4"
tb_start w2
w2=$TB_LAST_PID
wait_assigned w2 1
tb_mock_ctl "request-errors 8 22 2"
tb_wait_until 40 "phase 2" effects_at_least $((PHASE * 2 - 800)) || tb_die "no progress with two workers"

# w3 joins: three workers.
produce_phase
tb_start w3
w3=$TB_LAST_PID
wait_assigned w3 1
tb_wait_until 40 "three workers apply" effects_at_least $((PHASE * 3 - 800)) || true

# w2 is killed: its partitions move after the session timeout.
produce_phase
tb_kill9 "$w2"
tb_log "w2 killed"
w1_before=$(assigned_in w1)
wait_assigned w1 $((w1_before + 1))

# w3 leaves cleanly while w1 takes everything back.
produce_phase
tb_mock_ctl "request-errors 8 27 2"
rc=0
tb_stop "$w3" || rc=$?
tb_eq "w3 leaves with exit 0" 0 "$rc"
total=$((PHASE * 5))
tb_check "every key applied" tb_wait_until 90 "$total effects" effects_at_least "$total"
at_end() { [[ "$(tb_committed | awk '{ print $1, $2 }')" == "$(tb_watermarks | awk '{ print $1, $3 }')" ]]; }
tb_wait_until 30 "w1 commits at the end" at_end || true
rc=0
tb_stop "$w1" || rc=$?
tb_eq "w1 stops with exit 0" 0 "$rc"

tb_eq "one effect per key" "$total" "$(effects)"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "one applied dedup row per key" "$total" \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "no other dedup rows" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status <> 1')"
tb_check "commit failures were seen" grep -qE 'Offset commit.*(rebalance|generation)' \
  "$TB_DIR/w1.log" "$TB_DIR/w2.log" "$TB_DIR/w3.log"
tb_eq "no offset stored for a partition no longer assigned" 0 \
  "$(cat "$TB_DIR"/w[123].log | grep -c 'not stored for' || true)"
tb_eq "committed offsets never went backwards" ok "$(awk '
  { k = $2; if ((k in last) && $3 < last[k]) { printf "p%s %s -> %s at %s; ", k, last[k], $3, $1; bad = 1 } last[k] = $3 }
  END { if (!bad) print "ok" }' "$TB_DIR/committed.samples")"
tb_assert_committed_at_end
tb_done
