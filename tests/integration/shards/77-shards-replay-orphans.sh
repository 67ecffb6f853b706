#!/usr/bin/env bash
# 77: `dedupd replay` over three shards, after a complete run: --orphans
# runs its anti-join in every shard and lists a dedup row planted in shard 2
# (first seen in the range, its key never in the topic) with its shard, and
# not one first seen outside the range. Then a key of shard 1 has its dedup
# row moved by SQL to shard 2 (a re-shard that moved it wrongly): replay
# reports it wrong_shard, naming shard 2 as the one holding its row, not
# missing, and not as an orphan of shard 2 (its key is in the range);
# --apply leaves it alone (apply not_repaired: no row created in shard 1,
# every shard's ledger unchanged) and --fail-on-findings counts it.
source "$(dirname "$0")/../lib.sh"
tb_init shards_replay_orphans
tb_mock payments:2
tb_shards 3
TB_DEDUP_EXTRA='shard_key = "${merchant_id}"; shard_by = "hash";'
tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 60 --dup-min 1 --dup-max 2 --partitions 2 --merchants 12 --bad 0 --conflicts 0 --seed 77
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
per_shard() { for s in 0 1 2; do tb_shard_sql "$s" "$1"; done | paste -sd' '; }
ghost() { # SHARD KEY PARTITION OFFSET
  tb_shard_sql "$1" "INSERT INTO dedup_record (biz_key, request_hash, status, topic, kpartition, koffset, expire_at)
          VALUES ('$2', UNHEX(SHA2('$2', 256)), 1, 'payments', $3, $4, NOW() + INTERVAL 1 DAY)"
}
ghost 2 'pay:ghost:2' 0 3
ghost 1 'pay:ghost:far' 1 999999 # first seen past the range: not an orphan

"$DEDUPD" replay -c "$TB_CONF" --from earliest --orphans --report "$TB_DIR/orphans.json" \
  2>"$TB_DIR/orphans.log" || tb_die "replay --orphans failed (see orphans.log)"
r="$TB_DIR/orphans.json"
tb_eq "--orphans over 3 shards: the ghost of shard 2, with its shard" "pay:ghost:2 orphan 2 0 3" \
  "$(rj "$r" '"|".join("%s %s %s %d %d" % (o["key"], o["status"], o.get("shard"), o["partition"], o["offset"]) for o in r["orphans"])')"
tb_eq "--orphans: counted, and no entry" "1 0" \
  "$(rj "$r" '"%d %d" % (r["summary"]["orphans"], len(r["entries"]))')"

# A key of shard 1: its dedup row moved to shard 2, its business rows left.
victim=$(tb_shard_sql 1 "SELECT biz_key FROM dedup_record WHERE status = 1 AND biz_key NOT LIKE 'pay:ghost%' ORDER BY SHA2(biz_key, 256) LIMIT 1")
[[ -n "$victim" ]] || tb_die "no key in shard 1"
tb_log "victim: $victim (shard 1, its row moved to shard 2)"
mariadb-dump --no-defaults --socket="${TB_SHARD_SOCKETS[1]}" -uroot --no-create-info --compact \
  --skip-triggers --hex-blob --where="biz_key = '$victim'" "$TB_DB" dedup_record |
  DD_TEST_MYSQL_SOCKET="${TB_SHARD_SOCKETS[2]}" _tb_mariadb "$TB_DB" || tb_die "cannot copy the row"
tb_shard_sql 1 "DELETE FROM dedup_record WHERE biz_key = '$victim'"
tb_eq "the victim's row is in shard 2 only" "0 0 1" \
  "$(per_shard "SELECT COUNT(*) FROM dedup_record WHERE biz_key = '$victim'")"
ledger_before=$(per_shard 'SELECT COUNT(*) FROM ledger_entry')

"$DEDUPD" replay -c "$TB_CONF" --from earliest --orphans --report "$TB_DIR/moved.json" \
  2>"$TB_DIR/moved.log" || tb_die "replay failed (see moved.log)"
r="$TB_DIR/moved.json"
tb_eq "moved: the victim is wrong_shard in shard 1, its row in shard 2" \
  "$victim wrong_shard row_in_other_shard 1 2" \
  "$(rj "$r" '"|".join("%s %s %s %s %s" % (e["key"], e["status"], e["reason"], e.get("shard"), e.get("row_shard")) for e in r["entries"])')"
tb_check "moved: the detail names both shards" \
  grep -q 'its row is in shard 2 .* but its route names shard 1' <(rj "$r" 'r["entries"][0]["detail"]')
tb_eq "moved: summary wrong_shard 1, missing 0, findings 1" "1 0 1" \
  "$(rj "$r" '"%d %d %d" % (r["summary"]["wrong_shard"], r["summary"]["missing"], r["summary"]["findings"])')"
tb_eq "moved: its row in shard 2 is not an orphan (its key is in the range)" "pay:ghost:2" \
  "$(rj "$r" '" ".join(o["key"] for o in r["orphans"])')"

rc=0
"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --fail-on-findings --report "$TB_DIR/apply.json" \
  2>"$TB_DIR/apply.log" || rc=$?
tb_eq "--apply --fail-on-findings: exit 3 (the wrong_shard key is a finding)" 3 "$rc"
r="$TB_DIR/apply.json"
tb_eq "--apply: the victim not repaired, said in apply" "$victim wrong_shard not_repaired" \
  "$(rj "$r" '"|".join("%s %s %s" % (e["key"], e["status"], e.get("apply")) for e in r["entries"])')"
tb_eq "--apply: nothing repaired" "0 1" \
  "$(rj "$r" '"%d %d" % (r["summary"]["repaired"], r["summary"]["findings"])')"
tb_eq "--apply: no row created in shard 1; shard 2's left" "0 0 1" \
  "$(per_shard "SELECT COUNT(*) FROM dedup_record WHERE biz_key = '$victim'")"
tb_eq "--apply: every shard's ledger unchanged" "$ledger_before" "$(per_shard 'SELECT COUNT(*) FROM ledger_entry')"
tb_done
