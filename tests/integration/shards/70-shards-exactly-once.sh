#!/usr/bin/env bash
# 70: three database shards (mysql.shards), the ledger sharded by merchant
# (dedup.shard_key "${merchant_id}", shard_by hash): 1,200+ callbacks over
# 4 partitions, keys of 15 merchants delivered 1-3 times, with conflicts and
# bad messages. End state: every key applied exactly once, its dedup row
# and its ledger rows in the shard the routing function names
# (CRC32(merchant_id) % 3, MySQL's CRC32() being dedupd's), in no other;
# dead letters by reason; offsets committed at the end.
# Then a route sharded by a map of merchant-number ranges: a merchant in no
# range is dead-lettered shard_unmapped, one that is not a number
# shard_key_invalid, the others applied in their ranges' shards. Last, a
# configuration listing the shards in another order is refused at start,
# naming the shard and both layouts, and by migrate, which points to
# --relayout; `migrate --relayout` records it (old -> new per shard,
# changed_at set where it changed; a first layout over rows sets it too),
# and run then starts with the
# wrong-shard check on.
source "$(dirname "$0")/../lib.sh"
tb_init shards_exactly_once
tb_shards 3
tb_mock payments:4 mapped:2
TB_WORKERS=2 TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' tb_config
tb_migrate || tb_die "migrate failed"
tb_eq "migrate: a line per shard and route" "0 1 2" \
  "$(grep -o '^shard [0-9]*: dedup table dedup_record' "$TB_DIR/migrate.log" | cut -d' ' -f2 |
    tr -d ':' | paste -sd' ')"
for k in 0 1 2; do
  tb_eq "shard $k records its layout" "$k 3" \
    "$(tb_shard_sql "$k" "SELECT shard_index, shard_count FROM dedupd_shard_layout" | tr '\t' ' ')"
done
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.log" 2>&1 || true
tb_check "check passes" grep -q '^check passed' "$TB_DIR/check.log"
tb_eq "check: each shard connected and at its layout" 3 \
  "$(grep -c '^ok   database: shard [0-2] (.*): records the layout shard [0-2] of 3' "$TB_DIR/check.log")"

tb_gen --keys 500 --dup-min 1 --dup-max 3 --partitions 4 --merchants 15 --bad 20 --conflicts 10 \
  --seed 70
n=$(wc -l <"$TB_DIR/stream.txt")
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"

tb_shards_expect_ledger "$TB_DIR/expect.json"
tb_shards_expect_placed
for reason in bad_json key_missing key_too_long rejected conflict; do
  tb_eq "dead letters $reason" "$(tb_expect_get "dead_letters.$reason")" "$(tb_dlq_count "$reason")"
done
tb_assert_committed_at_end
tb_eq "summary counts every message once" "$n" "$(tb_summary messages)"
tb_eq "summary: applied as expected" "$(tb_expect_get unique_keys_applied)" "$(tb_summary applied)"
tb_eq "no shard dead letters under hash" 0 "$(tb_summary dlq_shard_key_invalid)"

# shard_by map: merchants 0-99 on shard 2, 100-199 on shard 0, 200-299 on 1.
printf '# merchant numbers\n0 99 2\n100 199 0\n\n200 299 1   # the rest\n' >"$TB_DIR/shards.map"
# Its own dedup table: dedup_record's keys were placed by the hash.
TB_TOPIC=mapped TB_GROUP=gmap TB_DEDUP_EXTRA='table = "dedup_mapped"; shard_key = "${merchant_id}"; shard_by = "map"; shard_map = "shards.map";' \
  tb_config "$TB_DIR/map.conf"
tb_migrate || tb_die "migrate with the map failed"
pay() { printf '%s\t-\t{"merchant_id":"%s","order_no":"%s","amount":1.25,"currency":"CNY","status":"PAID","txn_id":"T%s"}\n' "$1" "$2" "$3" "$3"; }
{
  pay 0 7 A1
  pay 1 150 A2
  pay 0 250 A3
  pay 1 250 A3
  pay 0 300 A4
  pay 1 m9 A5
  pay 0 007 A6
} | tb_produce mapped 2>/dev/null || tb_die "produce to mapped failed"
tb_run || tb_die "dedupd run with the map failed"
tb_eq "map: merchant 7 on shard 2" 1 \
  "$(tb_shard_sql 2 "SELECT COUNT(*) FROM dedup_mapped WHERE biz_key = 'pay:7:A1' AND status = 1")"
tb_eq "map: merchant 150 on shard 0" 1 \
  "$(tb_shard_sql 0 "SELECT COUNT(*) FROM dedup_mapped WHERE biz_key = 'pay:150:A2' AND status = 1")"
tb_eq "map: merchant 250 on shard 1, once" "1 1" \
  "$(tb_shard_sql 1 "SELECT COUNT(*), SUM(entries) FROM merchant_balance WHERE merchant_id = '250'" | tr '\t' ' ')"
tb_eq "map: merchant 007 (leading zeros) on shard 2" 1 \
  "$(tb_shard_sql 2 "SELECT COUNT(*) FROM ledger_entry WHERE merchant_id = '007'")"
