#!/usr/bin/env bash
# 106: conventions of the Kafka world. With kafka.tombstones = "skip" a
# tombstone (null value) runs nothing, is counted in
# dedupd_tombstones_skipped_total and its offset is committed; with
# "dead_letter" it is dead-lettered `tombstone`, never `bad_json`. A dead
# letter keeps its message's timestamp, and with dlq.connect_headers also
# carries Kafka Connect's __connect.errors.* headers. dedupd_consumer_lag
# names the consumer group.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init kafka_conventions
tb_mock events:1
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_WORKERS=1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
export TB_KAFKA_EXTRA='tombstones = "skip";'
tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" 'dlq = { connect_headers = true; };'
tb_migrate || tb_die "migrate failed"
TS=1700000000123

printf '0\t-\t%s\n' '{"id":"a"}' 'null:' '{bad' '{"id":"b"}' 'null:' |
  "$DDTK" produce -b "$TB_BROKERS" -t events -T "$TS" 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
_done() { th_scrape; [[ "$(th_metric 'dedupd_tombstones_skipped_total{route="default"}')" == 2 && "$(th_metric dedupd_inflight_messages)" == 0 ]]; }
tb_check "two tombstones skipped (dedupd_tombstones_skipped_total)" tb_wait_until 60 "tombstones counted" _done
_lag() { th_scrape; grep -q '^dedupd_consumer_lag{group="tg",topic="events",partition="0"} 0$' "$TB_DIR/metrics.txt"; }
tb_check "dedupd_consumer_lag names the group" tb_wait_until 20 "lag 0 with the group" _lag
tb_stop "$pid" || tb_not_ok "run exited non-zero"
tb_eq "a and b applied, nothing else" "ev:a 1
ev:b 1" "$(tb_sql 'SELECT biz_key, n FROM th_effect ORDER BY 1' | tr '\t' ' ')"
tb_eq "one dead letter: the bad JSON, not the tombstones" "bad_json 1" "$(tb_dlq_reasons)"
tb_assert_committed_at_end
letter=$(tb_dlq | head -n 1)
field() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$letter" "$1"; }
tb_eq "the dead letter keeps its message's timestamp" "$TS" "$(field 'd["timestamp"]')"
tb_eq "Kafka Connect's headers" "events 0 2 tg 0 VALUE_CONVERTER dedupd dedupd.bad_json" \
  "$(field '" ".join(d["headers"]["__connect.errors." + n] for n in ("topic","partition","offset","connector.name","task.id","stage","class.name","exception.class.name"))')"
tb_check "Connect's exception.message is the error" \
  test -n "$(field 'd["headers"]["__connect.errors.exception.message"]')"
tb_eq "dedupd's own headers as before" "bad_json events 0 2" \
  "$(field '" ".join(d["headers"]["dedupd." + n] for n in ("reason","topic","partition","offset"))')"

# dead_letter (the default), without Connect's headers
export TB_KAFKA_EXTRA=''
tb_config
printf '0\t-\t%s\n' 'null:' '' '{"id":"c"}' | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run with tombstones = dead_letter failed"
tb_eq "the tombstone is dead-lettered tombstone (an empty value is bad JSON)" "bad_json 2
tombstone 1" "$(tb_dlq_reasons)"
tb_eq "the summary counts it" 1 "$(tb_summary dlq_tombstone)"
tb_eq "no Connect headers without the setting" "[]" \
  "$(tb_dlq | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    if d["headers"]["dedupd.reason"] == "tombstone":
        print([h for h in d["headers"] if h.startswith("__connect")])')"
tb_assert_committed_at_end
tb_done
