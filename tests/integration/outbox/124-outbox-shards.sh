#!/usr/bin/env bash
# 124: two database shards, the ledger sharded by merchant, emitting
# payment.booked: each shard's events are in that shard's outbox and
# relayed from it, on a connection of its own. The events are booked with
# the relay off; then shard 1's MariaDB is killed and `dedupd relay` runs:
# shard 0's events go out meanwhile, shard 1's once its server is back.
# End state: every booked payment's event (both shards') on the topic, the
# same id in every copy, per-merchant order, both outboxes empty.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/outbox.sh"
tb_init outbox_shards
tb_shards 2
tb_mock payments:4 payment.booked:4
TB_WORKERS=2 TB_HANDLER_CONFIG='emit_topic = "payment.booked";' \
  TB_DEDUP_EXTRA='shard_key = "${merchant_id}"; lane_key = "${merchant_id}";' tb_config "$TB_CONF" \
  'outbox = { enabled = true; relay = false; poll_interval = "50ms"; retry_max = "1s"; };'
tb_migrate || tb_die "migrate failed"
tb_eq "migrate: an outbox in every shard" 2 "$(grep -c '^shard [01]: outbox table dedupd_outbox ready' "$TB_DIR/migrate.log")"
tb_gen --keys 800 --dup-min 1 --dup-max 2 --partitions 4 --merchants 12 --bad 10 --seed 24
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
tb_shards_expect_ledger "$TB_DIR/expect.json"
for k in 0 1; do
  tb_eq "shard $k: one event per booked payment, in its own outbox" \
    "$(tb_shard_sql "$k" 'SELECT COUNT(*) FROM ledger_entry')" \
    "$(tb_shard_sql "$k" 'SELECT COUNT(*) FROM dedupd_outbox')"
done

tb_shard_kill9 1
tb_bg relay "$DEDUPD" relay -c "$TB_CONF"
relay=$TB_LAST_PID
empty() { (($(tb_shard_sql "$1" 'SELECT COUNT(*) FROM dedupd_outbox') == 0)); }
tb_wait_until 60 "shard 0's outbox relayed with shard 1 down" empty 0 || tb_die "shard 0 not relayed"
tb_check "the relay says shard 1 is unreachable" grep -q 'Outbox relay of shard 1: trying again in [0-9]* ms: shard 1 .*cannot connect' "$TB_DIR/relay.log"
tb_shard_restart 1
tb_wait_until 60 "shard 1's outbox relayed after its restart" empty 1 || tb_die "shard 1 not relayed"
tb_stop "$relay" || tb_not_ok "the relay did not stop cleanly"
tb_outbox_check
tb_done
