#!/usr/bin/env bash
# 114: the schema registry down, slow and failing mid-run. Payments under a
# first writer schema are applied; then the registry stops answering schema
# fetches (connections closed, then answers slower than
# schema_registry.timeout, then 503s) while payments under a second schema,
# whose id dedupd has not seen, arrive. Meanwhile: nothing is dead-lettered,
# no committed offset moves past the first waiting message, /readyz answers
# 503 and says it waits for the registry, the fetch is tried again with
# backoff, and a JSON route in the same process goes on applying its
# payments. Once the registry answers, every payment is applied exactly
# once, the offsets reach the end, and each id was fetched successfully once.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_registry_down
tb_mock payments:2 side:2 payments.dlq:1 side.dlq:1
tb_registry
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
tb_config_routes "
  { name = \"avro\"; topics = [\"payments\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    format = \"avro\"; table = \"dedup_record\"; handler = { path = \"$DD_LEDGER_SO\"; }; },
  { name = \"side\"; topics = [\"side\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    table = \"dedup_side\"; handler = { path = \"$DD_LEDGER_SO\"; config = { table_prefix = \"j_\"; }; }; }" \
  "schema_registry = { url = \"$TB_REGISTRY_URL\"; timeout = \"1s\"; };" \
  "retry = { backoff_initial = \"50ms\"; backoff_max = \"500ms\"; };" \
  "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"
for p in "" j_; do _tb_mariadb -e "$(_tb_grants ledger dedup_record "$p")" || tb_die "cannot grant the ${p} tables"; done

tb_gen --keys 200 --dup-min 1 --dup-max 3 --partitions 2 --bad 0 --conflicts 0 --seed 5
half=$(($(wc -l <"$TB_DIR/stream.txt") / 2))
head -n "$half" "$TB_DIR/stream.txt" | tb_avro --only-version 1 >"$TB_DIR/a.txt" ||
  tb_die "avro-produce.py failed"
tail -n +"$((half + 1))" "$TB_DIR/stream.txt" | tb_avro --only-version 2 >"$TB_DIR/b.txt" ||
  tb_die "avro-produce.py failed"
tb_produce <"$TB_DIR/a.txt" 2>/dev/null || tb_die "produce failed"

tb_start run
pid=$TB_LAST_PID
tb_wait_until 60 "the first half applied and committed" tb_at_end payments || tb_die "first half not committed"
before=$(tb_committed tg payments)

tb_registry_fault down
tb_produce <"$TB_DIR/b.txt" 2>/dev/null || tb_die "produce failed"
_fetches() { (($(tb_registry_gets "$1" | awk '$1 == 2 { print $2 }') >= $2)); }
tb_wait_until 30 "fetches of id 2 tried again while the registry is down" _fetches down 3 ||
  tb_die "no retries: $(cat "$TB_DIR/registry.gets")"
tb_eq "/readyz: 503 while waiting" 503 "$(th_status /readyz)"
body=$(th_body /readyz)
case "$body" in
*"waiting for the schema registry"*) tb_ok "/readyz says it waits for the registry" ;;
*) tb_not_ok "/readyz says it waits for the registry: $body" ;;
esac
# the JSON route is not held up
tb_produce side <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce side failed"
tb_wait_until 60 "the JSON route's payments applied while the Avro route waits" tb_at_end side ||
  tb_not_ok "the JSON route goes on while the Avro route waits"
tb_expect_ledger "$TB_DIR/expect.json" j_
tb_registry_fault slow 3
tb_wait_until 30 "fetches tried while the registry is slow" _fetches slow 2 ||
  tb_die "no retries while slow"
tb_registry_fault error
tb_wait_until 30 "fetches tried while the registry fails" _fetches error 2 ||
  tb_die "no retries while failing"
tb_eq "nothing committed past the waiting messages" "$before" "$(tb_committed tg payments)"
tb_eq "nothing dead-lettered while waiting" "" "$(tb_dlq_reasons; tb_dlq_reasons side.dlq)"
kill -0 "$pid" 2>/dev/null && tb_ok "dedupd still runs" || tb_not_ok "dedupd still runs"

tb_registry_fault
tb_wait_until 60 "everything applied and committed" tb_at_end payments || tb_die "second half not committed"
th_wait_status 20 200 /readyz || tb_not_ok "/readyz back to 200: $(th_body /readyz)"
tb_stop "$pid" || tb_not_ok "dedupd exits 0 on SIGTERM"
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "no dead letters" "" "$(tb_dlq_reasons)"
tb_eq "dedup rows applied" "$(tb_expect_get dedup_rows.applied)" \
  "$(tb_sql "SELECT COUNT(*) FROM dedup_record WHERE status = 1")"
tb_eq "each id fetched successfully once" "1 1|2 1" "$(tb_registry_gets | paste -sd'|')"
grep -q "waits for the schema registry" "$TB_DIR/run.log" && tb_ok "the wait is logged" ||
  tb_not_ok "the wait is logged"
tb_done
