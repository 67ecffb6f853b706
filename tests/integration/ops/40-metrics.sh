#!/usr/bin/env bash
# 40: /metrics over a known stream (duplicates, bad messages, conflicts,
# rejects). Scraped while `dedupd run` keeps running, every counter equals
# what the stream implies and what the run's summary line prints after
# SIGTERM, the counters a message counts in under the route label of the one
# route of a configuration without routes (route="default") and no series
# without it; the histogram counts every committed batch; the lag of every
# partition reaches 0; /healthz and /readyz answer 200. A second instance on
# the same http.listen fails at startup, naming the address.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init metrics
tb_mock payments:3
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

tb_gen --keys 300 --dup-min 1 --dup-max 3 --partitions 3 --bad 16 --conflicts 6 --seed 40
n=$(wc -l <"$TB_DIR/stream.txt")
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
applied=$(tb_expect_get dedup_rows.applied)
dl_total=$(tb_expect_get dead_letters_total)

# rl NAME [LABELS]: the series of the default route.
rl() { echo "$1{route=\"default\"${2:+,$2}}"; }

tb_start run
pid=$TB_LAST_PID
th_wait_status 30 200 /healthz || tb_die "/healthz never answered 200"

# Done when every message is counted and finished (dead letters acked).
_all_done() {
  th_scrape
  [[ "$(th_metric "$(rl dedupd_messages_total)")" == "$n" && "$(th_metric dedupd_inflight_messages)" == 0 ]]
}
tb_wait_until 90 "every message consumed and finished" _all_done || tb_die "stream not consumed"
_lag_zero() {
  th_scrape
  [[ "$(grep -c '^dedupd_consumer_lag{group="tg",topic="payments",partition="[0-2]"} 0$' "$TB_DIR/metrics.txt")" == 3 ]]
}
tb_check "consumer lag of the 3 partitions reaches 0" tb_wait_until 20 "lag 0" _lag_zero
th_scrape
cp "$TB_DIR/metrics.txt" "$TB_DIR/metrics-final.txt"

tb_eq "dedupd_messages_total" "$n" "$(th_metric "$(rl dedupd_messages_total)")"
tb_eq "dedupd_applied_total" "$applied" "$(th_metric "$(rl dedupd_applied_total)")"
tb_eq "dedupd_duplicates_total" "$((n - applied - dl_total))" \
  "$(th_metric "$(rl dedupd_duplicates_total)")"
tb_eq "dedupd_conflicts_total" "$(tb_expect_get dead_letters.conflict)" \
  "$(th_metric "$(rl dedupd_conflicts_total)")"
for reason in bad_json key_missing key_too_long rejected conflict; do
  tb_eq "dedupd_dead_letters_total{reason=\"$reason\"}" "$(tb_expect_get dead_letters.$reason)" \
    "$(th_metric "$(rl dedupd_dead_letters_total "reason=\"$reason\"")")"
done
tb_eq "no payload_too_large / retries_exhausted" "0 0" \
  "$(th_metric "$(rl dedupd_dead_letters_total 'reason="payload_too_large"')") $(th_metric "$(rl dedupd_dead_letters_total 'reason="retries_exhausted"')")"
tb_eq "dedupd_retries_total" 0 "$(th_metric "$(rl dedupd_retries_total)")"
tb_eq "no series of a counter per message without the route label" "" \
  "$(grep -E '^dedupd_(messages|applied|duplicates|conflicts|retries|batched|batch_declined|dead_letters)_total[ {]' "$TB_DIR/metrics.txt" | grep -v '{route="default"' || true)"
tb_eq "dedupd_db_errors_total{class=\"fatal\"}" 0 "$(th_metric 'dedupd_db_errors_total{class="fatal"}')"
tb_check "dedupd_db_errors_total{class=\"retriable\"} present" \
  test -n "$(th_metric 'dedupd_db_errors_total{class="retriable"}')"
