#!/usr/bin/env bash
# 134: a topic created again, with two database shards. Each shard records
# the group's position (5) with its check message; the topic is created
# again with eight other payments. The position is not the topic's in
# either shard: the partition starts at its log start offset, every new
# payment is applied once in its shard, both shards' rows are written anew
# (8, checked by a message of the new topic), and Kafka's offset is
# committed at the end.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/positions.sh"
tb_init topic_created_again_shards
tb_shards 2
tb_mock payments:1
TB_KAFKA_PROPS=auto.commit.interval.ms=200
TB_DEDUP_EXTRA='shard_key = "${order_no}";'
tb_config
tb_migrate || tb_die "migrate failed"
shard_rows() {
  local k
  for k in 0 1; do
    tb_shard_sql "$k" "SELECT next_offset, IFNULL(check_offset, 'none') FROM dedupd_position
                       WHERE group_id = 'tg'" | tr '\t' ' '
  done | paste -sd'|'
}
pos_payments old 0 5 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the run on the old topic failed"
tb_check "both shards record position 5 with a check" grep -Eq '^5 [0-4]\|5 [0-4]$' <<<"$(shard_rows)"

pos_topic_created_again payments:1
pos_payments new 0 8 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the run on the new topic failed"
tb_eq "its eight payments applied" 8 "$(tb_summary applied)"
tb_eq "a mismatch counted" 1 "$(tb_summary position_mismatches)"
tb_eq "every payment of the new topic once, over the shards" "8 8" \
  "$(for k in 0 1; do tb_shard_sql "$k" "SELECT biz_key FROM ledger_entry WHERE biz_key LIKE 'pay:m1:new%'"; done |
    awk '{ n++; d[$0] = 1 } END { print n + 0, length(d) }')"
tb_check "both shards' positions written anew (8, checked by the new topic)" \
  grep -Eq '^8 [0-7]\|8 [0-7]$' <<<"$(shard_rows)"
tb_assert_committed_at_end
tb_done
