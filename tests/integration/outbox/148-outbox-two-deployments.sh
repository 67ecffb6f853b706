#!/usr/bin/env bash
# 148: two deployments, one downstream. Deployments A and B (two databases
# of one server) are both left on the default dedup table dedup_record
# with the same key template, and book the same payments (keys
# pay:MERCHANT:ORDER) with the ledger, which emits payment.booked; B's
# ledger entries are numbered from 1000, so its events' payloads differ
# from A's. A downstream dedupd keyed by the event id (the payload's
# event_id) consumes payment.booked.
# End state: the two outboxes record different event namespaces; every
# event of both deployments on payment.booked with an id of its own; the
# downstream applied each one once (none taken for a copy of another),
# with no dead letter.
source "$(dirname "$0")/../lib.sh"
tb_init outbox_two_deployments
tb_mock payments:2 payment.booked:2
tb_gen --keys 40 --dup-min 1 --dup-max 1 --partitions 2 --merchants 4 --bad 0 --conflicts 0 --seed 148
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
DB_A=$TB_DB DB_B="${TB_DB}_b"
_tb_mariadb -e "DROP DATABASE IF EXISTS \`$DB_B\`; CREATE DATABASE \`$DB_B\`" || tb_die "cannot create $DB_B"

# deploy NAME DB: a deployment of the ledger on DB, its own group, its
# events relayed to payment.booked.
deploy() {
  TB_DB=$2 TB_GROUP=$1 TB_HANDLER_CONFIG='emit_topic = "payment.booked";' \
    tb_config "$TB_DIR/$1.conf" 'outbox = { enabled = true; poll_interval = "20ms"; };'
  TB_DB=$2 tb_migrate || tb_die "migrate of $1 failed"
}
deploy a "$DB_A"
deploy b "$DB_B"
TB_DB=$DB_B tb_sql 'ALTER TABLE ledger_entry AUTO_INCREMENT = 1000'
ns() { TB_DB=$1 tb_sql "SELECT TABLE_COMMENT FROM information_schema.TABLES
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dedupd_outbox'"; }
tb_check "A's outbox records an event namespace" grep -Eq '^dedupd event_namespace=[0-9a-f]{32}$' <<<"$(ns "$DB_A")"
tb_check "the two namespaces differ" test "$(ns "$DB_A")" != "$(ns "$DB_B")"
# The downstream: keyed by the event id, exactly once in effect.
TB_TOPIC=payment.booked TB_GROUP=down TB_KEY='${event_id}' TB_DEDUP_EXTRA='table = "dedup_events";' \
  TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" tb_config "$TB_DIR/down.conf"
tb_migrate || tb_die "migrate of the downstream failed"

# All three at once: the deployments book and relay, the downstream applies.
tb_start down
down=$TB_LAST_PID
for d in a b; do tb_bg "$d" "$DEDUPD" run -c "$TB_DIR/$d.conf"; done
applied() { (($(tb_sql 'SELECT COUNT(*) FROM dedup_events') >= $1)); }
tb_wait_until 60 "the downstream to take 80 events" applied 80 || tb_not_ok "the downstream took $(tb_sql 'SELECT COUNT(*) FROM dedup_events')"
for p in "${TB_PIDS[@]:1}"; do tb_stop "$p" || tb_not_ok "a dedupd did not stop cleanly"; done
tb_eq "both deployments booked every payment" "40 40" \
  "$(TB_DB=$DB_A tb_sql 'SELECT COUNT(*) FROM ledger_entry') $(TB_DB=$DB_B tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_eq "80 events on payment.booked, each with an id of its own" "80 80" \
  "$(tb_consume payment.booked | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(len(rows), len({r["headers"].get("dedupd.event_id") for r in rows}))')"
tb_eq "the downstream applied every event of both deployments once" "80 80" \
  "$(tb_sql 'SELECT COUNT(*), SUM(n) FROM th_effect' | tr '\t' ' ')"
tb_eq "... none taken for a copy or a conflict" "0" \
  "$(tb_sql 'SELECT COUNT(*) FROM dedup_events WHERE status <> 1')"
tb_eq "... no dead letter" 0 "$("$DDTK" consume -b "$TB_BROKERS" -t payment.booked.dlq 2>/dev/null | wc -l)"
_tb_mariadb -e "DROP DATABASE IF EXISTS \`$DB_B\`"
tb_done
