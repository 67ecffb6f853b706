#!/usr/bin/env bash
# 121: events out, exactly once in effect end to end, over two dedupd hops,
# across kill -9 of the consumer and its relay. The ledger emits
# payment.booked per booked payment (keyed by the merchant; lane_key is the
# merchant, so a merchant's payments commit one after the other); the relay
# runs inside dedupd run. The worker is killed twice while it books and
# relays, then runs to the end; `dedupd relay --until-empty` drains what is
# left. A second dedupd consumes payment.booked keyed by the payload's
# event_id (its key template cannot read headers; the ledger puts the id
# into the payload) and applies each event once.
# End state: every booked payment's event on the output topic at least
# once, every copy of an event with the same id (header dedupd.event_id =
# payload's event_id), none for a payment that was not booked; per
# merchant the events' first copies in booking order; the outbox empty; the
# second hop applied each event exactly once.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/outbox.sh"
tb_init outbox_exactly_once
tb_mock payments:4 payment.booked:4
TB_WORKERS=3 TB_BATCH_MAX=50 TB_HANDLER_CONFIG='emit_topic = "payment.booked";' \
  TB_DEDUP_EXTRA='lane_key = "${merchant_id}";' tb_config "$TB_CONF" \
  'outbox = { enabled = true; batch = 40; poll_interval = "20ms"; };'
tb_migrate || tb_die "migrate failed"
tb_gen --keys 1500 --dup-min 1 --dup-max 3 --partitions 4 --merchants 12 --bad 20 --conflicts 10 --seed 21
# The stream goes out in thirds, one before each run, so that each round has
# keys of its own to book however fast the worker is next to this script's
# polling: of the 1,500 keys booked, 865 first appear in the first third and
# 635 in the second (--seed 21; the last third holds copies).
n=$(wc -l <"$TB_DIR/stream.txt")
third=$((n / 3))
head -n "$third" "$TB_DIR/stream.txt" >"$TB_DIR/part1.txt"
head -n "$((2 * third))" "$TB_DIR/stream.txt" | tail -n +"$((third + 1))" >"$TB_DIR/part2.txt"
tail -n +"$((2 * third + 1))" "$TB_DIR/stream.txt" >"$TB_DIR/part3.txt"

booked_at_least() { (($(tb_sql 'SELECT COUNT(*) FROM ledger_entry') >= $1)); }
relayed_some() { (($(grep -c 'Outbox relay of shard 0: holding' "$TB_DIR/$1.log") >= 1)); }
for round in 1 2; do
  tb_produce <"$TB_DIR/part$round.txt" 2>/dev/null || tb_die "produce of part $round failed"
  before=$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')
  tb_start "w$round"
  pid=$TB_LAST_PID
  tb_wait_until 30 "round $round: the relay holds the outbox lock" relayed_some "w$round" || tb_die "no relay"
  # Kill once 150 more keys are booked, polled closely so that the kill
  # lands while the worker books.
  deadline=$((SECONDS + $(tb_secs 60)))
  until booked_at_least $((before + 150)); do
    ((SECONDS < deadline)) || tb_die "round $round: no progress"
    sleep 0.02
  done
  tb_kill9 "$pid"
  tb_log "round $round: killed at $(tb_sql 'SELECT COUNT(*) FROM ledger_entry') ledger entries (from $before)"
done
tb_produce <"$TB_DIR/part3.txt" 2>/dev/null || tb_die "produce of part 3 failed"
tb_run || tb_die "dedupd run to the end failed"
timeout --foreground "$(tb_secs 60)" "$DEDUPD" relay -c "$TB_CONF" --until-empty >"$TB_DIR/relay.out" 2>"$TB_DIR/relay.log" ||
  tb_die "dedupd relay --until-empty failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "the outbox is empty" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox')"

tb_outbox_check
booked=$(wc -l <"$TB_DIR/booked.tsv")
tb_log "copies of events sent again after the kills: $(val copies)"

# The second hop: keyed by the event id, exactly once in effect.
TB_TOPIC=payment.booked TB_GROUP=g2 TB_KEY='${event_id}' TB_DEDUP_EXTRA='table = "dedup_events";' \
  TB_HANDLER="$DD_TEST_HANDLER_DIR/th_scripted.so" tb_config "$TB_DIR/hop2.conf"
tb_migrate || tb_die "migrate of the second hop failed"
tb_run || tb_die "the second hop failed"
tb_eq "the second hop applied each event once" "$booked $booked" \
  "$(tb_sql 'SELECT COUNT(*), SUM(n) FROM th_effect' | tr '\t' ' ')"
tb_eq "its keys are the event ids" 0 \
  "$(tb_sql "SELECT COUNT(*) FROM th_effect WHERE biz_key NOT REGEXP '^[0-9a-f]{32}\$'")"
tb_done
