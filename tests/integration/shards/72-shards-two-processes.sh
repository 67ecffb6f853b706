#!/usr/bin/env bash
# 72: two dedupd processes in one consumer group over three database
# shards, the partitions shared between them: 1,500 keys delivered 1-3
# times (across partitions), with conflicts and bad messages. End state:
# every key applied exactly once, in the shard the routing function names;
# both processes applied keys, and together exactly the keys there are;
# dead letters by reason; offsets committed at the end.
source "$(dirname "$0")/../lib.sh"
tb_init shards_two_processes
tb_shards 3
tb_mock payments:4
TB_WORKERS=2 TB_DEDUP_EXTRA='shard_key = "${merchant_id}";' tb_config
tb_migrate || tb_die "migrate failed"
cp "$TB_CONF" "$TB_DIR/a.conf"
cp "$TB_CONF" "$TB_DIR/b.conf"

tb_gen --keys 1500 --dup-min 1 --dup-max 3 --partitions 4 --merchants 20 --bad 20 --conflicts 10 \
  --seed 72
tb_start_groups a b
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
at_end() { [[ "$(tb_committed | awk '{ print $1, $2 }')" == "$(tb_watermarks | awk '{ print $1, $3 }')" ]]; }
tb_wait_until 180 "everything committed" at_end || tb_die "not everything was committed"
tb_stop "${TB_PID[a]}" || tb_not_ok "dedupd a exited non-zero after SIGTERM"
tb_stop "${TB_PID[b]}" || tb_not_ok "dedupd b exited non-zero after SIGTERM"

tb_shards_expect_ledger "$TB_DIR/expect.json"
tb_shards_expect_placed
for reason in bad_json key_missing key_too_long rejected conflict; do
  tb_eq "dead letters $reason (distinct messages)" "$(tb_expect_get "dead_letters.$reason")" \
    "$(tb_dlq_distinct "$reason")"
done
tb_check "process a applied keys" test "$(tb_summary_sum applied "$TB_DIR/a.log")" -gt 0
tb_check "process b applied keys" test "$(tb_summary_sum applied "$TB_DIR/b.log")" -gt 0
tb_eq "together they applied each key once" "$(tb_expect_get unique_keys_applied)" \
  "$(tb_summary_sum applied "$TB_DIR/a.log" "$TB_DIR/b.log")"
tb_assert_committed_at_end
tb_done
