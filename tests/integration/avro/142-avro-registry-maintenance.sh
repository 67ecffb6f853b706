#!/usr/bin/env bash
# 142: a registry that answers 200 with an HTML maintenance page is not
# believed. Payments under a first writer schema are applied; then the
# registry answers every schema fetch with 200 and an HTML page while
# payments under a second schema (an id not fetched yet) arrive.
# Meanwhile: nothing is dead-lettered (the page is no verdict on the
# messages), the fetch is tried again with backoff (never remembered),
# /readyz answers 503 saying why, dedupd_schema_registry_faults_total
# counts bad_answer, and nothing is committed past the waiting messages.
# When the registry answers again, every payment is applied once, the
# offsets reach the end, and the id was answered properly once.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
source "$(dirname "$0")/avro.sh"
tb_init avro_registry_maintenance
tb_mock payments:2
tb_registry
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_REGISTRY_TIMEOUT=1s tb_avro_config \
  "retry = { backoff_initial = \"50ms\"; backoff_max = \"300ms\"; };" \
  "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

tb_gen --keys 80 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 9
half=$(($(wc -l <"$TB_DIR/stream.txt") / 2))
head -n "$half" "$TB_DIR/stream.txt" | tb_avro --only-version 1 >"$TB_DIR/a.txt" || tb_die "avro a"
tail -n +"$((half + 1))" "$TB_DIR/stream.txt" | tb_avro --only-version 2 >"$TB_DIR/b.txt" ||
  tb_die "avro b"
tb_produce <"$TB_DIR/a.txt" 2>/dev/null || tb_die "produce a failed"

tb_start run
pid=$TB_LAST_PID
tb_wait_until 60 "the first half applied and committed" tb_at_end || tb_die "a not committed"
before=$(tb_committed tg payments)

tb_registry_fault html
tb_produce <"$TB_DIR/b.txt" 2>/dev/null || tb_die "produce b failed"
_fetches() { (($(tb_registry_gets html | awk '$1 == 2 { print $2 }') >= 3)); }
tb_wait_until 30 "the page's id fetched again and again" _fetches &&
  tb_ok "the page is not remembered: fetched again" ||
  tb_not_ok "the page is not remembered: $(paste -sd' ' "$TB_DIR/registry.gets")"
tb_eq "/readyz: 503 while waiting" 503 "$(th_status /readyz)"
case "$(th_body /readyz)" in
*"HTTP 200 but not with a registry's answer"*) tb_ok "/readyz says the answer was no registry's" ;;
*) tb_not_ok "/readyz says why: $(th_body /readyz)" ;;
esac
th_scrape
faults=$(th_metric 'dedupd_schema_registry_faults_total{fault="bad_answer"}')
((faults >= 3)) && tb_ok "bad answers counted ($faults)" || tb_not_ok "bad answers counted: '$faults'"
tb_eq "nothing dead-lettered while the page is served" "" "$(tb_dlq_reasons)"
tb_eq "nothing committed past the waiting messages" "$before" "$(tb_committed tg payments)"

tb_registry_fault
tb_wait_until 60 "everything applied and committed" tb_at_end || tb_die "b not committed"
tb_stop "$pid" || tb_not_ok "dedupd exits 0 on SIGTERM"
tb_expect_ledger "$TB_DIR/expect.json"
tb_eq "no dead letters" "" "$(tb_dlq_reasons)"
tb_eq "each id answered properly once" "1 1|2 1" "$(tb_registry_gets | paste -sd'|')"
grep -q "waits for the schema registry: schema id 2: the schema registry answered GET .* with HTTP 200 but not with a registry's answer" \
  "$TB_DIR/run.log" && tb_ok "the wait is logged with why" || tb_not_ok "the wait is logged with why"
tb_done
