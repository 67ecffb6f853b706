#!/usr/bin/env bash
# 68: a configuration without routes runs as it always did, as the one
# route "default": the same dedup table and keys, the same output of
# migrate, check, the summary and the logs, the same metrics with the label
# route="default" added to the counters a message counts in and to external
# mode's (no other change: the same names, one series each); stats keeps
# its JSON shape (routes added), replay its CSV. Then the same topic under
# a configuration with routes, its route naming that table and key: every
# key the old configuration recorded is known (duplicates, the same
# conflicts), and a second route beside it applies its own.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init routes_single_route
tb_mock payments:2 coupons:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"
tb_eq "migrate: its line as before" \
  "dedup table dedup_record is at schema version 2, key format 2; handler ledger migrated." \
  "$(grep '^dedup table' "$TB_DIR/migrate.log")"

tb_gen --keys 200 --dup-min 1 --dup-max 3 --partitions 2 --bad 8 --conflicts 4 --seed 59
n=$(wc -l <"$TB_DIR/stream.txt")
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
applied=$(tb_expect_get dedup_rows.applied)

tb_start run
pid=$TB_LAST_PID
_all_done() {
  th_scrape
  [[ "$(th_metric 'dedupd_messages_total{route="default"}')" == "$n" &&
    "$(th_metric dedupd_inflight_messages)" == 0 ]]
}
tb_wait_until 60 "every message consumed and finished" _all_done || tb_die "stream not consumed"
th_scrape
rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"

# The dedup table: the same table, the keys the template renders.
tb_eq "dedup_record: the keys of pay:\${merchant_id}:\${order_no}" "$applied $applied 0" \
  "$(tb_sql "SELECT SUM(status = 1), SUM(status = 1 AND biz_key REGEXP '^pay:m[0-9]{3}:P[0-9]{8}\$'),
                    (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
                     AND TABLE_NAME LIKE 'dedup\\_%' AND TABLE_NAME <> 'dedup_record')
             FROM dedup_record" | tr '\t' ' ')"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"

# The metrics: the same names as without routes, the counters of a message
# under route="default", one series each, nothing else labelled.
tb_eq "metric names as before" \
  "dedupd_applied_total dedupd_assigned_partitions dedupd_batch_declined_total dedupd_batch_seconds dedupd_batched_total dedupd_batches_total dedupd_build_info dedupd_claim_races_total dedupd_conflicts_total dedupd_consumer_lag dedupd_db_errors_total dedupd_dead_letter_partitions_skipped dedupd_dead_letters_total dedupd_duplicates_total dedupd_external_lost_claims_total dedupd_external_reconcile_total dedupd_external_takeovers_total dedupd_external_waits_total dedupd_fetch_wait_seconds_total dedupd_inflight_messages dedupd_messages_total dedupd_position_gap_offsets_total dedupd_position_gaps_total dedupd_position_rewinds_total dedupd_retries_total dedupd_running dedupd_tombstones_skipped_total" \
  "$(awk '/^# TYPE dedupd_/ { print $3 }' "$TB_DIR/metrics.txt" | sort | paste -sd' ')"
tb_eq "per-message counters: one series each, route=\"default\"" \
  "dedupd_applied_total{route=\"default\"}|dedupd_batch_declined_total{route=\"default\"}|dedupd_batched_total{route=\"default\"}|dedupd_conflicts_total{route=\"default\"}|dedupd_duplicates_total{route=\"default\"}|dedupd_messages_total{route=\"default\"}|dedupd_retries_total{route=\"default\"}" \
  "$(grep -E '^dedupd_(messages|applied|duplicates|conflicts|retries|batched|batch_declined)_total' "$TB_DIR/metrics.txt" |
    cut -d' ' -f1 | sort | paste -sd'|')"
tb_eq "dead letters: one series per reason, route=\"default\"" 11 \
  "$(grep -c '^dedupd_dead_letters_total{route="default",reason="[a-z_]*"} ' "$TB_DIR/metrics.txt")"
tb_eq "external mode's counters: route=\"default\" too" \
  "dedupd_external_lost_claims_total{route=\"default\"}|dedupd_external_takeovers_total{route=\"default\"}|dedupd_external_waits_total{route=\"default\"}" \
  "$(grep -E '^dedupd_external_(waits|takeovers|lost_claims)_total' "$TB_DIR/metrics.txt" |
    cut -d' ' -f1 | sort | paste -sd'|')"
tb_eq "the other counters and gauges carry no route" "" \
  "$(grep -E '^dedupd_' "$TB_DIR/metrics.txt" | grep 'route=' |
    grep -Ev '^dedupd_(messages|applied|duplicates|conflicts|retries|batched|batch_declined|dead_letters|tombstones_skipped|external_[a-z_]*)_total\{route="default"' || true)"
