#!/usr/bin/env bash
# 131: a topic created again holds fewer messages than the database's
# position. Five payments applied (position 5); the topic is created again
# with three other payments: the position is past the partition's end, so
# the run says it is not the topic's, applies the three from the log
# start and writes the row anew at 3, not kept at 5 by GREATEST. Two
# more payments then arrive and a restart applies them: none is skipped,
# as it would be starting at the old position 5.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/positions.sh"
pos_bed topic_created_again_shorter
pos_old_topic

pos_topic_created_again payments:1
pos_payments new 0 3 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the run on the new topic failed"
tb_eq "its three payments applied" 3 "$(tb_summary applied)"
tb_eq "a mismatch counted" 1 "$(tb_summary position_mismatches)"
tb_check "the error line says the position is past the end" \
  grep -Eq "level=error msg=\"The database's position of group tg, payments \[0\] is 5, past the partition's end 3; it was written after the message at [0-4] \(timestamp [0-9]+, digest [0-9a-f]{16}\.\.\.\), and there the partition holds (nothing|timestamp [0-9]+, digest [0-9a-f]{16}\.\.\.): it was taken in another life of the topic" \
  <(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
tb_check "the position is written anew at the end of the new topic, 3" grep -Eq '^3 [0-2]$' \
  <<<"$(pos_row)"
tb_assert_committed_at_end

pos_payments new 3 2 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_run || tb_die "the restart failed"
tb_eq "the two later payments applied" 2 "$(tb_summary applied)"
tb_eq "nothing read again" 2 "$(tb_summary messages)"
tb_eq "the position found the topic's" 0 "$(tb_summary position_mismatches)"
tb_eq "every payment of the new topic applied once" "5 5" \
  "$(tb_sql "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM ledger_entry WHERE biz_key LIKE 'pay:m1:new%'" | tr '\t' ' ')"
tb_check "the position is 5, checked by a message of the new topic" grep -Eq '^5 [0-4]$' \
  <<<"$(pos_row)"
tb_assert_committed_at_end
tb_done
