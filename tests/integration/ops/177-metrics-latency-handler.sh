#!/usr/bin/env bash
# 177: what a sender waits for, and a handler's own metrics, on /metrics.
# Messages are produced with known Kafka timestamps: now, 65 s in the past
# and an hour ahead (a producer's clock ahead of dedupd's). Scraped while
# dedupd runs, each applied message is in dedupd_end_to_end_seconds's
# bucket of its age (the old ones above 60 s, the rest at most 60 s, the
# one from the future at 0), duplicates are not, and every message is in
# dedupd_poll_to_commit_seconds. The handler (th_metrics, no tables)
# counts each message by the payload's kind and observes its amount: its
# counter and histogram are served as dedupd_handler_th_metrics_*, with
# the route label, one count per applied message. A second phase brings
# 110 new kinds: the counter keeps 100 series and counts the rest in the
# _overflow series, saying so once in the log. End state: one dedup row per
# id, offsets committed.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init metrics_latency
tb_mock payments:2
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
export TB_HANDLER="$DD_TEST_HANDLER_DIR/th_metrics.so" TB_KEY='m:${id}'
tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };"
tb_migrate || tb_die "migrate failed"

# produce_at MS: the stdin lines, each with the Kafka timestamp MS.
produce_at() { "$DDTK" produce -b "$TB_BROKERS" -t "$TB_TOPIC" -T "$1"; }
amounts=(0.5 5 50 500)
now_ms=$(date +%s%3N)
for i in $(seq 1 40); do
  printf '%d\t-\t{"id":"n%d","kind":"%s","amount":%s}\n' $((i % 2)) "$i" \
    "$( ((i % 2)) && echo a || echo b)" "${amounts[$((i % 4))]}"
done >"$TB_DIR/now.txt"
produce_at "$now_ms" <"$TB_DIR/now.txt" || tb_die "produce failed"
for i in $(seq 1 10); do printf '%d\t-\t{"id":"o%d","kind":"old","amount":5}\n' $((i % 2)) "$i"; done |
  produce_at $((now_ms - 65000)) || tb_die "produce failed"
printf '0\t-\t{"id":"f1","kind":"future"}\n' | produce_at $((now_ms + 3600000)) ||
  tb_die "produce failed"
head -10 "$TB_DIR/now.txt" | produce_at "$now_ms" || tb_die "produce failed" # duplicates

tb_start run
pid=$TB_LAST_PID
# rl NAME [LABELS]: the series of the default route.
rl() { echo "$1{route=\"default\"${2:+,$2}}"; }
e2e() { th_metric "$(rl dedupd_end_to_end_seconds_bucket "le=\"$1\"")"; }
p2c() { th_metric "$(rl dedupd_poll_to_commit_seconds_bucket "le=\"$1\"")"; }
hm() { th_metric "$(rl "dedupd_handler_th_metrics_$1" "${2:-}")"; }
# hm_is WANT NAME [LABELS]: the handler's series is WANT; at least WANT
# when a batch was rolled back and run again (a deadlock between the
# lanes), which calls the handler again, and counts again.
hm_is() {
  local got
  got=$(hm "$2" "${3:-}")
  echo "# $2{${3:-}} = $got"
  if [[ "$(th_metric 'dedupd_db_errors_total{class="retriable"}')" == 0 ]]; then
    [[ "$got" == "$1" ]]
  else
    awk -v g="$got" -v w="$1" 'BEGIN { exit !(g != "" && g >= w) }'
  fi
}
_consumed() {
  th_scrape
  [[ "$(th_metric "$(rl dedupd_messages_total)")" == "$1" && "$(th_metric dedupd_inflight_messages)" == 0 ]]
}
tb_wait_until 60 "61 messages consumed and finished" _consumed 61 || tb_die "stream not consumed"

tb_eq "applied" 51 "$(th_metric "$(rl dedupd_applied_total)")"
tb_eq "duplicates" 10 "$(th_metric "$(rl dedupd_duplicates_total)")"
tb_eq "end to end: every applied message, no duplicate" 51 "$(th_metric "$(rl dedupd_end_to_end_seconds_count)")"
tb_eq "end to end: the one from the future counts as 0" 1 "$(e2e 0.001)"
tb_eq "end to end: 41 within 60 s" 41 "$(e2e 60)"
tb_eq "end to end: the 10 produced 65 s before, within 120 s" 51 "$(e2e 120)"
tb_eq "end to end: +Inf" 51 "$(e2e +Inf)"
tb_check "end to end: the sum counts the old ones' 650 s" awk -v s="$(th_metric "$(rl dedupd_end_to_end_seconds_sum)")" \
  'BEGIN { exit !(s >= 650 && s < 1200) }'
tb_eq "poll to commit: every message" 61 "$(th_metric "$(rl dedupd_poll_to_commit_seconds_count)")"
tb_eq "poll to commit: all within 60 s" 61 "$(p2c 60)"
tb_check "histograms typed" grep -q '^# TYPE dedupd_poll_to_commit_seconds histogram$' "$TB_DIR/metrics.txt"

# The handler's metrics: one call per applied message.
tb_check "handler: calls_total = applied" hm_is 51 calls_total
tb_check "handler: kind a" hm_is 20 messages_total 'kind="a"'
tb_check "handler: kind b" hm_is 20 messages_total 'kind="b"'
tb_check "handler: kind old" hm_is 10 messages_total 'kind="old"'
tb_check "handler: kind future" hm_is 1 messages_total 'kind="future"'
tb_check "handler: amount <= 1" hm_is 10 amount_bucket 'le="1"'
tb_check "handler: amount <= 10 (the old ones' 5s too)" hm_is 30 amount_bucket 'le="10"'
tb_check "handler: amount <= 100" hm_is 40 amount_bucket 'le="100"'
tb_check "handler: amounts" hm_is 50 amount_count
tb_check "handler: their sum" hm_is 5605 amount_sum
tb_check "handler: HELP from metric_new" grep -qx \
  "# HELP dedupd_handler_th_metrics_messages_total Messages handled, by the payload's kind." "$TB_DIR/metrics.txt"
tb_check "handler: TYPE histogram" grep -qx \
  '# TYPE dedupd_handler_th_metrics_amount histogram' "$TB_DIR/metrics.txt"
tb_eq "handler: the refused calls said once per metric" 2 \
  "$(grep -c 'a call counted nothing' "$TB_DIR/run.log")"

# Phase 2: 110 more kinds; 96 get a series of their own, 14 overflow.
for i in $(seq 1 110); do printf '%d\t-\t{"id":"u%d","kind":"u%03d"}\n' $((i % 2)) "$i" "$i"; done |
  tb_produce || tb_die "produce failed"
tb_wait_until 60 "171 messages consumed and finished" _consumed 171 || tb_die "phase 2 not consumed"
series=$(grep -c '^dedupd_handler_th_metrics_messages_total{route="default",kind="[^_]' "$TB_DIR/metrics.txt")
tb_eq "handler: 100 series of kinds" 100 "$series"
tb_check "handler: 14 kinds in the overflow series" hm_is 14 messages_total 'kind="_overflow"'
tb_check "handler: the first kinds kept their series" hm_is 20 messages_total 'kind="a"'
tb_eq "the overflow said once" 1 "$(grep -c 'metric dedupd_handler_th_metrics_messages_total has 100 series' "$TB_DIR/run.log")"
tb_eq "end to end: every applied message" 161 "$(th_metric "$(rl dedupd_end_to_end_seconds_count)")"

tb_stop "$pid" || tb_not_ok "run exited non-zero"
tb_eq "one dedup row per id" 161 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_assert_committed_at_end
tb_done