batches=$(th_metric dedupd_batches_total)
tb_check "at least one batch committed ($batches)" test "${batches:-0}" -ge 1
tb_eq "histogram count = committed batches" "$batches" "$(th_metric dedupd_batch_seconds_count)"
tb_eq "histogram +Inf bucket = count" "$batches" "$(th_metric 'dedupd_batch_seconds_bucket{le="+Inf"}')"
tb_check "histogram buckets are cumulative" awk '
  /^dedupd_batch_seconds_bucket/ { if ($2 + 0 < prev) bad = 1; prev = $2 + 0; n++ }
  END { exit (bad || n != 12) }' "$TB_DIR/metrics.txt"
tb_eq "dedupd_assigned_partitions" 3 "$(th_metric dedupd_assigned_partitions)"
tb_check "dedupd_fetch_wait_seconds_total is seconds ($(th_metric dedupd_fetch_wait_seconds_total))" \
  grep -Eq '^dedupd_fetch_wait_seconds_total [0-9]+\.[0-9]{3}$' "$TB_DIR/metrics.txt"
tb_check "counters are typed" grep -q '^# TYPE dedupd_applied_total counter$' "$TB_DIR/metrics.txt"

# The process's own figures, under the names Prometheus clients use.
_between() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; }
started=$(($(date +%s) - $(ps -o etimes= -p "$pid")))
tb_check "process_start_time_seconds is when dedupd started ($started)" \
  _between "$(th_metric process_start_time_seconds)" $((started - 2)) $((started + 2))
tb_check "process_cpu_seconds_total counts the run's CPU" \
  _between "$(th_metric process_cpu_seconds_total)" 0.001 3600
rss=$(($(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status") * 1024))
tb_check "process_resident_memory_bytes is dedupd's RSS ($rss)" \
  _between "$(th_metric process_resident_memory_bytes)" $((rss / 2)) $((rss * 2))
tb_check "process_open_fds counts dedupd's descriptors" \
  _between "$(th_metric process_open_fds)" 3 "$(th_metric process_max_fds)"
tb_check "process_cpu_seconds_total is typed counter" \
  grep -q '^# TYPE process_cpu_seconds_total counter$' "$TB_DIR/metrics.txt"

tb_eq "/healthz" 200 "$(th_status /healthz)"
tb_eq "/readyz" 200 "$(th_status /readyz)"
tb_eq "unknown path" 404 "$(th_status /nope)"

# A second instance cannot take the port: a startup error, exit non-zero.
rc=0
timeout --foreground "$(tb_secs 30)" "$DEDUPD" run -c "$TB_CONF" >"$TB_DIR/second.log" 2>&1 || rc=$?
tb_eq "second instance on the same http.listen exits 1" 1 "$rc"
tb_check "its error names the address and the cause" \
  grep -q "cannot listen on http.listen .*127.0.0.1:$port.*Address already in use" "$TB_DIR/second.log"

rc=0
tb_stop "$pid" || rc=$?
tb_eq "SIGTERM: exit 0" 0 "$rc"
# The summary printed at exit matches the last scrape (nothing arrived since).
for f in messages applied duplicates conflicts retries; do
  m=$(rl "dedupd_${f}_total")
  tb_eq "summary $f = $m" "$(TB_DIR=$TB_DIR th_metric "$m")" "$(tb_summary "$f")"
done
tb_eq "summary batches = dedupd_batches_total" "$(th_metric dedupd_batches_total)" \
  "$(tb_summary batches)"
for reason in bad_json key_missing key_too_long rejected conflict; do
  tb_eq "summary dlq_$reason" "$(th_metric "$(rl dedupd_dead_letters_total "reason=\"$reason\"")")" \
    "$(tb_summary "dlq_$reason")"
done
tb_eq "no summary_route line without routes" 0 "$(grep -c '^summary_route ' "$TB_DIR/run.log" || true)"
tb_eq "summary dead_letters" "$dl_total" "$(tb_summary dead_letters)"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_done
