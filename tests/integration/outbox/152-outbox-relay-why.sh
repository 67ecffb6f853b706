#!/usr/bin/env bash
# 152: why the relay's events wait, said right. th_scripted emits 5 events
# to th.events and 3 to missing (a topic the broker reports as not
# existing) with the relay off. Then `dedupd relay` starts while the
# broker is down (outbox.send_timeout 2s): events not taken in time are
# put down to an unreachable cluster, not to a missing topic. With the
# broker back, th.events' go out, and missing's are put down to the topic
# that does not exist; once it does, they go out too.
# End state: every event once on its topic; the relay's log never asks
# whether th.events exists.
source "$(dirname "$0")/../lib.sh"
tb_init outbox_relay_why
tb_mock events:1 th.events:1
tb_mock_ctl "topic-error missing 3"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' tb_config "$TB_CONF" \
  'outbox = { enabled = true; relay = false; poll_interval = "20ms"; send_timeout = "2s"; retry_max = "1s"; };'
tb_migrate || tb_die "migrate failed"
{
  for i in 1 2 3 4 5; do printf '0\t-\t{"id":"e%d","th":"emit_to:th.events"}\n' "$i"; done
  for i in 1 2 3; do printf '0\t-\t{"id":"m%d","th":"emit_to:missing"}\n' "$i"; done
} | tb_produce events 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run failed"

tb_mock_ctl "broker-down 1"
tb_bg relay "$DEDUPD" relay -c "$TB_CONF"
r=$TB_LAST_PID
says() { grep -q "$1" "$TB_DIR/relay.log"; }
tb_check "with the broker down, th.events' events are put down to an unreachable cluster" \
  tb_wait_until 30 "the relay's word on the outage" \
  says 'events to th.events failed (Kafka unreachable: no broker answered a metadata request'
tb_mock_ctl "broker-up 1"
on_topic() { (($("$DDTK" consume -b "$TB_BROKERS" -t "$1" 2>/dev/null | wc -l) >= $2)); }
tb_wait_until 60 "th.events' events published" on_topic th.events 5 || tb_not_ok "th.events' events missing"
tb_check "with the broker back, missing's events are put down to the missing topic" \
  tb_wait_until 30 "the relay's word on missing" says 'events to missing failed (the topic does not exist)'
tb_mock_ctl "topic-error missing 0"
tb_wait_until 60 "missing's events published" on_topic missing 3 || tb_not_ok "missing's events never went out"
tb_stop "$r" || tb_not_ok "the relay did not stop cleanly"
tb_check "the relay never asked whether th.events exists" \
  bash -c "! grep -q 'events to th.events failed (the topic does not exist\|does the topic exist' '$TB_DIR/relay.log'"
tb_eq "every event once on its topic" "5 3" \
  "$(tb_consume th.events | wc -l) $(tb_consume missing | wc -l)"
tb_eq "the outbox is empty" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox')"
tb_done
