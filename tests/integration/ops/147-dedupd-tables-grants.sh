#!/usr/bin/env bash
# 147: the privileges on dedupd's own tables (sql/grants.sql's [runtime]
# and [outbox] lines other than the dedup table's) are checked at start
# like the dedup table's: without the grant on dedupd_position (the one the
# walkthrough of docs/HANDLERS.md once left out) `dedupd check` fails
# naming the GRANT and `dedupd run` refuses to start, consuming nothing,
# instead of running with the positions off. The same for UPDATE alone on
# dedupd_position, SELECT on dedupd_shard_layout and DELETE on
# dedupd_outbox (outbox.enabled). With every grant back, check passes
# without a warning and run keeps the positions.
source "$(dirname "$0")/../lib.sh"
tb_init dedupd_tables_grants
tb_mock payments:2
tb_config "$TB_CONF" 'outbox = { enabled = true; };'
tb_migrate || tb_die "migrate failed"
tb_gen --keys 20 --dup-min 1 --dup-max 1 --partitions 2 --bad 0 --conflicts 0 --seed 147
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
who="'$TB_RT_USER'@'%'"
on() { echo "\`$TB_DB\`.\`$1\`"; }
revoke() { tb_sql "REVOKE $1 ON $(on "$2") FROM $who"; }
grant() { tb_sql "GRANT $1 ON $(on "$2") TO $who"; }

# refused WHAT CHECK_LINE RUN_TEXT: check exits 1 with CHECK_LINE (a fixed
# line start), run exits 1 saying RUN_TEXT, and nothing is consumed.
refused() {
  local rc=0
  "$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.out" 2>&1 || rc=$?
  tb_eq "$1: check fails" 1 "$rc"
  tb_check "$1: check names the privilege and the GRANT" grep -qF -- "$2" "$TB_DIR/check.out"
  tb_check "$1: check says it failed" grep -qx 'check failed' "$TB_DIR/check.out"
  rc=0
  tb_run || rc=$?
  tb_eq "$1: run refuses to start" 1 "$rc"
  tb_check "$1: run says why" grep -qF -- "$3" <(tail -n +"$((TB_RUN_START + 1))" "$TB_DIR/run.log")
  tb_eq "$1: nothing consumed" "" "$(tb_committed | awk '$2 > 0')"
}

revoke "SELECT, INSERT, UPDATE" dedupd_position
grant="GRANT SELECT, INSERT, UPDATE ON $(on dedupd_position) TO $who"
refused "without the grant on dedupd_position" \
  "FAIL positions: the database user $who lacks SELECT, INSERT, UPDATE on $TB_DB.dedupd_position (needed to keep the consumer's positions in the database): $grant" \
  "Stopping: the database user $who lacks SELECT, INSERT, UPDATE on $TB_DB.dedupd_position"
tb_check "run does not take the missing grant for a missing table" \
  bash -c "! grep -q 'no table dedupd_position' '$TB_DIR/run.log'"
grant "SELECT, INSERT" dedupd_position
refused "without UPDATE on dedupd_position" \
  "FAIL positions: the database user $who lacks UPDATE on $TB_DB.dedupd_position" \
  "GRANT UPDATE ON $(on dedupd_position) TO $who"
grant UPDATE dedupd_position

revoke SELECT dedupd_shard_layout
refused "without SELECT on dedupd_shard_layout" \
  "FAIL privileges: the database user $who lacks SELECT on $TB_DB.dedupd_shard_layout (needed to read the shard layout dedupd migrate recorded): GRANT SELECT ON $(on dedupd_shard_layout) TO $who" \
  "GRANT SELECT ON $(on dedupd_shard_layout) TO $who"
grant SELECT dedupd_shard_layout

revoke DELETE dedupd_outbox
refused "without DELETE on dedupd_outbox" \
  "FAIL privileges: the database user $who lacks DELETE on $TB_DB.dedupd_outbox" \
  "GRANT DELETE ON $(on dedupd_outbox) TO $who"
grant DELETE dedupd_outbox

rc=0
"$DEDUPD" check -c "$TB_CONF" >"$TB_DIR/check.out" 2>&1 || rc=$?
tb_eq "with every grant back, check passes" 0 "$rc"
tb_check "... without a warning" grep -qx 'check passed' "$TB_DIR/check.out"
tb_check "... saying the positions are granted" \
  grep -q "^ok   positions: $TB_RT_USER may read and write dedupd_position" "$TB_DIR/check.out"
tb_run || tb_die "run with every grant back failed"
tb_eq "every key applied" 20 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_eq "the positions kept in the database are Kafka's committed offsets" "$(tb_committed)" \
  "$(tb_sql "SELECT kpartition, next_offset FROM dedupd_position WHERE group_id = 'tg'
             AND topic = 'payments' ORDER BY kpartition" | tr '\t' ' ')"
tb_assert_committed_at_end
tb_done
