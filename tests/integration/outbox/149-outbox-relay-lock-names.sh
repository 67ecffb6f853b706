#!/usr/bin/env bash
# 149: the relays of two databases whose names share their first 48
# characters, on one server. Each database's outbox holds events (emitted
# with its relay off); a relay of the first database runs and keeps its
# lock, then `dedupd relay --until-empty` of the second runs beside it.
# A relay's lock is the server's, named after its database: a name cut to
# the lock's 64 characters would be one lock for both, and the second
# relay would wait for the first forever.
# End state: both relays publish, each its own database's events, and the
# second ends with its outbox empty while the first still runs.
source "$(dirname "$0")/../lib.sh"
tb_init outbox_relay_lock_of_two_databases_named_alike
tb_mock events:1 th.events:1
DB_A=$TB_DB DB_B="${TB_DB}_2"
_tb_mariadb -e "DROP DATABASE IF EXISTS \`$DB_B\`; CREATE DATABASE \`$DB_B\`" || tb_die "cannot create $DB_B"
tb_check "the names share their first 48 characters" test "${DB_A:0:48}" == "${DB_B:0:48}"
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" TB_KEY='ev:${id}'
for d in a b; do
  db=$DB_A
  [[ $d == b ]] && db=$DB_B
  TB_DB=$db TB_GROUP=$d tb_config "$TB_DIR/$d.conf" \
    'outbox = { enabled = true; relay = false; poll_interval = "20ms"; };'
  TB_DB=$db tb_migrate || tb_die "migrate of $d failed"
done
printf '0\t-\t{"id":"%d","th":"emit:10"}\n' $(seq 1 20) | tb_produce events 2>/dev/null || tb_die "produce failed"
for d in a b; do tb_bg "run_$d" "$DEDUPD" run -c "$TB_DIR/$d.conf" --exit-at-end; done
for p in "${TB_PIDS[@]:1}"; do wait "$p" || tb_die "a run failed"; done
pending() { TB_DB=$1 tb_sql 'SELECT COUNT(*) FROM dedupd_outbox WHERE state = 0'; }
tb_eq "each outbox holds its 20 events" "20 20" "$(pending "$DB_A") $(pending "$DB_B")"

tb_bg relay_a "$DEDUPD" relay -c "$TB_DIR/a.conf"
ra=$TB_LAST_PID
empty() { (($(pending "$1") == 0)); }
tb_wait_until 30 "the first database's events published" empty "$DB_A" ||
  tb_not_ok "the first relay left $(pending "$DB_A") events"
rc=0
timeout --foreground "$(tb_secs 20)" "$DEDUPD" relay -c "$TB_DIR/b.conf" --until-empty \
  >"$TB_DIR/relay_b.out" 2>"$TB_DIR/relay_b.log" || rc=$?
tb_eq "the second database's relay publishes beside the first and ends" 0 "$rc"
tb_check "... holding its own lock" grep -q "holding the shard's lock" "$TB_DIR/relay_b.log"
tb_check "... having sent its 20 events" grep -q '^relay sent=20 ' "$TB_DIR/relay_b.out"
tb_eq "both outboxes empty" "0 0" "$(pending "$DB_A") $(pending "$DB_B")"
tb_check "the first relay still runs" kill -0 "$ra"
tb_stop "$ra" || tb_not_ok "the first relay did not stop cleanly"
tb_eq "40 events on th.events, each once" "40 40" \
  "$(tb_consume th.events | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
print(len(rows), len({r["headers"].get("dedupd.event_id") for r in rows}))')"
_tb_mariadb -e "DROP DATABASE IF EXISTS \`$DB_B\`"
tb_done
