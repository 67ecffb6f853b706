#!/usr/bin/env bash
# 122: the relay apart from the consumer (outbox.relay = false, two
# `dedupd relay` processes at once), its leader killed -9, and the broker
# down for a while. The ledger books a stream and emits payment.booked.
# One relay publishes (it holds the shard's lock), the other waits; killed,
# the other takes over. With the broker down the events stay in the outbox,
# the relay says it waits for Kafka, and once the broker is back they go
# out. A third relay joins meanwhile. The broker answers slowly until it
# is back, so events are still waiting when it goes down.
# End state: as in 121 (every booked payment's event on the topic, the
# same id in every copy, per-merchant order), the outbox empty, only one
# relay publishing at a time.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/outbox.sh"
tb_init outbox_relay_faults
tb_mock payments:4 payment.booked:4
TB_WORKERS=3 TB_BATCH_MAX=50 TB_HANDLER_CONFIG='emit_topic = "payment.booked";' \
  TB_DEDUP_EXTRA='lane_key = "${merchant_id}";' tb_config "$TB_CONF" \
  'outbox = { enabled = true; relay = false; batch = 25; poll_interval = "20ms"; retry_max = "1s"; };'
tb_migrate || tb_die "migrate failed"
tb_gen --keys 1500 --dup-min 1 --dup-max 2 --partitions 4 --merchants 10 --bad 10 --seed 22
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
# The broker answers slowly, so the relays publish slower than the consumer
# books and events are still waiting when the broker goes down.
tb_mock_ctl "rtt 1 300"

tb_bg w "$DEDUPD" run -c "$TB_CONF" --exit-at-end
w=$TB_LAST_PID
tb_bg r1 "$DEDUPD" relay -c "$TB_CONF"
r1=$TB_LAST_PID
tb_bg r2 "$DEDUPD" relay -c "$TB_CONF"
r2=$TB_LAST_PID
leads() { grep -q "holding the shard's lock" "$TB_DIR/$1.log"; }
one_leads() { leads r1 || leads r2; }
tb_wait_until 30 "a relay holds the lock" one_leads || tb_die "no relay leads"
if leads r1; then lead=$r1 other=r2; else lead=$r2 other=r1; fi
waits() { grep -q "waiting: another relay holds the shard's lock" "$TB_DIR/$other.log"; }
tb_check "the other relay waits for the lock" tb_wait_until 30 "the other relay to wait" waits
sent_some() { (($(tb_sql 'SELECT COUNT(*) FROM ledger_entry') - $(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox') > 200)); }
tb_wait_until 60 "some events published" sent_some || tb_die "nothing published"
tb_kill9 "$lead"
tb_wait_until 30 "the other relay takes over" leads "$other" || tb_die "no takeover"

# The broker down: events wait in the outbox; the relay says so.
tb_mock_ctl "broker-down 1"
waiting() { grep -q 'waiting for Kafka to acknowledge' "$TB_DIR/$other.log"; }
tb_wait_until 30 "the relay waits for Kafka" waiting || tb_die "the relay did not report the outage"
held=$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox')
tb_check "events wait in the outbox while the broker is down ($held)" test "$held" -gt 0
tb_bg r3 "$DEDUPD" relay -c "$TB_CONF"
r3=$TB_LAST_PID
sleep 3
tb_mock_ctl "broker-up 1"
tb_mock_ctl "rtt 1 0"

rc=0
timeout --foreground "$(tb_secs 180)" tail --pid="$w" -f /dev/null || tb_not_ok "the consumer did not finish"
wait "$w" || rc=$?
tb_eq "the consumer ran to the end" 0 "$rc"
empty() { (($(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox') == 0)); }
tb_wait_until 120 "the outbox drained" empty || tb_die "the outbox did not drain"
for p in "${TB_PIDS[@]}"; do :; done
if [[ $other == r1 ]]; then keep=$r1; else keep=$r2; fi
tb_stop "$keep" || tb_not_ok "the relay did not stop cleanly"
tb_stop "$r3" || tb_not_ok "the third relay did not stop cleanly"
tb_check "the relays each print what they sent" grep -q '^relay sent=' "$TB_DIR/$other.log"
tb_expect_ledger "$TB_DIR/expect.json"
tb_outbox_check
tb_log "copies of events sent again: $(val copies)"
tb_done
