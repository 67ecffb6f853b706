#!/usr/bin/env bash
# 17: broker trouble during a run on a three-broker cluster: a broker goes
# down and comes back, and requests fail on Fetch (api 1), OffsetCommit
# (api 8) and Produce (api 0, the dead letters). No loss, no effect applied
# twice, every bad message dead-lettered, no crash, and --exit-at-end only
# exits once the offsets are committed at the end.
source "$(dirname "$0")/../lib.sh"
tb_init broker_faults
TB_MOCK_BROKERS=3 tb_mock events:4:3
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=2 TB_BATCH_MAX=20 \
  TB_KAFKA_PROPS=auto.commit.interval.ms=200 \
  tb_config "$TB_CONF" 'retry = { backoff_initial = "50ms"; backoff_max = "500ms"; };'
tb_migrate || tb_die "migrate failed"

N=4000
python3 - "$N" >"$TB_DIR/stream.txt" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print("%d\t-\t%s" % (i % 4, json.dumps({"id": i, "th": "sleep:2"})))
    if i % 100 == 50:
        print("%d\tbad-%d\t{\"no_id\":%d}" % (i % 4, i, i))
PY
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
bad=$(grep -c no_id "$TB_DIR/stream.txt")

# Broker 1 coordinates the group: taking it down also costs the membership
# (the session times out), so the run must rejoin and still commit.
tb_mock_ctl "coordinator group tg 1"
tb_bg run "$DEDUPD" run -c "$TB_CONF" --exit-at-end
run=$TB_LAST_PID
effects_at_least() { (($(tb_sql 'SELECT COUNT(*) FROM th_effect') >= $1)); }
tb_wait_until 60 "300 effects" effects_at_least 300 || tb_die "the worker did not get going"

tb_mock_ctl "broker-down 1"
sleep 7 # longer than session.timeout.ms
tb_mock_ctl "broker-up 1"
tb_mock_ctl "request-errors 1 6 5"  # Fetch: NOT_LEADER_OR_FOLLOWER
tb_mock_ctl "request-errors 8 15 3" # OffsetCommit: COORDINATOR_NOT_AVAILABLE
tb_mock_ctl "request-errors 0 7 4"  # Produce: REQUEST_TIMED_OUT
tb_wait_until 60 "half the effects" effects_at_least $((N / 2)) || true
tb_mock_ctl "request-errors 0 6 3"  # Produce: NOT_LEADER_OR_FOLLOWER
tb_mock_ctl "request-errors 8 16 3" # OffsetCommit: NOT_COORDINATOR
tb_mock_ctl "request-errors 1 7 3"  # Fetch: REQUEST_TIMED_OUT

rc=0
timeout --foreground "$(tb_secs 120)" tail --pid="$run" -f /dev/null || tb_not_ok "run did not finish"
wait "$run" || rc=$?
tb_eq "run exits 0" 0 "$rc"
tb_eq "every effect applied" "$N" "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "one applied dedup row per key" "$N" "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "every bad message dead-lettered" "$bad" "$(tb_dlq_distinct key_missing)"
tb_eq "no other dead letters" "key_missing" "$(tb_dlq_reasons | awk '{ print $1 }')"
tb_assert_committed_at_end
tb_done
