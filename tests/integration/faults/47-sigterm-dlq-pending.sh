#!/usr/bin/env bash
# 29: SIGTERM while a dead letter cannot be delivered (the dead-letter topic
# refuses produce). dedupd waits shutdown_timeout for the acknowledgement,
# then gives the dead letter up: it exits 0 soon after, says what it
# abandoned (the last line is not "Stopped cleanly."), and the poison
# message's offset is not committed. Once the topic is back, a restart
# consumes the poison message again and its dead letter arrives.
source "$(dirname "$0")/../lib.sh"
tb_init sigterm_dlq_pending
tb_mock events:1 events.dlq:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' \
  TB_KAFKA_PROPS="auto.commit.interval.ms=200 topic.metadata.refresh.interval.ms=1000" \
  tb_config "$TB_CONF" 'shutdown_timeout = "3s";'
tb_migrate || tb_die "migrate failed"

{
  for i in $(seq 0 4); do printf '0\t-\t{"id":%d}\n' "$i"; done
  printf '0\tpoison-key\t{"id":\n'
  for i in $(seq 6 9); do printf '0\t-\t{"id":%d}\n' "$i"; done
} | tb_produce 2>/dev/null || tb_die "produce failed"

tb_mock_ctl "topic-error events.dlq 3" # UNKNOWN_TOPIC_OR_PARTITION
tb_start w
w=$TB_LAST_PID
effects_are() { test "$(tb_sql 'SELECT COUNT(*) FROM th_effect')" = "$1"; }
committed_is() { test "$(tb_committed)" = "$1"; }
tb_check "every good message applied" tb_wait_until 40 "9 effects" effects_are 9
tb_check "offsets up to the poison message committed" tb_wait_until 10 "offset 5" committed_is "0 5"

rc=0
start=$(date +%s)
kill -TERM "$w"
# shutdown_timeout (3 s) for the dead letter, then at most 5 s for the last
# commit and 10 s for leaving the group: well within 25 s.
timeout --foreground "$(tb_secs 25)" tail --pid="$w" -f /dev/null || {
  tb_not_ok "dedupd did not exit within 25 s of SIGTERM"
  kill -KILL "$w" 2>/dev/null || true
}
wait "$w" 2>/dev/null || rc=$?
took=$(($(date +%s) - start))
tb_eq "SIGTERM with a dead letter pending: exit 0" 0 "$rc"
tb_check "stopped within shutdown_timeout and the commit and close allowance (${took}s)" \
  test "$took" -le "$(tb_secs 20)"
tb_check "the shutdown says which dead letter it gave up" \
  grep -q 'events \[0\]: 1 dead letter(s) not acknowledged, the first for offset 5; the offset committed stays at 5' "$TB_DIR/w.log"
last=$(grep -v '^summary ' "$TB_DIR/w.log" | tail -n 1)
tb_check "the last line says a message was abandoned, not 'Stopped cleanly.' ($last)" \
  grep -q 'Stopped, abandoning 1 message(s) (1 of them waiting for their dead letter' <<<"$last"
tb_eq "the poison message's offset is not committed" "0 5" "$(tb_committed)"
tb_eq "no dead letter yet" 0 "$(tb_dlq | wc -l)"

tb_mock_ctl "topic-error events.dlq 0"
TB_RUN_TIMEOUT=60 tb_run || tb_die "restart failed"
tb_eq "restart consumes the poison message and the rest again" 5 "$(tb_summary messages)"
tb_eq "restart dead-letters the poison message" 1 "$(tb_summary dlq_bad_json)"
tb_eq "the dead letter is there" "5 poison-key bad_json" "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print(d["headers"]["dedupd.offset"], d["key"], d["headers"]["dedupd.reason"])' | sort -u)"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_assert_committed_at_end
tb_done
