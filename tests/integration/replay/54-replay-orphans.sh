#!/usr/bin/env bash
# 54: --orphans lists dedup rows first seen inside the replayed range whose
# key never appears in it; rows first seen outside the range (another
# partition, an offset past the end, another topic) are not orphans.
source "$(dirname "$0")/../lib.sh"
tb_init replay_orphans
tb_mock payments:2
tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 100 --dup-min 1 --dup-max 2 --partitions 2 --seed 14
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
ghost() { # KEY TOPIC PARTITION OFFSET
  tb_sql "INSERT INTO dedup_record (biz_key, request_hash, status, topic, kpartition, koffset, expire_at)
          VALUES ('$1', UNHEX(SHA2('$1', 256)), 1, '$2', $3, $4, NOW() + INTERVAL 1 DAY)"
}
ghost 'pay:ghost:1' payments 0 3
ghost 'pay:ghost:2' payments 1 0
ghost 'pay:ghost:far' payments 0 999999
ghost 'pay:ghost:other' archive 0 3
# A real key whose row claims another first position inside the range is
# still in the range: not an orphan.
tb_sql "UPDATE dedup_record SET koffset = 2 WHERE biz_key = (SELECT biz_key FROM (SELECT biz_key FROM dedup_record WHERE kpartition = 1 AND biz_key NOT LIKE 'pay:ghost%' ORDER BY biz_key LIMIT 1) x)"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --orphans --report "$TB_DIR/all.json" 2>"$TB_DIR/replay.log" ||
  tb_die "replay --orphans failed"
tb_eq "orphans in the whole range" "pay:ghost:1 0 3
pay:ghost:2 1 0" "$(rj "$TB_DIR/all.json" '"\n".join("%s %d %d" % (o["key"], o["partition"], o["offset"]) for o in r["orphans"])')"
tb_eq "orphan count in the summary" 2 "$(rj "$TB_DIR/all.json" 'r["summary"]["orphans"]')"
tb_eq "orphans carry the row status" "applied applied" \
  "$(rj "$TB_DIR/all.json" '" ".join(o["row_status"] for o in r["orphans"])')"
tb_eq "ghost rows are not keys of the range" 0 "$(rj "$TB_DIR/all.json" 'r["summary"]["missing"]')"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --partitions 1 --orphans --report "$TB_DIR/p1.json" \
  2>>"$TB_DIR/replay.log" || tb_die "replay --partitions 1 --orphans failed"
tb_eq "orphans of partition 1 only" "pay:ghost:2" "$(rj "$TB_DIR/p1.json" '" ".join(o["key"] for o in r["orphans"])')"

"$DEDUPD" replay -c "$TB_CONF" --from 1 --orphans --format csv --report "$TB_DIR/from1.csv" \
  --summary "$TB_DIR/from1.summary.json" 2>>"$TB_DIR/replay.log" || tb_die "replay --from 1 --orphans failed"
tb_eq "offset 0 is outside --from 1" "pay:ghost:1" \
  "$(awk -F, '$1 == "orphan" { print $6 }' "$TB_DIR/from1.csv")"
tb_eq "--summary FILE counts orphans" 1 "$(rj "$TB_DIR/from1.summary.json" 'r["summary"]["orphans"]')"
tb_done
