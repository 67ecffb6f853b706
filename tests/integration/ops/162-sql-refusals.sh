#!/usr/bin/env bash
# 162: a wrong SQL handler configuration is refused before any message:
# `dedupd migrate`, `check` and `run` exit non-zero naming the file, the
# line and the statement, for two statements in one string, a placeholder
# inside a quoted literal, an empty list of statements and a malformed
# path. `check` prepares every statement as the runtime user (the
# handler's conn_init), so an unknown table and a missing privilege show
# there, naming the statement, and `run` refuses to start on them; once the
# privilege is granted, check passes.
source "$(dirname "$0")/../lib.sh"
tb_init sql_refusals
tb_mock payments:1
export TB_KEY='pay:${id}'
good='migrate = ("CREATE TABLE IF NOT EXISTS t (id VARCHAR(20) PRIMARY KEY, n INT)");
  statements = ( { name = "ins"; sql = "INSERT INTO t VALUES (${id}, ${n})"; } );'
TB_HANDLER_SQL=$good tb_config
# the line of the handler's group in every configuration tb_config writes
line=$(grep -n '^handler = ' "$TB_CONF" | cut -d: -f1)
# migrated with the good statements; no privilege on t for the runtime user yet
echo "-- none" >"$TB_DIR/none.sql"
TB_HANDLER_GRANTS="$TB_DIR/none.sql" tb_migrate || tb_die "migrate failed"

# cmd NAME CMD SQL_BODY: writes bad.conf with SQL_BODY, runs `dedupd CMD`,
# output in NAME.out; its exit status.
cmd() {
  local rc=0
  TB_HANDLER_SQL=$3 tb_config "$TB_DIR/bad.conf" >/dev/null
  timeout --foreground 60 "$DEDUPD" "$2" -c "$TB_DIR/bad.conf" >"$TB_DIR/$1.out" 2>&1 || rc=$?
  return "$rc"
}
# refused NAME CMD SQL_BODY WHAT: CMD exits non-zero and its output says WHAT.
refused() {
  local rc=0
  cmd "$1" "$2" "$3" || rc=$?
  tb_check "$1: dedupd $2 exits non-zero ($rc)" test "$rc" -ne 0
  tb_check "$1: it says \"$4\"" grep -qF -- "$4" "$TB_DIR/$1.out" ||
    sed 's/^/#   /' "$TB_DIR/$1.out"
}
refused two migrate 'statements = ( { name = "two"; sql = "INSERT INTO t VALUES (1, 1); DELETE FROM t"; } );' \
  "bad.conf:$line: statement two: two statements in one string (the ';' at column 28 is followed by more at column 30)"
refused quoted check "statements = ( { name = \"paid\"; sql = \"UPDATE t SET n = 1 WHERE id = '\${id}'\"; } );" \
  "bad.conf:$line: statement paid: the placeholder at column 32 is inside a quoted literal"
refused empty run 'statements = ( );' \
  "bad.conf:$line: handler.sql.statements is required"
refused path check 'statements = ( { name = "ins"; sql = "INSERT INTO t VALUES (${id}, ${n..x})"; } );' \
  "statement ins: the placeholder at column 30: bad path \"n..x\": empty field name at column 3"
refused denied check "$good" "statement ins: INSERT command denied to user '$TB_RT_USER'@'localhost' for table"
refused denied-run run "$good" "conn_init failed: statement ins: INSERT command denied"

# granted on the whole database: a typo in a table's name is now an
# unknown table
tb_sql "GRANT INSERT ON \`$TB_DB\`.* TO '$TB_RT_USER'@'%'" || tb_die "grant failed"
refused table check 'statements = ( { name = "nope"; sql = "INSERT INTO nope VALUES (${id})"; } );' \
  "FAIL handler connection: handler "
tb_check "table: check names the statement and the table" \
  grep -q "statement nope: Table '$TB_DB.nope' doesn't exist (1146)" "$TB_DIR/table.out"
refused table-run run 'statements = ( { name = "nope"; sql = "INSERT INTO nope VALUES (${id})"; } );' \
  "statement nope: Table '$TB_DB.nope' doesn't exist (1146)"
rc=0
cmd granted check "$good" || rc=$?
tb_eq "granted: check passes" 0 "$rc"
tb_check "granted: its conn_init prepared the statements as the runtime user" \
  grep -q "^ok   handler connection: sql's conn_init succeeded as $TB_RT_USER" "$TB_DIR/granted.out"
tb_eq "nothing was applied or consumed" 0 "$(tb_sql 'SELECT COUNT(*) FROM t')"
tb_done
