#!/usr/bin/env bash
# 126: an event that commits after later ids were read. Two lanes (lane
# keys a and b) emit to th.events: lane a's first batch emits an event with
# Kafka key K, then its second message (batches of two, waited for up to
# 3 s, longer than a fetch from the slow broker, so the two always share
# a batch even when they reach the worker in separate fetches) holds the
# transaction open 2 s; its next batch emits again with
# key K. Lane b commits an event (key L) every 100 ms meanwhile. Once the
# stream is produced the broker answers slowly (1 s) and the relay reads
# one event at a time, so it reads full batches behind lane b, past the id
# of a's first event before that commits, and comes to a's second while
# lane b's are still pending.
# End state: every event on th.events, and K's events in the order they
# were emitted, a's first before its second: both come from lane a, whose
# transactions follow one another, which is what the order of a key's
# events is promised for (docs/GUARANTEES.md, "Events out"; events of one
# key from two lanes at once have no order).
source "$(dirname "$0")/../lib.sh"
tb_init outbox_late_commit
tb_mock events:2 th.events:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${lane}:${id}' TB_WORKERS=2 \
  TB_BATCH_MAX=2 TB_BATCH_WAIT_MS=3000 TB_DEDUP_EXTRA='lane_key = "${lane}";' tb_config "$TB_CONF" \
  'outbox = { enabled = true; batch = 1; inflight = 4; poll_interval = "20ms"; };'
tb_migrate || tb_die "migrate failed"
msg() { printf '%s\t-\t{"lane":"%s","id":"%s","th":"%s"}\n' "$@"; }
events() { "$DDTK" consume -b "$TB_BROKERS" -t th.events 2>/dev/null | wc -l; }
at_least() { (($(events) >= $1)); }

tb_start w
w=$TB_LAST_PID
# The consumer and its relay at work first. The stream is produced while
# the broker is fast, so the consumer fetches it whole and lane a's first
# batch holds both a1 and the hold; then the broker turns slow.
msg 0 a 0 emit_as:W:0 | tb_produce events 2>/dev/null || tb_die "produce failed"
tb_wait_until 60 "the first event published" at_least 1 || tb_die "nothing published"
{
  msg 0 a 1 emit_as:K:0
  msg 0 a hold sleep:2000
  msg 0 a 2 emit_as:K:0
  for i in $(seq 1 40); do msg 1 b "$i" emit_as:L:100; done
} >"$TB_DIR/stream.tsv"
tb_produce events <"$TB_DIR/stream.tsv" 2>/dev/null || tb_die "produce failed"
tb_mock_ctl "rtt 1 1000"
tb_wait_until 120 "every event published" at_least 43 || tb_die "the events were not all published"
tb_mock_ctl "rtt 1 0"
opened=$(tb_sql "SELECT COUNT(*) FROM dedup_record b JOIN dedup_record a ON a.biz_key = 'ev:a:1'
  WHERE b.biz_key LIKE 'ev:b:%' AND b.created_at < a.created_at")
tb_check "lane b committed events while lane a's first batch was open ($opened)" test "$opened" -ge 2
together=$(tb_sql "SELECT COUNT(*) FROM dedup_record a JOIN dedup_record h ON h.biz_key = 'ev:a:hold'
  WHERE a.biz_key = 'ev:a:1' AND a.created_at = h.created_at")
tb_eq "a's first event and the hold committed in one batch" 1 "$together"
"$DDTK" consume -b "$TB_BROKERS" -t th.events >"$TB_DIR/out.jsonl" || tb_die "consume failed"
order=$(python3 - "$TB_DIR/out.jsonl" <<'PY'
import json, sys
seen = []
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("key") == "K":
        k = json.loads(m["payload"])["key"]
        if k not in seen:
            seen.append(k)
print(" ".join(seen))
PY
)
tb_eq "key K's events (one lane's) in the order they were emitted" "ev:a:1 ev:a:2" "$order"
ids=$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox")
tb_eq "the outbox is empty" 0 "$ids"
rc=0
tb_stop "$w" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
tb_done
