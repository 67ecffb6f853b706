#!/usr/bin/env bash
# 133: a position write that fails for good is not silent. dedupd runs;
# five payments are applied and their position written; then the runtime
# user loses UPDATE on dedupd_position (an error no retry fixes) and five
# more arrive. dedupd applies them, but cannot write their position: it
# says so at error level, counts it (position_errors), and stops with exit
# status 1 rather than running on without ever committing. Kafka's
# committed offset did not pass the position the database holds. With the
# privilege back, a restart applies nothing twice and ends committed.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/positions.sh"
pos_bed position_write_fails

pos_payments a 0 5 | tb_produce 2>/dev/null || tb_die "produce failed"
tb_start live
live=$TB_LAST_PID
position() { tb_sql "SELECT next_offset FROM dedupd_position WHERE group_id = 'tg'"; }
written() { [[ "$(position)" == 5 ]]; }
tb_wait_until 30 "the first five applied and their position written" written ||
  tb_die "the first position was not written"
tb_sql "REVOKE UPDATE ON \`$TB_DB\`.dedupd_position FROM '$TB_RT_USER'@'%'" ||
  tb_die "cannot revoke"
pos_payments a 5 5 | tb_produce 2>/dev/null || tb_die "produce failed"
stopped() { ! kill -0 "$live" 2>/dev/null; }
tb_wait_until 30 "dedupd stops" stopped || tb_not_ok "dedupd stops when its positions cannot be written"
rc=0
tb_stop "$live" || rc=$?
tb_eq "exit status 1" 1 "$rc"
tb_check "the error line names the shard and the server's error" \
  grep -q "level=error msg=\"Cannot write the consumer's positions in the database (.*): 1142: UPDATE command denied to user .*No retry fixes it: stopping" \
  "$TB_DIR/live.log"
tb_check "the error is counted" grep -Eq "^summary .* position_errors=[1-9]" "$TB_DIR/live.log"
tb_check "Kafka's committed offset is not past the database's position (5)" \
  test "$(tb_committed | awk '{ print $2 }')" -le 5
tb_eq "the database's position is still 5" 5 "$(position)"

tb_sql "GRANT UPDATE ON \`$TB_DB\`.dedupd_position TO '$TB_RT_USER'@'%'" || tb_die "cannot grant"
tb_run || tb_die "the restart failed"
tb_eq "every payment applied once" "10 10" \
  "$(tb_sql 'SELECT COUNT(*), COUNT(DISTINCT biz_key) FROM ledger_entry' | tr '\t' ' ')"
tb_check "the position is written" grep -Eq '^10 [0-9]$' <<<"$(pos_row)"
tb_assert_committed_at_end
tb_done
