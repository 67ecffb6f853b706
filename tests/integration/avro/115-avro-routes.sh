#!/usr/bin/env bash
# 115: JSON and Avro routes in one process, schema evolution, replay. The
# same payments go to four routes: json (JSON text), avro (Avro, the whole
# record hashed), avro_hashed (Avro, dedup.hash over the payment's fields)
# and sr (JSON behind the Confluent header, as the JSON Schema serializer
# writes it). Each payment is then sent again to the Avro routes under a
# third writer schema that adds a field with its default: a different
# payload for route avro (conflicts), the same request for avro_hashed,
# whose dedup.hash leaves the field out (duplicates). A JSON payload
# without the header is bad_json on route sr. Each route's ledger holds
# every payment once; then `dedupd replay --route avro --apply` finds a key
# deleted from its tables and applies it again through the handler, from
# the decoded record. Each schema id is fetched once by each process.
# handler-test runs on the Avro route's configuration with JSON messages.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_routes
tb_mock pay_json:2 pay_avro:2 pay_avro_h:2 pay_sr:2 pay.dlq:1
tb_registry

route() { # NAME TOPIC FORMAT PREFIX [EXTRA]
  printf '{ name = "%s"; topics = ["%s"]; key = "pay:${merchant_id}:${order_no}"; format = "%s";
    table = "dedup_%s"; dlq = { topic = "pay.dlq"; }; %s
    handler = { path = "%s"; config = { table_prefix = "%s_"; }; }; }' \
    "$1" "$2" "$3" "$1" "${5:-}" "$DD_LEDGER_SO" "$4"
}
TB_WORKERS=3 tb_config_routes "$(route json pay_json json j), $(route avro pay_avro avro a),
  $(route avro_hashed pay_avro_h avro h 'hash = ["merchant_id", "order_no", "amount", "currency"];'),
  $(route sr pay_sr json_sr s)" \
  "schema_registry = { url = \"$TB_REGISTRY_URL\"; };" \
  'retry = { backoff_initial = "10ms"; backoff_max = "100ms"; };'
tb_migrate || tb_die "migrate failed"
# lib.sh grants the first route's ledger tables; the others' prefixes too
for p in a h s; do
  _tb_mariadb -e "$(_tb_grants ledger dedup_json "${p}_")" || tb_die "cannot grant ${p}_ tables"
done

tb_gen --keys 80 --dup-min 1 --dup-max 3 --partitions 2 --bad 0 --conflicts 0 --seed 9
keys=$(tb_expect_get unique_keys_applied)
n=$(wc -l <"$TB_DIR/stream.txt")
tb_produce pay_json <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce pay_json failed"
tb_avro --versions 2 <"$TB_DIR/stream.txt" >"$TB_DIR/avro.txt" || tb_die "avro-produce.py failed"
# every payment once more, under v3 (a field "source" added, with its default)
awk -F'\t' '!seen[$3]++' "$TB_DIR/stream.txt" >"$TB_DIR/firsts.txt"
tb_avro --only-version 3 <"$TB_DIR/firsts.txt" >"$TB_DIR/v3.txt" || tb_die "avro-produce.py failed"
v3=$(wc -l <"$TB_DIR/v3.txt")
# gen-payments' first copies are distinct payloads, but one payment may
# appear among them re-serialised: count the payments the v3 copies cover
tb_check "v3 copies cover every payment" test "$v3" -ge "$keys"
for t in pay_avro pay_avro_h; do
  cat "$TB_DIR/avro.txt" "$TB_DIR/v3.txt" | tb_produce "$t" 2>/dev/null || tb_die "produce $t failed"
done
{
  python3 -c 'import sys
for line in sys.stdin:
    part, key, payload = line.rstrip("\n").split("\t", 2)
    print("%s\t%s\thex:%s" % (part, key, (b"\x00\x00\x00\x00\x07" + payload.encode()).hex()))' \
    <"$TB_DIR/stream.txt"
  printf '0\t-\t{"merchant_id":"m1","order_no":"no-header","amount":1.00}\n'
} | tb_produce pay_sr 2>/dev/null || tb_die "produce pay_sr failed"

tb_run || tb_die "dedupd run failed"

for p in j a h s; do tb_expect_ledger "$TB_DIR/expect.json" "${p}_"; done
tb_eq "route json: every payment once, the copies duplicates" "$n $keys 0" \
  "$(for f in messages applied dead_letters; do tb_summary_route json $f; done | paste -sd' ')"
tb_eq "route avro: the v3 copies are conflicts" "$((n + v3)) $keys $v3" \
  "$(for f in messages applied conflicts; do tb_summary_route avro $f; done | paste -sd' ')"
tb_eq "route avro_hashed: the v3 copies are duplicates" "$((n + v3)) $keys 0 $((n + v3 - keys))" \
  "$(for f in messages applied conflicts duplicates; do tb_summary_route avro_hashed $f; done | paste -sd' ')"
tb_eq "route sr: the payload without the header is bad_json" "$((n + 1)) $keys 1" \
  "$(for f in messages applied dead_letters; do tb_summary_route sr $f; done | paste -sd' ')"
tb_eq "dead letters" "bad_json 1|conflict $v3" "$(tb_dlq_reasons pay.dlq | paste -sd'|')"
for t in pay_json pay_avro pay_avro_h pay_sr; do tb_assert_committed_at_end tg "$t"; done
# The Avro record of a payment decodes to the payment's JSON: the same
# request hash as the JSON route's (and the json_sr one's); avro_hashed
# hashes other paths.
tb_eq "request hashes equal to route json's: avro, sr, avro_hashed" "$keys $keys 0" \
  "$(tb_sql "SELECT (SELECT COUNT(*) FROM dedup_json j JOIN dedup_avro a USING (biz_key) WHERE j.request_hash = a.request_hash),
                    (SELECT COUNT(*) FROM dedup_json j JOIN dedup_sr s USING (biz_key) WHERE j.request_hash = s.request_hash),
                    (SELECT COUNT(*) FROM dedup_json j JOIN dedup_avro_hashed h USING (biz_key) WHERE j.request_hash = h.request_hash)" | tr '\t' ' ')"

# Replay on an Avro topic: a payment lost from route avro's tables is found
# missing and applied again, once.
key=$(tb_sql "SELECT biz_key FROM dedup_avro ORDER BY biz_key LIMIT 1")
tb_sql "DELETE FROM dedup_avro WHERE biz_key = '$key'; DELETE FROM a_ledger_entry WHERE biz_key = '$key'"
"$DEDUPD" replay -c "$TB_CONF" --route avro --from earliest --apply --all-consumed \
  --summary "$TB_DIR/apply.json" --report "$TB_DIR/apply-report.json" 2>>"$TB_DIR/replay.log" ||
  tb_die "replay --route avro --apply failed"
tb_eq "replay --route avro --apply: its messages, 1 key missing, repaired, nothing bad" \
  "$((n + v3)) $keys 1 1 0 0" \
  "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]
print(s["messages"], s["keys"], s["missing"], s["repaired"], s["bad_avro"], s["schema_unknown"])' "$TB_DIR/apply.json")"
tb_eq "the key is booked again, once" 1 \
  "$(tb_sql "SELECT COUNT(*) FROM a_ledger_entry WHERE biz_key = '$key'")"
tb_eq "each schema id fetched once by run and once by replay" "1 2|2 2|3 2" \
  "$(tb_registry_gets | paste -sd'|')"

# handler-test on an Avro route's configuration: the messages are the JSON
# its records decode to, the registry is not needed.
cat >"$TB_DIR/one.conf" <<CONF
kafka = { brokers = "127.0.0.1:1"; group = "g"; topics = ["pay_avro"]; };
mysql = { database = "unused"; };
schema_registry = { url = "http://127.0.0.1:1"; };
dedup = { key = "pay:\${merchant_id}:\${order_no}"; format = "avro"; };
handler = { path = "$DD_LEDGER_SO"; config = { table_prefix = ""; }; };
CONF
rc=0
"$DEDUPD" handler-test --mysql-socket "$DD_TEST_MYSQL_SOCKET" -c "$TB_DIR/one.conf" \
  "$DD_TEST_SRC_DIR/examples/ledger/messages.jsonl" >"$TB_DIR/ht.out" 2>"$TB_DIR/ht.log" || rc=$?
tb_eq "handler-test on an Avro route's configuration: exit 0" 0 "$rc"
tb_check "... and PASS" grep -q '^handler-test: PASS$' "$TB_DIR/ht.out"
tb_check "... with the messages applied (3 balances), as JSON" \
  grep -q 'table merchant_balance: the same 3 row(s) after both passes' "$TB_DIR/ht.out"
tb_eq "... none dead-lettered" 0 "$(grep -c bad_avro "$TB_DIR/ht.out")"
tb_done
