#!/usr/bin/env bash
# 141: a registry that answers a byte a second holds up only the messages
# that need its answer. Payments under a first writer schema are applied;
# then the registry trickles its answers (a byte a second for 4 s), and
# payments under a second schema (an id not fetched yet) arrive. While
# that fetch crawls on the registry's thread, a JSON route's payments and
# an Avro topic's payments under the known schema are applied within
# seconds, and nothing of the waiting partitions is committed past the
# waiting messages. When the answer is complete, they are applied. End
# state: every payment booked once by each route, no dead letter, the new
# id fetched once, offsets at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_registry_stall
tb_mock payments:2 known:1 side:2 payments.dlq:1 side.dlq:1
tb_registry
tb_config_routes "
  { name = \"avro\"; topics = [\"payments\", \"known\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    format = \"avro\"; table = \"dedup_record\"; handler = { path = \"$DD_LEDGER_SO\"; }; },
  { name = \"side\"; topics = [\"side\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    table = \"dedup_side\"; handler = { path = \"$DD_LEDGER_SO\"; config = { table_prefix = \"j_\"; }; }; }" \
  "schema_registry = { url = \"$TB_REGISTRY_URL\"; timeout = \"30s\"; };" \
  "retry = { backoff_initial = \"50ms\"; backoff_max = \"500ms\"; };"
tb_migrate || tb_die "migrate failed"
for p in "" j_; do _tb_mariadb -e "$(_tb_grants ledger dedup_record "$p")" || tb_die "cannot grant the ${p} tables"; done

tb_gen --keys 90 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 7
third=$(($(wc -l <"$TB_DIR/stream.txt") / 3))
sed "$((third + 1)),$((2 * third))d" "$TB_DIR/stream.txt" | tb_avro --only-version 1 >"$TB_DIR/ac.txt" ||
  tb_die "avro a and c"
sed -n "$((third + 1)),$((2 * third))p" "$TB_DIR/stream.txt" | tb_avro --only-version 2 >"$TB_DIR/b.txt" ||
  tb_die "avro b"
head -n "$third" "$TB_DIR/ac.txt" >"$TB_DIR/a.txt"
tail -n +"$((third + 1))" "$TB_DIR/ac.txt" | awk -F'\t' -v OFS='\t' '{ $1 = 0; print }' >"$TB_DIR/c.txt"
tb_produce <"$TB_DIR/a.txt" 2>/dev/null || tb_die "produce a failed"

tb_start run
pid=$TB_LAST_PID
tb_wait_until 60 "the first payments applied and committed" tb_at_end payments || tb_die "a not committed"
before=$(tb_committed tg payments)

tb_registry_fault trickle 4
tb_produce <"$TB_DIR/b.txt" 2>/dev/null || tb_die "produce b failed"
tb_wait_until 20 "the new id's fetch under way" grep -q "^GET 2 trickle" "$TB_DIR/registry.gets" ||
  tb_die "id 2 not fetched: $(cat "$TB_DIR/registry.gets")"
tb_registry_fault
tb_produce known <"$TB_DIR/c.txt" 2>/dev/null || tb_die "produce c failed"
tb_produce side <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce side failed"
# the keys of the first and last thirds, and of them all (each key is one payment)
ac_keys=$(sed "$((third + 1)),$((2 * third))d" "$TB_DIR/stream.txt" | python3 -c '
import json, sys
print(len({(p["merchant_id"], p["order_no"]) for p in (json.loads(l.split("\t", 2)[2]) for l in sys.stdin)}))')
all_keys=$(tb_expect_get unique_keys_applied)
_others() {
  [[ "$(tb_sql "SELECT COUNT(*) FROM dedup_side WHERE status = 1")" == "$all_keys" &&
    "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1")" == "$ac_keys" ]]
}
tb_wait_until 3 "the JSON route and the known schema's payments applied while the fetch crawls" \
  _others && tb_ok "the other partitions go on while the registry trickles" ||
  tb_not_ok "the other partitions go on while the registry trickles"
tb_eq "nothing committed past the waiting messages" "$before" "$(tb_committed tg payments)"
tb_expect_ledger "$TB_DIR/expect.json" j_

tb_wait_until 60 "everything applied and committed" tb_at_end payments || tb_die "b not committed"
tb_stop "$pid" || tb_not_ok "dedupd exits 0 on SIGTERM"
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "no dead letters" "" "$(tb_dlq_reasons; tb_dlq_reasons side.dlq)"
tb_eq "each id fetched once" "1 1|2 1" \
  "$(awk '$1 == "GET" { n[$2]++ } END { for (i in n) print i, n[i] }' "$TB_DIR/registry.gets" |
    sort -n | paste -sd'|')"
tb_done
