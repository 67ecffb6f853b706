#!/usr/bin/env bash
# 130: a topic deleted and created again holds other messages at the
# offsets the database's position names. Five payments are applied (the
# database's position is 5); the topic is created again and eight other
# payments arrive. The position was written with the message below it
# that dedupd read (its check); the partition holds another message there
# now, so the position is not used to skip anything: `dedupd stats` says
# so, and the run says it at error level naming both messages, counts
# dedupd_position_mismatches_total, starts at the log start offset and
# applies all eight (none of the first five is skipped), commits the end
# and writes the row anew, so a restart reads nothing again.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../http.sh"
source "$(dirname "$0")/positions.sh"
pos_bed topic_created_again
pos_old_topic

pos_topic_created_again payments:1
pos_payments new 0 8 | tb_produce 2>/dev/null || tb_die "produce failed"
"$DEDUPD" stats -c "$TB_CONF" >"$TB_DIR/stats.txt" 2>&1 || tb_not_ok "dedupd stats"
tb_check "dedupd stats says the position is not the topic's" \
  grep -Eq "^  payments \[0\] +5, not this topic's \(written after the message at [0-4] \(timestamp [0-9]+, digest [0-9a-f]{16}\.\.\.\), but there the partition holds timestamp [0-9]+, digest [0-9a-f]{16}\.\.\.\): the next run starts at 0$" \
  "$TB_DIR/stats.txt"

port=$(tb_free_port)
TH_URL="http://127.0.0.1:$port"
echo "http = { listen = \"127.0.0.1:$port\"; };" >>"$TB_CONF"
tb_start live
live=$TB_LAST_PID
applied() { (($(tb_sql 'SELECT COUNT(*) FROM ledger_entry') >= 13)); }
tb_wait_until 60 "the eight new payments applied" applied || tb_not_ok "the new payments applied"
th_scrape
tb_eq "dedupd_position_mismatches_total" 1 "$(th_metric dedupd_position_mismatches_total)"
tb_eq "no rewind, no gap" "0 0" \
  "$(th_metric dedupd_position_rewinds_total) $(th_metric dedupd_position_gaps_total)"
at_end() { [[ "$(pos_row)" == 8\ [0-7] ]] && [[ "$(tb_committed)" == "0 8" ]]; }
tb_wait_until 30 "the position and the offset at the end" at_end || true
tb_stop "$live" || tb_not_ok "the run stops cleanly"

tb_eq "every payment of the new topic applied once" "8 8" \
  "$(tb_sql "SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM ledger_entry WHERE biz_key LIKE 'pay:m1:new%'" | tr '\t' ' ')"
tb_eq "and the old ones still once" 5 \
  "$(tb_sql "SELECT COUNT(*) FROM ledger_entry WHERE biz_key LIKE 'pay:m1:old%'")"
tb_assert_committed_at_end
tb_check "the position is written anew: 8, checked by a message of the new topic" \
  grep -Eq '^8 [0-7]$' <<<"$(pos_row)"
tb_check "the error line names the group, the partition and both messages" \
  grep -Eq "level=error msg=\"The database's position of group tg, payments \[0\] is 5, written after the message at [0-4] \(timestamp [0-9]+, digest [0-9a-f]{16}\.\.\.\), but there the partition holds timestamp [0-9]+, digest [0-9a-f]{16}\.\.\.: it was taken in another life of the topic .*Starting at the log start offset 0, where nothing is missed" \
  "$TB_DIR/live.log"

tb_run || tb_die "the restart failed"
tb_eq "a restart reads nothing again" 0 "$(tb_summary messages)"
tb_eq "and finds the position the topic's" 0 "$(tb_summary position_mismatches)"
tb_done
