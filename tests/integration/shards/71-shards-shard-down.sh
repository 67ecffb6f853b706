#!/usr/bin/env bash
# 71: three database shards; shard 2's MariaDB is killed in the middle of a
# run and restarted later. While it is down, the messages of shards 0 and 1
# keep being applied (their applied counts rise, measured in their
# databases), /readyz answers 503 naming the down shard, and
# dedupd_shard_up{shard="2"} is 0. After the restart everything is applied:
# every key exactly once, in its shard, offsets committed at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init shards_shard_down
tb_shards 3
tb_mock payments:4
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_WORKERS=2 TB_BATCH_MAX=50 TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" \
  "retry = { backoff_initial = \"100ms\"; backoff_max = \"1s\"; };"
tb_migrate || tb_die "migrate failed"

tb_gen --keys 3000 --dup-min 1 --dup-max 2 --partitions 4 --merchants 30 --seed 71
n=$(wc -l <"$TB_DIR/stream.txt")
first=$((n / 4))
head -n "$first" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID

applied() { tb_shard_sql "$1" "SELECT COUNT(*) FROM dedup_record WHERE status = 1"; }
applied01() { echo $(($(applied 0) + $(applied 1))); }
has_applied() { (($(applied "$1") > 0)); }
at_end() { [[ "$(tb_committed | awk '{ print $1, $2 }')" == "$(tb_watermarks | awk '{ print $1, $3 }')" ]]; }
for k in 0 1 2; do
  tb_wait_until 60 "shard $k applies keys" has_applied "$k" || tb_die "shard $k applied nothing"
done
tb_wait_until 60 "the first part is committed" at_end || tb_die "the first part was not committed"

tb_shard_kill9 2
tb_log "shard 2 killed"
before=$(applied01)
tail -n +"$((first + 1))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
rising() { (($(applied01) >= before + 300)); }
tb_check "shards 0 and 1 keep applying while shard 2 is down (from $before)" \
  tb_wait_until 60 "300 more keys applied in shards 0 and 1" rising
tb_log "shards 0 and 1: $before -> $(applied01) applied while shard 2 is down"
tb_check "shard 2 is still down" bash -c "! kill -0 \$(cat '$TB_DIR/shard2/mysqld.pid') 2>/dev/null"
th_wait_status 30 503 /readyz || true
tb_eq "/readyz: 503 while shard 2 is down" 503 "$(th_status /readyz)"
tb_check "/readyz names the down shard" bash -c \
  "grep -q '^not ready: shard 2 (.*shard2/mysqld.sock) unreachable: ' <<<\"\$1\"" _ "$(th_body /readyz)"
shard2_down() { th_scrape && [[ "$(th_metric 'dedupd_shard_up{shard="2"}')" == 0 ]]; }
tb_check "dedupd_shard_up{shard=\"2\"} is 0" tb_wait_until 30 "shard 2 down in /metrics" shard2_down
tb_eq "dedupd_shard_up of shards 0 and 1" "1 1" \
  "$(th_metric 'dedupd_shard_up{shard="0"}') $(th_metric 'dedupd_shard_up{shard="1"}')"
tb_check "shard 2's database errors are counted" test \
  "$(th_metric 'dedupd_db_errors_total{class="retriable",shard="2"}')" -gt 0
tb_check "dedupd is still running" kill -0 "$pid"

tb_shard_restart 2
tb_log "shard 2 restarted"
tb_wait_until 120 "everything committed after the restart" at_end || tb_die "not everything was committed"
th_wait_status 30 200 /readyz || true
tb_eq "/readyz: 200 again" 200 "$(th_status /readyz)"
th_scrape
tb_eq "dedupd_shard_up{shard=\"2\"} is 1 again" 1 "$(th_metric 'dedupd_shard_up{shard="2"}')"
tb_eq "the shards' applied counters add up to the applied keys" \
  "$(tb_expect_get unique_keys_applied)" \
  "$(grep '^dedupd_shard_applied_total{shard=' "$TB_DIR/metrics.txt" | awk '{ s += $2 } END { print s + 0 }')"
tb_stop "$pid" || tb_not_ok "dedupd run exited non-zero after SIGTERM"

tb_shards_expect_ledger "$TB_DIR/expect.json"
tb_shards_expect_placed
tb_assert_committed_at_end
tb_done
