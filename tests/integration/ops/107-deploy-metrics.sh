#!/usr/bin/env bash
# 107: every dedupd_* series the alert rules (deploy/prometheus) and the
# Grafana dashboard (deploy/grafana) name is on a real /metrics page. The
# page is scraped from a dedupd with every family present: two database
# shards (dedupd_shard_*), a route in external mode whose compensation scan
# has counted (dedupd_processing_*), the outbox relay (dedupd_outbox_*), a
# consumer lag, the latency histograms. A rule or panel naming a series
# dedupd does not serve (a typo, a renamed metric) fails here; the series
# of keys set aside are let off while no file of src/ names them.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init deploy_metrics
tb_shards 2
tb_mock notes:1
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
export TB_HANDLER="$DD_NOTIFY_SO" TB_KEY='n:${id}' TB_WORKERS=1
export TB_HANDLER_CONFIG="socket = \"$DD_TEST_MYSQL_SOCKET\"; user = \"$TB_RT_USER\"; database = \"$TB_DB\";"
tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" \
  'external = { lease = "2s"; scan_interval = "1s"; scan_after = "1h"; };' \
  'outbox = { enabled = true; poll_interval = "50ms"; };'
tb_migrate || tb_die "migrate failed"
printf '0\t-\t{"id":"%d","to":"x@example.com","body":"b"}\n' 1 2 3 | tb_produce 2>/dev/null ||
  tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
_full() {
  th_scrape
  grep -q '^dedupd_processing_stuck{' "$TB_DIR/metrics.txt" &&
    grep -q '^dedupd_shard_up{shard="1"} 1' "$TB_DIR/metrics.txt" &&
    grep -q '^dedupd_consumer_lag{' "$TB_DIR/metrics.txt" &&
    grep -q '^dedupd_outbox_backlog ' "$TB_DIR/metrics.txt" &&
    grep -q '^dedupd_end_to_end_seconds_count{route="default"} [1-9]' "$TB_DIR/metrics.txt"
}
tb_check "the page has every family" tb_wait_until 60 "shard, processing, outbox, lag and latency series" _full
tb_stop "$pid" || tb_not_ok "run exited non-zero"
out=$(python3 "$DD_TEST_SRC_DIR/scripts/lib/monitoring.py" names "$TB_DIR/metrics.txt" \
  "$DD_TEST_SRC_DIR/deploy/prometheus/dedupd-rules.yaml" \
  "$DD_TEST_SRC_DIR/deploy/grafana/dedupd-dashboard.json" \
  --pending dedupd_keys_set_aside --pending dedupd_keys_set_aside_oldest_seconds \
  --pending dedupd_keys_set_aside_fallbacks_total --src "$DD_TEST_SRC_DIR/src" 2>&1) || true
echo "$out" | sed 's/^/#   /'
tb_eq "the rules' and the dashboard's series are dedupd's" 0 "$(grep -c '^FAIL' <<<"$out")"
tb_eq "both files checked" 2 "$(grep -c '^ok' <<<"$out")"
# the check itself: a series dedupd does not serve is caught
sed 's/dedupd_conflicts_total/dedupd_conflict_total/' \
  "$DD_TEST_SRC_DIR/deploy/prometheus/dedupd-rules.yaml" >"$TB_DIR/typo.yaml"
tb_not_ok_if_passes() {
  ! python3 "$DD_TEST_SRC_DIR/scripts/lib/monitoring.py" names "$TB_DIR/metrics.txt" "$1" >/dev/null 2>&1
}
tb_check "a misspelt series fails the check" tb_not_ok_if_passes "$TB_DIR/typo.yaml"
tb_done
