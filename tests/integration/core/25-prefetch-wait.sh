#!/usr/bin/env bash
# 25: waiting on the fetcher is measured, and the default prefetch queue does
# not wait. librdkafka 2.0.2 stops fetching once its queue holds
# queued.max.messages.kbytes or queued.min.messages, and looks again only on
# a one-second tick. A first group with a 256 KB queue on a 3 MB partition
# therefore waits on almost every tick: dedupd counts that time in
# fetch_wait_s (dedupd_fetch_wait_seconds_total on /metrics), and still
# applies everything once. A second group replays the topic with dedupd's
# default queue (64 MB): it waits a fraction of that, though it has more to
# do per second (every message a duplicate).
source "$(dirname "$0")/../lib.sh"
tb_init prefetch_wait
tb_mock payments:1
TB_GROUP=small TB_KAFKA_PROPS="queued.max.messages.kbytes=256 queued.min.messages=1000" tb_config
tb_migrate || tb_die "migrate failed"
tb_gen --keys 14000 --dup-min 1 --dup-max 1 --partitions 1 --seed 25
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "small-queue run failed"
small=$(tb_summary fetch_wait_s)
tb_log "256 KB queue: fetch_wait_s=$small active_s=$(tb_summary active_s)"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end small
tb_check "the small queue's waits are counted (fetch_wait_s $small >= 1)" \
  awk -v w="$small" 'BEGIN { exit !(w >= 1.0) }'

TB_GROUP=default tb_config
tb_run || tb_die "default-queue run failed"
dflt=$(tb_summary fetch_wait_s)
tb_log "default queue: fetch_wait_s=$dflt active_s=$(tb_summary active_s)"
tb_eq "the replay applied nothing" 0 "$(tb_summary applied)"
tb_eq "the replay: every message a duplicate" "$(tb_expect_get total_messages)" \
  "$(tb_summary duplicates)"
tb_assert_committed_at_end default
tb_check "the default queue waits less than a quarter of that (fetch_wait_s $dflt)" \
  awk -v d="$dflt" -v s="$small" 'BEGIN { exit !(d != "" && d * 4 < s) }'
tb_done
