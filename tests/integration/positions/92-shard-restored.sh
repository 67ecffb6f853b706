#!/usr/bin/env bash
# 92: one of three database shards goes back in time alone. The ledger
# sharded by merchant over three shards; 1,500 unique payments applied,
# shard 1's server stopped and its data directory copied, 1,500 more
# applied; then shard 1 alone is restored from that copy while shards 0
# and 2 keep everything. Every shard records the positions, so shard 1's
# are behind Kafka's: the restart reads from there, applies in shard 1
# exactly what it lost, finds the other shards' keys as duplicates, and
# every payment is in its shard once.
source "$(dirname "$0")/../lib.sh"
tb_init shard_restored
tb_shards 3
tb_mock payments:4
TB_WORKERS=2 TB_KAFKA_PROPS=auto.commit.interval.ms=200 \
  TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 3000 --dup-min 1 --dup-max 1 --partitions 4 --merchants 15 --seed 92
head -n 1500 "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the first run failed"
shard1() { tb_shard_sql 1 'SELECT COUNT(*) FROM ledger_entry'; }
before=$(shard1)
for k in 0 1 2; do
  tb_eq "shard $k records the group's positions where Kafka's are" "$(tb_committed)" \
    "$(tb_shard_sql "$k" "SELECT kpartition, next_offset FROM dedupd_position
         WHERE group_id = 'tg' AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"
done

dd_mariadb_stop "$TB_DIR/shard1" >>"$TB_DIR/shard1-db.log" 2>&1 || tb_die "cannot stop shard 1"
cp -a "$TB_DIR/shard1/data" "$TB_DIR/backup1"
tb_shard_restart 1

tail -n +1501 "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the second run failed"
tb_shards_expect_ledger "$TB_DIR/expect.json"
lost=$(($(shard1) - before))
tb_check "shard 1 took payments after the copy ($lost)" test "$lost" -gt 0

dd_mariadb_stop "$TB_DIR/shard1" >>"$TB_DIR/shard1-db.log" 2>&1 || tb_die "cannot stop shard 1"
rm -rf "$TB_DIR/shard1/data"
cp -a "$TB_DIR/backup1" "$TB_DIR/shard1/data"
tb_shard_restart 1
tb_eq "shard 1 restored alone" "$before" "$(shard1)"

tb_run || tb_die "the run after the restore failed"
tb_shards_expect_ledger "$TB_DIR/expect.json"
tb_shards_expect_placed
tb_assert_committed_at_end
tb_eq "exactly what shard 1 lost applied again" "$lost" "$(tb_summary applied)"
tb_eq "everything else read again is a duplicate" "$(($(tb_summary messages) - lost))" \
  "$(tb_summary duplicates)"
tb_check "keys of the other shards were among the duplicates" test "$(tb_summary duplicates)" -gt 0
tb_eq "a rewind counted per partition" 4 "$(tb_summary position_rewinds)"
tb_eq "the warn lines name shard 1 as the one behind" 4 "$(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log" |
  grep -c "level=warn.*position of group tg, payments \[[0-3]\] is [0-9]* (lowest in shard 1 (.*)), behind Kafka's committed offset")"
for k in 0 1 2; do
  tb_eq "shard $k's positions at the end again" "$(tb_committed)" \
    "$(tb_shard_sql "$k" "SELECT kpartition, next_offset FROM dedupd_position
         WHERE group_id = 'tg' AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"
done
tb_done
