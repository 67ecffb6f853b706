#!/usr/bin/env bash
# 50: `dedupd replay` report-only. After a complete run, the business rows and
# dedup rows of 6 keys are deleted (ledger entries, balance adjusted back,
# dedup rows). Replay must report exactly those 6 keys as missing, count every
# other verdict like the pipeline did (bad messages by reason, conflicting
# copies, rejected keys as failed), change nothing in the database (table
# checksums before/after) and commit no offsets (group untouched, replay's
# own group id has none). Every entry carries the message's Kafka key. CSV
# is a header and data only (the summary goes to --summary FILE);
# --fail-on-findings exits 3. Messages the group has not consumed yet are
# pending, not missing.
source "$(dirname "$0")/../lib.sh"
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
tb_eq "clean: nothing pending (the group committed everything)" 0 \
  "$(rj "$TB_DIR/clean.json" 'r["summary"]["pending"]')"
tb_eq "clean: the findings are the rejected keys and the conflicting copies" \
  "$(($(tb_expect_get dedup_rows.failed) + $(tb_expect_get dead_letters.conflict)))" \
  "$(rj "$TB_DIR/clean.json" 'r["summary"]["findings"]')"

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
rc=0
"$DEDUPD" replay -c "$TB_CONF" --from earliest --fail-on-findings --report "$TB_DIR/findings.json" \
  2>>"$TB_DIR/replay.log" || rc=$?
tb_eq "--fail-on-findings with missing keys: exit 3" 3 "$rc"
tb_eq "--fail-on-findings: the report is written all the same" 6 \
  "$(rj "$TB_DIR/findings.json" 'r["summary"]["missing"]')"
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
  "$(rj "$r" 'sum(r["summary"][k] for k in ("missing", "failed", "conflict", "processing", "pending", "bad", "copy_conflicts"))')" \
  "$(rj "$r" 'len(r["entries"])')"
tb_eq "entries carry partition and offset" 0 \
  "$(rj "$r" 'sum(1 for e in r["entries"] if not isinstance(e.get("partition"), int) or not isinstance(e.get("offset"), int))')"
# The Kafka key of each entry's message, from the stream as produced: the
# topic was empty, so a partition's Nth line is its offset N.
kafka_keys() { # REPORT: entries whose kafka_key is not the stream's
  python3 - "$1" "$TB_DIR/stream.txt" <<'PY'
import collections, csv, json, sys
keys, n = {}, collections.Counter()
for line in open(sys.argv[2]):
    part, key, _ = line.rstrip("\n").split("\t", 2)
    keys[(int(part), n[part])] = None if key == "-" else key
    n[part] += 1
if sys.argv[1].endswith(".csv"):
    rows = list(csv.DictReader(open(sys.argv[1], newline="")))
    got = [(int(e["partition"]), int(e["offset"]), e["kafka_key"] or None, e["status"]) for e in rows]
else:
    got = [(e["partition"], e["offset"], e["kafka_key"], e["status"])
           for e in json.load(open(sys.argv[1]))["entries"]]
bad = [g for g in got if keys[(g[0], g[1])] != g[2]]
print("%d of %d entries (%d bad messages, %d with a key)" % (
    len(bad), len(got), sum(g[3] == "bad" for g in got), sum(g[2] is not None for g in got)))
PY
}
tb_check "json entries carry the Kafka key: $(kafka_keys "$r")" \
  grep -q '^0 of [1-9][0-9]* entries ([1-9][0-9]* bad messages, [1-9][0-9]* with a key)$' <(kafka_keys "$r")

# CSV: a header and one row per entry, nothing else; the summary goes to
# stderr and to --summary FILE.
"$DEDUPD" replay -c "$TB_CONF" --from earliest --format csv --report "$TB_DIR/report.csv" \
  --summary "$TB_DIR/summary.json" 2>>"$TB_DIR/replay.log" || tb_die "replay --format csv failed"
tb_eq "csv header" \
  "status,reason,topic,partition,offset,key,key_hex,kafka_key,kafka_key_hex,hash,stored_hash,detail,apply,apply_error" \
  "$(head -n 1 "$TB_DIR/report.csv")"
