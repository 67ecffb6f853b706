#!/usr/bin/env bash
# 18: the dead-letter topic is unavailable. A poison message's offset is not
# stored until its dead letter is acknowledged: the committed offset stays
# below it while the producer cannot deliver (the messages behind it are
# applied in the database meanwhile, but their offsets wait too). The worker
# keeps trying, never skips; once the topic is back the dead letter is there
# and the offsets pass it. Each send gives up after 1.5 s
# (message.timeout.ms), so the failed delivery reports and dedupd's own
# resending are exercised too, not only librdkafka's retries.
source "$(dirname "$0")/../lib.sh"
tb_init dlq_unavailable
tb_mock events:1 events.dlq:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=2 \
  TB_KAFKA_PROPS="auto.commit.interval.ms=200 topic.metadata.refresh.interval.ms=1000 message.timeout.ms=1500" \
  tb_config
tb_migrate || tb_die "migrate failed"

{
  for i in $(seq 0 9); do printf '0\t-\t{"id":%d}\n' "$i"; done
  printf '0\tpoison-key\t{"id":\n'
  for i in $(seq 11 19); do printf '0\t-\t{"id":%d}\n' "$i"; done
} | tb_produce 2>/dev/null || tb_die "produce failed"

tb_mock_ctl "topic-error events.dlq 3" # UNKNOWN_TOPIC_OR_PARTITION
tb_start w
w=$TB_LAST_PID
effects_are() { test "$(tb_sql 'SELECT COUNT(*) FROM th_effect')" = "$1"; }
committed_is() { test "$(tb_committed)" = "$1"; }
tb_check "every good message applied" tb_wait_until 40 "19 effects" effects_are 19
tb_check "offsets up to the poison message committed" tb_wait_until 10 "offset 10" committed_is "0 10"
sleep 3
tb_eq "committed offset still below the poison message" "0 10" "$(tb_committed)"
tb_eq "no dead letter yet" 0 "$(tb_dlq | wc -l)"
# The first send of the dead letter timed out (1.5 s) before the 3 s above.
tb_check "a delivery report failed: dedupd must send the dead letter again" \
  grep -q 'Dead letter to events.dlq was not delivered: Local: Message timed out' "$TB_DIR/w.log"
tb_check "the worker is still running" kill -0 "$w"

tb_mock_ctl "topic-error events.dlq 0"
tb_check "offsets pass the poison message once its dead letter is acked" \
  tb_wait_until 60 "offset 20" committed_is "0 20"
rc=0
tb_stop "$w" || rc=$?
tb_eq "worker stops cleanly" 0 "$rc"
tb_eq "the dead letter is there" "10 poison-key bad_json" "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print(d["headers"]["dedupd.offset"], d["key"], d["headers"]["dedupd.reason"])' | sort -u)"
tb_eq "no effect applied twice" 0 "$(tb_sql 'SELECT COUNT(*) FROM th_effect WHERE n <> 1')"
tb_assert_committed_at_end
tb_done
