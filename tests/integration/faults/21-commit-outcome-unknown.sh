#!/usr/bin/env bash
# 21: a COMMIT whose outcome is unknown (the connection drops after the
# server committed, before the reply arrives) is resolved by the claim, not
# by guessing. DEDUPD_TEST_FAULTS makes every 3rd COMMIT of each lane succeed
# on the server but report "lost connection": the lane replays the batch, the
# claim finds its own rows applied with the same hash, and nothing is
# applied twice or lost.
source "$(dirname "$0")/../lib.sh"
tb_init commit_unknown
tb_mock payments:4
TB_WORKERS=2 TB_BATCH_MAX=50 tb_config
tb_migrate || tb_die "migrate failed"
tb_gen --keys 800 --dup-min 1 --dup-max 3 --partitions 4 --bad 10 --conflicts 5 --seed 21
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"

DEDUPD_TEST_FAULTS=commit_lost=3 tb_run || tb_die "dedupd run failed"
injected=$(grep -c "Lost connection to server during COMMIT (injected" "$TB_DIR/run.log" || true)
tb_check "COMMIT replies were lost and the batches replayed ($injected)" test "$injected" -ge 5
tb_check "the replays were counted as database retries" test "$(tb_summary db_retries)" -ge 5
tb_expect_ledger "$TB_DIR/expect.json"
tb_expect_outcome "$TB_DIR/expect.json"
tb_assert_committed_at_end
tb_done
