#!/usr/bin/env bash
# 05: dedup.lane_key routes by merchant: 4 workers, every merchant's payments
# on one worker, so the ledger's balance rows are never fought over between
# workers. Still exactly once with every key's copies on one lane. (Lanes
# may still meet in the dedup table's index gaps; those rare deadlocks are
# retried, so the test logs their count rather than asserting zero.)
source "$(dirname "$0")/../lib.sh"
tb_init lane_key
tb_mock payments:4
TB_WORKERS=4 TB_BATCH_MAX=100 TB_DEDUP_EXTRA='lane_key = "${merchant_id}";' tb_config
tb_migrate || tb_die "migrate failed"
tb_gen --keys 1200 --dup-min 1 --dup-max 3 --partitions 4 --bad 10 --conflicts 8 --seed 5
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "dedupd run failed"
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_log "deadlock replays: $(grep -c 'Deadlock found' "$TB_DIR/run.log" || true)"
tb_done