tb_eq "map: merchants 7 and 007 in shard 2 only" "0 0 2" \
  "$(tb_shards_sql "SELECT COUNT(*) FROM dedup_mapped WHERE biz_key IN ('pay:7:A1', 'pay:007:A6')" |
    paste -sd' ')"
tb_eq "map: merchant 300 dead-lettered shard_unmapped" 1 "$(tb_dlq_count shard_unmapped mapped.dlq)"
tb_eq "map: merchant m9 dead-lettered shard_key_invalid" 1 "$(tb_dlq_count shard_key_invalid mapped.dlq)"
tb_eq "map: no dedup row of the dead-lettered keys" "" \
  "$(tb_shards_sql "SELECT biz_key FROM dedup_mapped WHERE biz_key IN ('pay:300:A4', 'pay:m9:A5')")"
tb_dlq mapped.dlq >"$TB_DIR/mapped-dlq.txt"
tb_check "the dead letter says why" grep -q 'shard key 300 is in no range of' "$TB_DIR/mapped-dlq.txt"
tb_assert_committed_at_end gmap mapped

# The shards in another order: shard 1 would be the server recording shard 2.
TB_SHARD_ORDER="0 2 1" TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' tb_config "$TB_DIR/swapped.conf"
rc=0
timeout --foreground 60 "$DEDUPD" run -c "$TB_DIR/swapped.conf" --exit-at-end >"$TB_DIR/swapped.log" 2>&1 || rc=$?
tb_check "a configuration with the shards swapped is refused (exit $rc)" test "$rc" -ne 0
tb_check "the refusal names the shard, both layouts and the document" grep -q \
  'shard 1 (.*) records the layout shard 2 of 3, but the configuration makes it shard 1 of 3.*Changing the shard count' \
  "$TB_DIR/swapped.log"
for k in 0 1 2; do
  tb_eq "shard $k records no layout change" NULL \
    "$(tb_shard_sql "$k" "SELECT IFNULL(changed_at, 'NULL') FROM dedupd_shard_layout")"
done
rc=0
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_DIR/swapped.conf" >"$TB_DIR/relayout.log" 2>&1 || rc=$?
tb_check "migrate refuses the other layout (exit $rc)" test "$rc" -ne 0
tb_check "and points to --relayout" grep -q \
  'shard 1 (.*) records the layout shard 2 of 3, but the configuration makes it shard 1 of 3.*dedupd migrate --relayout' \
  "$TB_DIR/relayout.log"
rc=0
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_DIR/swapped.conf" --relayout \
  >"$TB_DIR/relayout.log" 2>&1 || rc=$?
tb_eq "migrate --relayout records the new layout" 0 "$rc"
tb_eq "a line per shard, old -> new" "unchanged|2 of 3 -> shard 1 of 3|1 of 3 -> shard 2 of 3" \
  "$(grep -o 'layout shard .*\.$' "$TB_DIR/relayout.log" | sed -e 's/^layout shard 0 of 3, unchanged\.$/unchanged/' \
    -e 's/^layout shard \(.*\) (changed)\.$/\1/' | paste -sd'|')"
tb_eq "the servers record the swapped layout" "0 3|2 3|1 3" \
  "$(tb_shards_sql "SELECT shard_index, shard_count FROM dedupd_shard_layout" | tr '\t' ' ' | paste -sd'|')"
tb_eq "changed_at set where the layout changed" "NULL SET SET" \
  "$(tb_shards_sql "SELECT IF(changed_at > NOW(6) - INTERVAL 1 MINUTE, 'SET', 'NULL') FROM dedupd_shard_layout" |
    paste -sd' ')"
rc=0
timeout --foreground 60 "$DEDUPD" run -c "$TB_DIR/swapped.conf" --exit-at-end >"$TB_DIR/swapped.log" 2>&1 || rc=$?
tb_eq "run starts with the swapped layout recorded" 0 "$rc"
tb_check "auto: the check is on after the relayout" grep -q \
  'Wrong-shard check: on until .* (the layout of shard [12] changed at .*; dedup.ttl 7d)' \
  "$TB_DIR/swapped.log"

# A layout recorded for the first time over a dedup table that holds rows
# (a database joining a layout with rows of an earlier one) counts as a
# change: changed_at is set, and the check runs.
tb_shard_sql 0 "DROP TABLE dedupd_shard_layout"
DEDUPD_MYSQL_USER="$TB_MIG_USER" "$DEDUPD" migrate -c "$TB_DIR/swapped.conf" \
  >"$TB_DIR/rows.log" 2>&1 || tb_not_ok "migrate over a table with rows failed"
tb_eq "first layout over rows: recorded, changed_at set" "0 3 SET" \
  "$(tb_shard_sql 0 "SELECT shard_index, shard_count, IF(changed_at > NOW(6) - INTERVAL 1 MINUTE, 'SET',
                     'NULL') FROM dedupd_shard_layout" | tr '\t' ' ')"
tb_done
