#!/usr/bin/env bash
# 80: a shard that accepts connections and never answers. Two shards; in
# the middle of a run shard 1's MariaDB is stopped with SIGSTOP (its sockets
# still accept, nothing answers). Within the readiness ping's timeout (5 s,
# checked with some slack): dedupd_shard_up{shard="1"} is 0, /readyz answers
# 503 naming shard 1, and shard 1's database errors are counted. Shard 0
# keeps applying. SIGTERM then (shutdown_timeout = "5s") ends the process
# within shutdown_timeout + 15 s although a lane waits on the stopped
# server. The server is continued with SIGCONT, a second run with
# --exit-at-end applies the rest: every key exactly once, in its shard,
# offsets committed at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
tb_init shards_shard_stopped
tb_shards 2
tb_mock payments:4
port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
TB_WORKERS=2 TB_BATCH_MAX=20 TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' \
  tb_config "$TB_CONF" "http = { listen = \"127.0.0.1:$port\"; };" 'shutdown_timeout = "5s";' \
  "retry = { backoff_initial = \"100ms\"; backoff_max = \"1s\"; };"
tb_migrate || tb_die "migrate failed"
tb_gen --keys 2000 --dup-min 1 --dup-max 2 --partitions 4 --merchants 30 --seed 80
n=$(wc -l <"$TB_DIR/stream.txt")
first=$((n / 4))
head -n "$first" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start run
pid=$TB_LAST_PID
applied() { tb_shard_sql "$1" "SELECT COUNT(*) FROM dedup_record WHERE status = 1"; }
has_applied() { (($(applied "$1") > 0)); }
for k in 0 1; do
  tb_wait_until 60 "shard $k applies keys" has_applied "$k" || tb_die "shard $k applied nothing"
done
th_wait_status 30 200 /readyz || tb_die "never ready"

stopped=$(cat "$TB_DIR/shard1/mysqld.pid")
kill -STOP "$stopped"
tb_log "shard 1 (pid $stopped) stopped with SIGSTOP"
t0=$(date +%s)
before=$(applied 0)
tail -n +"$((first + 1))" "$TB_DIR/stream.txt" | tb_produce 2>/dev/null || tb_die "produce failed"
shard1_down() { th_scrape && [[ "$(th_metric 'dedupd_shard_up{shard="1"}')" == 0 ]]; }
tb_check "dedupd_shard_up{shard=\"1\"} is 0" tb_wait_until 30 "shard 1 down in /metrics" shard1_down
took=$(($(date +%s) - t0))
tb_check "marked down within the ping timeout, 5 s, and some slack ($took s)" test "$took" -le 9
tb_eq "/readyz: 503" 503 "$(th_status /readyz)"
tb_check "/readyz names shard 1" bash -c \
  "grep -q '^not ready: shard 1 (.*shard1/mysqld.sock)' <<<\"\$1\"" _ "$(th_body /readyz)"
tb_check "shard 1's database errors are counted" test \
  "$(th_metric 'dedupd_db_errors_total{class="retriable",shard="1"}')" -gt 0
tb_eq "shard 0 is up" 1 "$(th_metric 'dedupd_shard_up{shard="0"}')"
more0() { (($(applied 0) > before)); }
tb_check "shard 0 keeps applying (from $before)" tb_wait_until 30 "shard 0 applies more" more0

start=$(date +%s)
rc=0
tb_stop "$pid" || rc=$?
took=$(($(date +%s) - start))
tb_log "SIGTERM with shard 1 stopped: exit $rc after $took s"
tb_check "SIGTERM ends within shutdown_timeout + 15 s ($took s)" test "$took" -le 20
tb_check "it exited on its own (not killed by the test)" test "$rc" -ne 137

kill -CONT "$stopped"
tb_run || tb_die "the second run failed"
tb_shards_expect_ledger "$TB_DIR/expect.json"
tb_shards_expect_placed
tb_assert_committed_at_end
tb_done
