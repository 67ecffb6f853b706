#!/usr/bin/env bash
# 34: a privilege missing from dedupd's runtime user stops the command at
# start, exit 1, with a message naming the user, the privilege, the table
# (or database), the statement that needs it and the GRANT that gives it,
# before anything is consumed. One grant of sql/grants.sql is revoked at a
# time (the test bed gives exactly those):
#  - INSERT and UPDATE on the dedup table: run;
#  - DELETE: run (its background purge), and purge; with purge.interval = 0
#    run needs no DELETE;
#  - CREATE TEMPORARY TABLES on the database: replay;
#  - SELECT: stats;
# check reports the same message. With every grant back, the run applies
# the messages.
source "$(dirname "$0")/../lib.sh"
tb_init missing_grant
tb_mock payments:2
tb_config
tb_migrate || tb_die "migrate failed"
tb_gen --keys 30 --dup-min 1 --dup-max 2 --partitions 2 --bad 0 --conflicts 0 --seed 34
tb_produce <"$TB_DIR/stream.txt" 2>/dev/null || tb_die "produce failed"
who="'$TB_RT_USER'@'%'"
table="\`$TB_DB\`.\`dedup_record\`"

# expect_denied WHAT PATTERN CMD...: CMD exits 1 and its output has PATTERN
# (fixed text).
expect_denied() {
  local what="$1" pattern="$2" rc=0 out="$TB_DIR/denied.log"
  shift 2
  timeout --foreground "$(tb_secs 60)" "$@" >"$out" 2>&1 || rc=$?
  tb_eq "$what: exit 1" 1 "$rc"
  tb_check "$what: says which privilege, where and why" grep -qF -- "$pattern" "$out"
  cat "$out" >>"$TB_DIR/all-denied.log"
}
run=("$DEDUPD" run -c "$TB_CONF" --exit-at-end)
revoke() { tb_sql "REVOKE $1 ON $2 FROM $who"; }
grant() { tb_sql "GRANT $1 ON $2 TO $who"; }

revoke INSERT "$table"
expect_denied "run without INSERT" \
  "the database user $who lacks INSERT on $TB_DB.dedup_record (needed to claim keys: INSERT INTO dedup_record (biz_key, request_hash, status, ...) VALUES ...): GRANT INSERT ON $table TO $who" \
  "${run[@]}"
tb_eq "nothing was consumed" "" "$(tb_committed | awk '$2 >= 0')"
expect_denied "check without INSERT" "FAIL privileges: the database user $who lacks INSERT on" \
  "$DEDUPD" check -c "$TB_CONF"
grant INSERT "$table"

revoke UPDATE "$table"
expect_denied "run without UPDATE" \
  "lacks UPDATE on $TB_DB.dedup_record (needed to record outcomes and take failed keys over: INSERT INTO dedup_record ... ON DUPLICATE KEY UPDATE" \
  "${run[@]}"
grant UPDATE "$table"

revoke DELETE "$table"
expect_denied "run without DELETE (background purge)" \
  "lacks DELETE on $TB_DB.dedup_record (needed to delete expired keys (dedupd purge, and the background purge of dedupd run unless purge.interval = 0): DELETE FROM dedup_record WHERE expire_at < NOW(6)" \
  "${run[@]}"
expect_denied "purge without DELETE" "GRANT DELETE ON $table TO $who" "$DEDUPD" purge -c "$TB_CONF"
tb_config "$TB_DIR/nopurge.conf" 'purge = { interval = "0"; };'
rc=0
"$DEDUPD" check -c "$TB_DIR/nopurge.conf" >"$TB_DIR/check-nopurge.log" 2>&1 || rc=$?
tb_eq "purge.interval = 0: run needs no DELETE (check passes)" 0 "$rc"
TB_CONF="$TB_DIR/dedupd.conf"
grant DELETE "$table"

revoke "CREATE TEMPORARY TABLES" "\`$TB_DB\`.*"
expect_denied "replay without CREATE TEMPORARY TABLES" \
  "lacks CREATE TEMPORARY TABLES on $TB_DB.* (needed to hold the replay's working set: CREATE TEMPORARY TABLE dd_replay_key (...)): GRANT CREATE TEMPORARY TABLES ON \`$TB_DB\`.* TO $who" \
  "$DEDUPD" replay -c "$TB_CONF" --from earliest
grant "CREATE TEMPORARY TABLES" "\`$TB_DB\`.*"

revoke SELECT "$table"
expect_denied "stats without SELECT" \
  "lacks SELECT on $TB_DB.dedup_record (needed to look keys up: SELECT biz_key, request_hash, status, error FROM dedup_record" \
  "$DEDUPD" stats -c "$TB_CONF"
grant SELECT "$table"

tb_eq "no dedup row was written meanwhile" 0 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record')"
tb_run || tb_die "run with every grant back failed"
tb_eq "then every key is applied" 30 "$(tb_sql 'SELECT COUNT(*) FROM dedup_record WHERE status = 1')"
tb_assert_committed_at_end
tb_done
