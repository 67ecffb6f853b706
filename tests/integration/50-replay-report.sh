#!/usr/bin/env bash
# 50: `dedupd replay` report-only. After a complete run, the business rows and
# dedup rows of 6 keys are deleted (ledger entries, balance adjusted back,
# dedup rows). Replay must report exactly those 6 keys as missing, count every
# other verdict like the pipeline did (bad messages by reason, conflicting
# copies, rejected keys as failed), change nothing in the database (table
# checksums before/after) and commit no offsets (group untouched, replay's
# own group id has none).
source "$(dirname "$0")/lib.sh"
tb_init replay_report
tb_mock payments:4
tb_config
tb_migrate || tb_die "migrate failed"

tb_gen --keys 400 --dup-min 1 --dup-max 3 --partitions 4 --bad 16 --conflicts 6 --seed 11
n=$(wc -l <"$TB_DIR/stream.txt")
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
tb_expect_ledger

# rj FILE PYEXPR: evaluates PYEXPR with r = the parsed report.
rj() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
checksum() { tb_sql "CHECKSUM TABLE ledger_entry, merchant_balance, payment_order, dedup_record"; }

# A clean database first: everything in the range is applied.
"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/clean.json" 2>"$TB_DIR/replay0.log" ||
  tb_die "replay on a clean database failed"
tb_eq "clean: messages" "$n" "$(rj "$TB_DIR/clean.json" 'r["summary"]["messages"]')"
tb_eq "clean: nothing missing" 0 "$(rj "$TB_DIR/clean.json" 'r["summary"]["missing"]')"
tb_eq "clean: nothing in conflict" 0 "$(rj "$TB_DIR/clean.json" 'r["summary"]["conflict"]')"

tb_sql "CREATE TABLE victims AS SELECT biz_key FROM dedup_record WHERE status = 1
          ORDER BY SHA2(biz_key, 256) LIMIT 6;
        UPDATE merchant_balance b JOIN (SELECT merchant_id, currency, SUM(amount_cents) s, COUNT(*) c
            FROM ledger_entry WHERE biz_key IN (SELECT biz_key FROM victims)
            GROUP BY merchant_id, currency) x USING (merchant_id, currency)
          SET b.balance_cents = b.balance_cents - x.s, b.entries = b.entries - x.c;
        DELETE FROM ledger_entry WHERE biz_key IN (SELECT biz_key FROM victims);
        DELETE FROM dedup_record WHERE biz_key IN (SELECT biz_key FROM victims)"
tb_eq "6 keys deleted" 6 "$(tb_sql 'SELECT COUNT(*) FROM victims')"

before=$(checksum)
committed_before=$(tb_committed)
"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/report.json" 2>"$TB_DIR/replay.log" ||
  tb_die "replay failed (see replay.log)"
tb_eq "report-only replay changes nothing (table checksums)" "$before" "$(checksum)"
tb_eq "replay leaves the group's committed offsets alone" "$committed_before" "$(tb_committed)"
tb_eq "replay commits nothing under its own group id" "$(tb_committed never-used-group)" \
  "$(tb_committed tg.replay)"

r="$TB_DIR/report.json"
tb_eq "missing keys are exactly the deleted ones" \
  "$(tb_sql 'SELECT biz_key FROM victims ORDER BY biz_key')" \
  "$(rj "$r" '"\n".join(sorted(e["key"] for e in r["entries"] if e["status"] == "missing"))')"
tb_eq "summary missing" 6 "$(rj "$r" 'r["summary"]["missing"]')"
tb_eq "summary messages" "$n" "$(rj "$r" 'r["summary"]["messages"]')"
tb_eq "summary keys = distinct keys in the topic" \
  "$(($(tb_expect_get unique_keys_applied) + $(tb_expect_get dedup_rows.failed)))" \
  "$(rj "$r" 'r["summary"]["keys"]')"
tb_eq "summary applied" "$(($(tb_expect_get unique_keys_applied) - 6))" \
  "$(rj "$r" 'r["summary"]["applied"]')"
tb_eq "summary failed = rejected keys" "$(tb_expect_get dedup_rows.failed)" \
  "$(rj "$r" 'r["summary"]["failed"]')"
tb_eq "summary conflict (stored rows)" 0 "$(rj "$r" 'r["summary"]["conflict"]')"
tb_eq "conflicting copies" "$(tb_expect_get dead_letters.conflict)" \
  "$(rj "$r" 'r["summary"]["copy_conflicts"]')"
for reason in bad_json key_missing key_too_long; do
  tb_eq "bad messages: $reason" "$(tb_expect_get dead_letters.$reason)" \
    "$(rj "$r" "r['summary']['$reason']")"
  tb_eq "bad entries: $reason" "$(tb_expect_get dead_letters.$reason)" \
    "$(rj "$r" "sum(1 for e in r['entries'] if e['status'] == 'bad' and e['reason'] == '$reason')")"
done
tb_eq "every key that is not applied has an entry" \
  "$(rj "$r" 'r["summary"]["missing"] + r["summary"]["failed"] + r["summary"]["conflict"] + r["summary"]["bad"] + r["summary"]["copy_conflicts"]')" \
  "$(rj "$r" 'len(r["entries"])')"
tb_eq "entries carry partition and offset" 0 \
  "$(rj "$r" 'sum(1 for e in r["entries"] if not isinstance(e.get("partition"), int) or not isinstance(e.get("offset"), int))')"

# CSV: header, one row per entry, the summary as a "# summary" trailer.
"$DEDUPD" replay -c "$TB_CONF" --from earliest --format csv --report "$TB_DIR/report.csv" \
  2>>"$TB_DIR/replay.log" || tb_die "replay --format csv failed"
tb_eq "csv header" "status,reason,topic,partition,offset,key,hash,stored_hash,detail,apply,apply_error" \
  "$(head -n 1 "$TB_DIR/report.csv")"
tb_eq "csv rows = json entries" "$(rj "$r" 'len(r["entries"])')" \
  "$(python3 -c 'import csv,sys; print(sum(1 for row in csv.reader(open(sys.argv[1])) if row and not row[0].startswith("#")) - 1)' "$TB_DIR/report.csv")"
tb_eq "csv missing rows" 6 "$(grep -c '^missing,' "$TB_DIR/report.csv")"
tb_check "csv summary trailer" grep -q "^# summary .* missing=6 " "$TB_DIR/report.csv"
tb_check "summary table on stderr" grep -Eq '^  missing +6$' "$TB_DIR/replay.log"
tb_eq "still nothing changed" "$before" "$(checksum)"

# Usage errors exit 2.
rc=0; "$DEDUPD" replay -c "$TB_CONF" >/dev/null 2>&1 || rc=$?
tb_eq "missing --from is a usage error" 2 "$rc"
rc=0; "$DEDUPD" replay -c "$TB_CONF" --from yesterday >/dev/null 2>&1 || rc=$?
tb_eq "bad --from is a usage error" 2 "$rc"
rc=0; "$DEDUPD" replay -c "$TB_CONF" --from earliest --partitions 9 >/dev/null 2>&1 || rc=$?
tb_eq "a partition the topic lacks is an error" 1 "$rc"
tb_done
