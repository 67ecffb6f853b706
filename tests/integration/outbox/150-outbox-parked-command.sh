#!/usr/bin/env bash
# 150: `dedupd outbox list|requeue|drop`, the operator's side of parked
# events. th_scripted emits 3 events to "denied" and 2 to "other" with the
# relay off; the broker then refuses every produce request (topic
# authorization), so `dedupd relay` parks all 5. list shows them and
# filters them; requeue and drop refuse to act without a filter; requeue
# --topic other hands other's 2 back, and once the broker takes produce
# requests again a relay sends them; drop --id and drop --event-id delete
# two of denied's. Filters that are not what they say are usage errors.
# End state: other's 2 events on their topic, with the ids they were
# parked with; one parked event left (denied's third), listed with its
# error; nothing on denied.
source "$(dirname "$0")/../lib.sh"
tb_init outbox_parked_command
tb_mock events:1 denied:1 other:1
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' tb_config "$TB_CONF" \
  'outbox = { enabled = true; relay = false; poll_interval = "20ms"; };'
tb_migrate || tb_die "migrate failed"
{
  for i in 1 2 3; do printf '0\t-\t{"id":"d%d","th":"emit_to:denied"}\n' "$i"; done
  for i in 1 2; do printf '0\t-\t{"id":"o%d","th":"emit_to:other"}\n' "$i"; done
} | tb_produce events 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run failed"
tb_mock_ctl "request-errors 0 29 100"
timeout --foreground "$(tb_secs 30)" "$DEDUPD" relay -c "$TB_CONF" --until-empty \
  >"$TB_DIR/relay1.out" 2>"$TB_DIR/relay1.log" || tb_die "the relay failed"
tb_mock_ctl "clear-errors 0"
tb_eq "the 5 events parked" 5 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox WHERE state = 1')"

ob() { "$DEDUPD" outbox "$@" -c "$TB_CONF" 2>>"$TB_DIR/outbox.log"; }
rows() { tail -n +2 | grep -v ' event(s) ' | cut -f 5 | sort | uniq -c | awk '{ print $2 "=" $1 }' | paste -sd' '; }
ob list >"$TB_DIR/list1.out" || tb_not_ok "list failed"
tb_eq "list: the parked events, by topic" "denied=3 other=2" "$(rows <"$TB_DIR/list1.out")"
tb_eq "list: its header" "shard	id	state	created	topic	event_id	key_bytes	value_bytes	error" \
  "$(head -n 1 "$TB_DIR/list1.out")"
tb_check "list: each with the broker's error" \
  bash -c "tail -n +2 '$TB_DIR/list1.out' | grep -v 'event(s)' | cut -f 9 | grep -cx 'Broker: Topic authorization failed' | grep -qx 5"
tb_eq "list: the last line counts them" "5 event(s) listed" "$(tail -n 1 "$TB_DIR/list1.out")"
tb_eq "list --topic --error" "other=2" "$(ob list --topic other --error 'authorization' | rows)"
tb_eq "list --state pending: none" "0 event(s) listed" "$(ob list --state pending | tail -n 1)"

rc=0
ob requeue >/dev/null 2>&1 || rc=$?
tb_eq "requeue without a filter: usage error" 2 "$rc"
tb_check "... saying why" grep -q 'requeue and drop need a filter' "$TB_DIR/outbox.log"
for bad in "--state pending" "--event-id ZZ" "--id 5-2" "--topic a/b" "--limit 0"; do
  rc=0
  # shellcheck disable=SC2086 # the option and its value are two words
  ob requeue $bad >/dev/null 2>&1 || rc=$?
  tb_eq "requeue $bad: usage error" 2 "$rc"
done
tb_eq "nothing changed meanwhile" 5 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox WHERE state = 1')"

other_ids=$(tb_sql "SELECT event_id FROM dedupd_outbox WHERE topic = 'other' ORDER BY event_id" | paste -sd' ')
ob requeue --topic other >"$TB_DIR/requeue.out" || tb_not_ok "requeue failed"
tb_eq "requeue prints each event first" "other=2" "$(rows <"$TB_DIR/requeue.out")"
tb_eq "... and counts them" "2 event(s) re-queued" "$(tail -n 1 "$TB_DIR/requeue.out")"
tb_eq "other's events are pending again, without their error" "2 0" \
  "$(tb_sql "SELECT COUNT(*), COUNT(error) FROM dedupd_outbox WHERE topic = 'other' AND state = 0" | tr '\t' ' ')"
timeout --foreground "$(tb_secs 30)" "$DEDUPD" relay -c "$TB_CONF" --until-empty \
  >"$TB_DIR/relay2.out" 2>"$TB_DIR/relay2.log" || tb_die "the second relay failed"
tb_check "the relay sends the re-queued events" grep -q '^relay sent=2 parked=0 ' "$TB_DIR/relay2.out"
tb_eq "other's events on their topic, with the ids they were parked with" "$other_ids" \
  "$(tb_consume other | python3 -c '
import json, sys
print(" ".join(sorted(json.loads(l)["headers"]["dedupd.event_id"] for l in sys.stdin if l.strip())))')"

first=$(tb_sql "SELECT id FROM dedupd_outbox WHERE topic = 'denied' ORDER BY id LIMIT 1")
second=$(tb_sql "SELECT event_id FROM dedupd_outbox WHERE topic = 'denied' ORDER BY id LIMIT 1, 1")
tb_eq "drop --id" "1 event(s) dropped" "$(ob drop --id "$first" | tail -n 1)"
tb_eq "drop --event-id" "1 event(s) dropped" "$(ob drop --event-id "$second" | tail -n 1)"
tb_eq "drop of an event already dropped: none" "0 event(s) dropped" "$(ob drop --id "$first" | tail -n 1)"
tb_eq "one parked event left, denied's third" "denied=1" "$(ob list --state all | rows)"
tb_check "the log says what was dropped" grep -q 'dedupd outbox: 1 parked event(s) dropped' "$TB_DIR/outbox.log"
tb_eq "nothing on denied" 0 "$("$DDTK" consume -b "$TB_BROKERS" -t denied 2>/dev/null | wc -l)"
tb_done
