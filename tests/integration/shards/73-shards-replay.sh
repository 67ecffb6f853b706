#!/usr/bin/env bash
# 73: `dedupd replay` over three shards. After a complete run (shard key
# ${merchant_id}, by hash), one key's dedup row and business rows are
# deleted from its shard; replay judges each message in the shard its
# routing picks, so it reports that one key missing, with its shard, and
# nothing else (every other key is applied in its own shard); `--apply`
# repairs it into that shard only, and a second replay finds nothing, nor
# does --orphans (its anti-join run in every shard).
source "$(dirname "$0")/../lib.sh"
tb_init shards_replay
tb_mock payments:2
tb_shards 3
TB_DEDUP_EXTRA='shard_key = "${merchant_id}"; shard_by = "hash";'
tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 120 --dup-min 1 --dup-max 2 --partitions 2 --merchants 12 --bad 0 --conflicts 0 --seed 73
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"

rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
per_shard() { for s in 0 1 2; do tb_shard_sql "$s" "$1"; done | paste -sd' '; }
tb_eq "every key applied once over the shards" 120 \
  "$(per_shard 'SELECT COUNT(*) FROM dedup_record WHERE status = 1' | tr ' ' '+' | bc)"
for s in 0 1 2; do
  tb_eq "shard $s holds only its merchants (CRC32(merchant_id) % 3 = $s)" 0 \
    "$(tb_shard_sql "$s" "SELECT COUNT(*) FROM ledger_entry WHERE CRC32(merchant_id) % 3 <> $s")"
  tb_check "shard $s has keys" test "$(tb_shard_sql "$s" 'SELECT COUNT(*) FROM dedup_record')" -gt 0
done

# One key of shard 1 loses its dedup row and its business rows.
victim=$(tb_shard_sql 1 "SELECT biz_key FROM dedup_record WHERE status = 1 ORDER BY SHA2(biz_key, 256) LIMIT 1")
[[ -n "$victim" ]] || tb_die "no key in shard 1"
tb_log "victim: $victim (shard 1)"
tb_shard_sql 1 "UPDATE merchant_balance b JOIN (SELECT merchant_id, currency, SUM(amount_cents) s, COUNT(*) c
    FROM ledger_entry WHERE biz_key = '$victim' GROUP BY merchant_id, currency) x USING (merchant_id, currency)
    SET b.balance_cents = b.balance_cents - x.s, b.entries = b.entries - x.c;
  DELETE FROM ledger_entry WHERE biz_key = '$victim';
  DELETE FROM dedup_record WHERE biz_key = '$victim'"
rows_before=$(per_shard 'SELECT COUNT(*) FROM dedup_record')

"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/report.json" \
  2>"$TB_DIR/replay.log" || tb_die "replay failed (see replay.log)"
r="$TB_DIR/report.json"
tb_eq "replay: 120 keys, 119 applied, 1 missing" "120 119 1" \
  "$(rj "$r" '"%d %d %d" % (r["summary"]["keys"], r["summary"]["applied"], r["summary"]["missing"])')"
tb_eq "replay: the one entry is the victim, missing, in shard 1" "$victim missing no_row 1" \
  "$(rj "$r" '"|".join("%s %s %s %s" % (e["key"], e["status"], e["reason"], e.get("shard")) for e in r["entries"])')"
tb_eq "replay changed nothing" "$rows_before" "$(per_shard 'SELECT COUNT(*) FROM dedup_record')"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --apply --format csv --report "$TB_DIR/apply.csv" \
  2>"$TB_DIR/apply.log" || tb_die "replay --apply failed (see apply.log)"
tb_eq "apply (csv): the victim repaired, its shard in the last column" "missing,$victim,repaired,1" \
  "$(python3 -c 'import csv,sys; rows=list(csv.DictReader(open(sys.argv[1])))
print("|".join("%s,%s,%s,%s" % (x["status"], x["key"], x["apply"], x["shard"]) for x in rows))' "$TB_DIR/apply.csv")"
tb_eq "apply: the victim's dedup row is back in shard 1 only" "0 1 0" \
  "$(per_shard "SELECT COUNT(*) FROM dedup_record WHERE biz_key = '$victim' AND status = 1")"
tb_eq "apply: its ledger entry is back in shard 1 only" "0 1 0" \
  "$(per_shard "SELECT COUNT(*) FROM ledger_entry WHERE biz_key = '$victim'")"
tb_eq "every key applied once over the shards again" 120 \
  "$(per_shard 'SELECT COUNT(*) FROM dedup_record WHERE status = 1' | tr ' ' '+' | bc)"
tb_eq "the ledger matches the stream again: entries, balances" \
  "$(tb_expect_get unique_keys_applied) $(tb_expect_get balance_cents_total)" \
  "$(per_shard 'SELECT COUNT(*) FROM ledger_entry' | tr ' ' '+' | bc) $(per_shard 'SELECT SUM(balance_cents) FROM merchant_balance' | tr ' ' '+' | bc)"

"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/again.json" \
  2>"$TB_DIR/again.log" || tb_die "second replay failed"
tb_eq "second replay: every key applied, no entry" "120 0" \
  "$(rj "$TB_DIR/again.json" '"%d %d" % (r["summary"]["applied"], len(r["entries"]))')"
"$DEDUPD" replay -c "$TB_CONF" --from earliest --orphans --format csv --report "$TB_DIR/orphans.csv" \
  2>"$TB_DIR/orphans.log" || tb_die "replay --orphans failed (see orphans.log)"
tb_eq "replay --orphans with shards (csv): none, the header only" \
  "$(head -1 "$TB_DIR/apply.csv")" "$(cat "$TB_DIR/orphans.csv")"
tb_done
