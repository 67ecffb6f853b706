#!/usr/bin/env bash
# 151: `dedupd run --exit-at-end` and the outbox. The ledger emits
# payment.booked; the relay runs in the process, but looks at an empty
# outbox at start and then only every 6 s (outbox.poll_interval), later
# than the consumer reaches the end of its topic.
#  - With the relay in the process, run waits until the outbox holds no
#    pending event, saying so: the events are on payment.booked when it
#    exits.
#  - With outbox.relay = false, run exits at the end saying how many
#    events it left in the outbox for `dedupd relay`.
#  - With outbox.enabled off, the ledger's emit_topic is refused at start
#    (host->outbox): check fails and run exits 1 naming both settings,
#    having consumed nothing, instead of rejecting every payment.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/outbox.sh"
tb_init outbox_exit_at_end
tb_mock payments:2 payment.booked:2
export TB_HANDLER_CONFIG='emit_topic = "payment.booked";'
tb_config "$TB_CONF" 'outbox = { enabled = true; poll_interval = "6s"; };'
tb_migrate || tb_die "migrate failed"
tb_gen --keys 30 --dup-min 1 --dup-max 2 --partitions 2 --merchants 3 --bad 0 --conflicts 0 --seed 151
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "run failed"
log() { tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log"; }
tb_eq "at exit, the outbox holds no event" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox')"
tb_eq "every booked payment's event is on payment.booked" 30 "$(tb_consume payment.booked | wc -l)"
tb_check "run said it waited for the relay" \
  grep -q 'level=info msg="--exit-at-end: waiting for the outbox relay to publish [0-9]* event(s) before exiting' <(log)
tb_check "... and that every event is published" \
  grep -q -- '--exit-at-end: every event in the outbox is published' <(log)

# The relay elsewhere: run says what it leaves behind.
tb_gen --keys 10 --dup-min 1 --dup-max 1 --partitions 2 --merchants 3 --bad 0 --conflicts 0 --seed 1510
sed 's/"order_no":"/"order_no":"late-/' "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_config "$TB_CONF" 'outbox = { enabled = true; relay = false; };'
tb_run || tb_die "run with the relay off failed"
tb_eq "the new events wait in the outbox" 10 "$(tb_sql 'SELECT COUNT(*) FROM dedupd_outbox WHERE state = 0')"
tb_check "run said it left them" \
  grep -q 'level=warn msg="Exiting with 10 event(s) left in the outbox, not yet published: the relay does not run in this process (outbox.relay = false): `dedupd relay` sends them' <(log)

# The outbox off while the ledger is told to emit: refused at start.
tb_config "$TB_CONF"
tb_sql "SELECT COUNT(*) FROM ledger_entry" >"$TB_DIR/booked.before"
printf '0\t-\t{"merchant_id":"m9","order_no":"o9","txn_id":"t9","amount":1.00,"currency":"EUR","status":"PAID"}\n' |
  tb_produce 2>/dev/null || tb_die "produce failed"
rc=0
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.out" 2>&1 || rc=$?
tb_eq "check fails" 1 "$rc"
says='emits an event per payment through the outbox, which is off: set outbox.enabled = true'
tb_check "check names emit_topic and outbox.enabled" \
  grep -qF "handler.config.emit_topic = \"payment.booked\" $says" "$TB_DIR/check.out"
rc=0
tb_run || rc=$?
tb_eq "run refuses to start" 1 "$rc"
tb_check "... naming both settings" grep -qF "handler.config.emit_topic = \\\"payment.booked\\\" $says" <(log)
tb_eq "nothing booked" "$(cat "$TB_DIR/booked.before")" "$(tb_sql 'SELECT COUNT(*) FROM ledger_entry')"
tb_eq "nothing dead-lettered" 0 "$("$DDTK" consume -b "$TB_BROKERS" -t payments.dlq 2>/dev/null | wc -l)"
tb_done