tb_eq "csv: every row has the header's 14 fields (strict reader), none is a comment" \
  "$(($(rj "$r" 'len(r["entries"])') + 1)) rows, widths {14}, comments 0" \
  "$(python3 -c 'import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline=""), strict=True))
print("%d rows, widths %s, comments %d" % (len(rows), set(map(len, rows)), sum(r[0].startswith("#") for r in rows)))' "$TB_DIR/report.csv")"
tb_eq "csv missing rows" 6 "$(grep -c '^missing,' "$TB_DIR/report.csv")"
tb_check "csv entries carry the Kafka key: $(kafka_keys "$TB_DIR/report.csv")" \
  grep -q '^0 of ' <(kafka_keys "$TB_DIR/report.csv")
tb_eq "--summary FILE: the summary as JSON" "6 $n" \
  "$(rj "$TB_DIR/summary.json" '"%d %d" % (r["summary"]["missing"], r["summary"]["messages"])')"
tb_check "summary table on stderr" grep -Eq '^  missing +6$' "$TB_DIR/replay.log"
tb_eq "still nothing changed" "$before" "$(checksum)"

# Usage errors exit 2.
rc=0; "$DEDUPD" replay -c "$TB_CONF" >/dev/null 2>&1 || rc=$?
tb_eq "missing --from is a usage error" 2 "$rc"
rc=0; "$DEDUPD" replay -c "$TB_CONF" --from yesterday >/dev/null 2>&1 || rc=$?
tb_eq "bad --from is a usage error" 2 "$rc"
rc=0; "$DEDUPD" replay -c "$TB_CONF" --from earliest --partitions 9 >/dev/null 2>&1 || rc=$?
tb_eq "a partition the topic lacks is an error" 1 "$rc"
rc=0; "$DEDUPD" replay -c "$TB_CONF" --from earliest --topic paymnets >/dev/null 2>"$TB_DIR/typo.log" || rc=$?
tb_eq "a topic that does not exist is an error" 1 "$rc"
tb_check "... and it was not created" bash -c '! "$1" partitions -b "$2" -t paymnets 2>/dev/null' _ \
  "$DDTK" "$TB_BROKERS"

# Messages the group has not consumed yet (no consumer runs: its committed
# offsets stay at the old ends) are pending, not missing, and not findings.
for i in 1 2 3 4 5; do
  printf '%d\tnew-%d\t{"merchant_id":"m900","order_no":"new%d","amount":"1.00","currency":"EUR","status":"SUCCESS"}\n' \
    $((i % 4)) "$i" "$i"
done | tb_produce 2>/dev/null || tb_die "produce failed"
"$DEDUPD" replay -c "$TB_CONF" --from earliest --report "$TB_DIR/pending.json" 2>>"$TB_DIR/replay.log" ||
  tb_die "replay with unconsumed messages failed"
tb_eq "unconsumed messages are pending" "5 6" \
  "$(rj "$TB_DIR/pending.json" '"%d %d" % (r["summary"]["pending"], r["summary"]["missing"])')"
tb_eq "pending entries: the new keys, reason not_consumed_yet, with their Kafka keys" \
  "pay:m900:new1 new-1|pay:m900:new2 new-2|pay:m900:new3 new-3|pay:m900:new4 new-4|pay:m900:new5 new-5" \
  "$(rj "$TB_DIR/pending.json" '"|".join(sorted("%s %s" % (e["key"], e["kafka_key"]) for e in r["entries"] if e["status"] == "pending" and e["reason"] == "not_consumed_yet"))')"
tb_eq "pending keys are not findings" "$(rj "$TB_DIR/findings.json" 'r["summary"]["findings"]')" \
  "$(rj "$TB_DIR/pending.json" 'r["summary"]["findings"]')"
tb_eq "ranges say where the group has committed" \
  "$(tb_committed | awk '{ print $1, $2 }')" \
  "$(rj "$TB_DIR/pending.json" '"\n".join("%d %d" % (g["partition"], g["group_committed"]) for g in r["ranges"])')"
tb_done
