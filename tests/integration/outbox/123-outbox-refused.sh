#!/usr/bin/env bash
# 123: events Kafka does not take. th_scripted emits, per message, to the
# topic it names (emit_to:T): good; missing, which the broker reports as
# not existing (UNKNOWN_TOPIC_OR_PART in its metadata); denied, whose one
# produce request the broker refuses (TOPIC_AUTHORIZATION_FAILED). The
# relay runs in dedupd run, with the HTTP endpoint; outbox.send_timeout is
# 3s.
# denied's event is emitted with the relay off; the broker is told to
# refuse the next produce request, and `dedupd relay` sends it.
# End state: the good events all published while missing's fail, also
# those emitted after the failures began (a failing topic blocks no other);
# missing's events wait in the outbox (pending, counted in /metrics and
# named in /readyz) and go out, every one, once the topic exists; the
# refused event is parked with its error, counted, not sent again by a
# later relay; every good event once on its topic with its id header.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init outbox_refused
tb_mock events:1 good:1 denied:1
tb_mock_ctl "topic-error missing 3"
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}' TB_BATCH_MAX=10 \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" \
  'outbox = { enabled = true; batch = 10; poll_interval = "50ms"; send_timeout = "3s"; retry_max = "2s"; };'
tb_migrate || tb_die "migrate failed"
emit() { # FROM TO TOPIC
  for i in $(seq "$1" "$2"); do printf '0\t-\t{"id":"%s-%d","th":"emit_to:%s"}\n' "$3" "$i" "$3"; done
}
on_topic() { (($("$DDTK" consume -b "$TB_BROKERS" -t "$1" 2>/dev/null | wc -l) >= $2)); }
outbox_is() { [[ "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox WHERE $1")" == "$2" ]]; }

{ emit 1 20 good; emit 1 10 missing; emit 21 30 good; } | tb_produce events 2>/dev/null ||
  tb_die "produce failed"
tb_start w
w=$TB_LAST_PID
tb_wait_until 60 "the good events published" on_topic good 30 || tb_die "good events missing"
emit 31 40 good | tb_produce events 2>/dev/null || tb_die "produce failed"
tb_wait_until 60 "later good events published meanwhile" on_topic good 40 || tb_die "good events blocked"
tb_eq "missing's events wait in the outbox" 10 \
  "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox WHERE state = 0 AND topic = 'missing'")"
counted() { th_scrape && [[ "$(th_metric dedupd_outbox_backlog)" == 10 ]]; }
tb_wait_until 10 "/metrics counts the backlog" counted || tb_not_ok "backlog: $(th_metric dedupd_outbox_backlog)"
tb_eq "/metrics: none parked" 0 "$(th_metric dedupd_outbox_parked)"
tb_check "/metrics: the oldest waiting event's age" \
  awk -v v="$(th_metric dedupd_outbox_oldest_seconds)" 'BEGIN { exit !(v > 0) }'
tb_check "/metrics: failed deliveries counted" test "$(th_metric dedupd_outbox_failures_total)" -gt 0
tb_check "/metrics: events sent" test "$(th_metric dedupd_outbox_sent_total)" -ge 40
says() { th_body /readyz | grep -q 'outbox: 10 event(s) waiting, the oldest for .*, 0 parked; shard 0: events to missing failed'; }
tb_wait_until 10 "/readyz says what waits and why" says || tb_not_ok "/readyz: $(th_body /readyz)"
tb_eq "/readyz stays 200 (the consumer goes on)" 200 "$(th_status /readyz)"
tb_check "dedupd stats shows the backlog" grep -q '^outbox: 10 event(s) waiting, the oldest for .*, 0 parked$' \
  <("$DEDUPD" stats -c "$TB_CONF" 2>&1)

tb_mock_ctl "topic-error missing 0"
tb_wait_until 60 "missing's events published once it exists" on_topic missing 10 ||
  tb_die "missing's events never went out"
tb_wait_until 30 "nothing pending" outbox_is "state = 0" 0 || tb_not_ok "events still pending"
tb_stop "$w" || tb_not_ok "dedupd run did not stop cleanly"

# The refused event: emitted with the relay off, then the broker refuses
# the next produce request, the relay's of that event.
sed -i 's/outbox = { enabled = true;/outbox = { enabled = true; relay = false;/' "$TB_CONF"
emit 1 1 denied | tb_produce events 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run of the denied event failed"
tb_mock_ctl "request-errors 0 29 1"
timeout --foreground "$(tb_secs 60)" "$DEDUPD" relay -c "$TB_CONF" --until-empty >"$TB_DIR/relay.out" 2>"$TB_DIR/relay.log" ||
  tb_not_ok "dedupd relay --until-empty failed"
tb_eq "the refused event parked with its error" 1 \
  "$(tb_sql "SELECT COUNT(*) FROM dedupd_outbox WHERE state = 1 AND topic = 'denied' AND error LIKE '%uthoriz%'")"
tb_check "the relay counts it parked" grep -q '^relay sent=0 parked=1 ' "$TB_DIR/relay.out"
tb_check "and logs it" grep -q 'refused for good (Broker: Topic authorization failed): parked' "$TB_DIR/relay.log"
timeout --foreground "$(tb_secs 60)" "$DEDUPD" relay -c "$TB_CONF" --until-empty >"$TB_DIR/relay2.out" 2>&1 ||
  tb_not_ok "the second dedupd relay --until-empty failed"
tb_check "a parked event is not sent again" grep -q '^relay sent=0 parked=0 ' "$TB_DIR/relay2.out"

ids() {
  tb_consume "$1" | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(len({r["key"] for r in rows}), len({r["headers"].get("dedupd.event_id") for r in rows}))'
}
tb_eq "each good event on its topic, with its id header" "40 40" "$(ids good)"
tb_eq "each of missing's events too" "10 10" "$(ids missing)"
tb_eq "nothing on denied" 0 "$("$DDTK" consume -b "$TB_BROKERS" -t denied 2>/dev/null | wc -l)"
tb_eq "dedupd stats --format json: nothing pending, one parked" "0 1" \
  "$("$DEDUPD" stats -c "$TB_CONF" --format json | python3 -c '
import json, sys
o = json.load(sys.stdin)["outbox"]
print(o["pending"], o["parked"])')"
tb_eq "the parked event stays parked" 1 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox WHERE state = 1')"
tb_done
