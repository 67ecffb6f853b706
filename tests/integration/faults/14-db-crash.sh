#!/usr/bin/env bash
# 14: the database server is killed with SIGKILL in the middle of a run and
# restarted seconds later. While it is down the committed Kafka offsets do
# not move; the worker reconnects, replays its batches and ends with every
# effect exactly once. Batches are small and commit often, so a kill also
# lands between a COMMIT and its answer now and then: the replay resolves
# such a commit through the claim (the rows it finds carry the same hash and
# status applied, so the messages count as duplicates).
#
# Runs on a second private MariaDB in the test dir, never the shared one.
source "$(dirname "$0")/../lib.sh"
tb_init db_crash
tb_private_db

tb_mock events:2
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=2 TB_BATCH_MAX=20 \
  TB_KAFKA_PROPS=auto.commit.interval.ms=200 \
  tb_config "$TB_CONF" 'retry = { backoff_initial = "50ms"; backoff_max = "500ms"; };'
tb_migrate || tb_die "migrate failed"

N=3000
python3 - "$N" >"$TB_DIR/stream.txt" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print("%d\t-\t%s" % (i % 2, json.dumps({"id": i, "th": "sleep:2"})))
PY
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

tb_bg run "$DEDUPD" run -c "$TB_CONF" --exit-at-end
run=$TB_LAST_PID
applied_at_least() { (($(tb_sql 'SELECT COUNT(*) FROM th_effect') >= $1)); }
tb_wait_until 60 "500 effects" applied_at_least 500 || tb_die "the worker did not get going"
tb_private_db_kill9
tb_log "database killed"
sleep 1 # commits already acknowledged may still be stored and committed
before=$(tb_committed) || tb_die "cannot read committed offsets"
sleep 3
during=$(tb_committed) || tb_die "cannot read committed offsets"
tb_eq "committed offsets do not move while the database is down" "$before" "$during"
tb_check "the worker survives the outage" kill -0 "$run"
tb_private_db_restart
tb_log "database restarted"

rc=0
timeout --foreground "$(tb_secs 120)" tail --pid="$run" -f /dev/null || tb_not_ok "run did not finish"
wait "$run" || rc=$?
tb_eq "run exits 0 after the outage" 0 "$rc"
tb_check "the lanes replayed after errors" grep -q 'will replay it' "$TB_DIR/run.log"
tb_check "the lanes reconnected" grep -q 'reconnected to the database' "$TB_DIR/run.log"
tb_eq "every effect applied" "$N" "$(tb_sql 'SELECT COUNT(*) FROM th_effect')"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_eq "one applied dedup row per key" "$N" "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "no other dedup rows" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status <> 1')"
tb_eq "no dead letters" "" "$(tb_dlq_reasons)"
tb_assert_committed_at_end
tb_done