tb_eq "metrics and summary agree" \
  "$(th_metric 'dedupd_applied_total{route="default"}') $(th_metric 'dedupd_dead_letters_total{route="default",reason="conflict"}')" \
  "$(tb_summary_sum applied "$TB_DIR/run.log") $(tb_summary_sum dlq_conflict "$TB_DIR/run.log")"

# The summary and the logs, as before.
tb_eq "summary fields as before" \
  "messages applied duplicates conflicts retries dead_letters dlq_bad_json dlq_key_missing dlq_key_too_long dlq_payload_too_large dlq_conflict dlq_rejected dlq_retries_exhausted dlq_unresolved dlq_schema_unknown dlq_bad_avro dlq_tombstone db_retries batches batched batch_declined claim_races position_rewinds position_gaps latency_p50_le_ms latency_p99_le_ms active_s fetch_wait_s" \
  "$(grep '^summary ' "$TB_DIR/run.log" | tail -n 1 | tr ' ' '\n' | tail -n +2 | cut -d= -f1 | paste -sd' ')"
tb_eq "no summary_route line" 0 "$(grep -c '^summary_route' "$TB_DIR/run.log" || true)"
tb_check "the first line names topics and handler as before" \
  grep -q 'msg="Starting dedupd .*, group tg, topics payments, handler .*ledger.so, 2 worker(s)."' \
  "$TB_DIR/run.log"
tb_eq "no route field in the log" 0 "$(grep -c ' route=' "$TB_DIR/run.log" || true)"
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.txt" 2>&1 || tb_not_ok "check failed"
tb_eq "check: its lines as before" \
  "ok   dedup table: dedup_record at schema version 2|ok   key format: dedup_record records format 2|ok   kafka: topic payments has 2 partition(s) at $TB_BROKERS" \
  "$(grep -E '^ok   (dedup table|key format|kafka):' "$TB_DIR/check.txt" | paste -sd'|')"
tb_eq "check: no route in it" 0 "$(grep -c 'route [a-z]*:' "$TB_DIR/check.txt" || true)"
tb_check "check: the handler's line as before" \
  grep -q '^ok   handler: ledger (.*ledger.so), ABI version 7$' "$TB_DIR/check.txt"
"$DEDUPD" stats -c "$TB_CONF" --format json >"$TB_DIR/stats.json" 2>"$TB_DIR/stats.err" ||
  tb_not_ok "stats failed: $(cat "$TB_DIR/stats.err")"
tb_eq "stats: the table at the top, as before, and the one route" "dedup_record $applied default" \
  "$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print(s["table"]["name"], s["table"]["applied"], ",".join(r["route"] for r in s["routes"]))' "$TB_DIR/stats.json")"
"$DEDUPD" replay -c "$TB_CONF" --from earliest --format csv --report "$TB_DIR/report.csv" \
  2>>"$TB_DIR/replay.log" || tb_die "replay failed"
tb_eq "replay: the CSV header as before" \
  "status,reason,topic,partition,offset,key,key_hex,kafka_key,kafka_key_hex,hash,stored_hash,detail,apply,apply_error" \
  "$(head -n 1 "$TB_DIR/report.csv")"

# The same topic under routes: the route of the payments names the table
# and the key the configuration without routes had, and knows every key.
cp "$TB_CONF" "$TB_DIR/single.conf"
TB_GROUP=tg2 tb_config_routes "
  { name = \"payments\"; topics = [\"payments\"]; key = \"pay:\${merchant_id}:\${order_no}\";
    table = \"dedup_record\"; handler = { path = \"$DD_LEDGER_SO\"; }; },
  { name = \"coupons\"; topics = [\"coupons\"]; key = \"coupon:\${code}:\${event_id}\";
    table = \"dedup_coupon\"; handler = { path = \"$TB_COUPON_SO\"; };
    dlq = { topic = \"coupons.dead\"; }; }"
tb_migrate || tb_die "migrate of the routes failed"
printf '0\t-\t{"event_id":"e%d","event":"granted","code":"C%d","user_id":"u1","amount_cents":100}\n' \
  1 1 2 2 3 3 | tb_produce coupons 2>/dev/null || tb_die "produce coupons failed"
tb_run || tb_die "dedupd run with routes failed"
tb_eq "route payments: nothing applied again, every key known" \
  "0 $(($(tb_expect_get dedup_rows.applied) + $(tb_expect_get dedup_rows.failed)))" \
  "$(tb_summary_route payments applied) $(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_eq "route payments: the conflicts are conflicts again" "$(tb_expect_get dead_letters.conflict)" \
  "$(tb_summary_route payments conflicts)"
tb_eq "route coupons: its three grants" "3 3 3" \
  "$(tb_summary_route coupons applied) $(tb_sql 'SELECT COUNT(*) FROM dedup_coupon') $(tb_sql 'SELECT COUNT(*) FROM coupon')"
tb_expect_ledger "$TB_DIR/expect.json"
tb_done
